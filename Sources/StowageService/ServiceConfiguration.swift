public import Foundation
import StowageCore
public import StowageLibrary

/// How the download service runs (`stowage service run` options).
public struct ServiceConfiguration: Sendable {
    /// Downloads run at once; more wait in the queue, highest priority first, then oldest.
    public var maxDownloads: Int
    /// A total rate every download shares, bytes per second (`--limit-rate 5M`); nil: unlimited.
    public var bytesPerSecond: Int64?
    /// Free space kept on the data directory's file system: no download starts below it, and a running one pauses
    /// and waits when the next file would go below it (`--keep-free 1G`).
    public var keepFreeBytes: Int64
    /// Local hours downloads may run (`--window 01:00-06:00`); nil: any time.
    public var window: TimeWindow?
    /// How often leases are looked after (renewals, releases, purge).
    public var upkeepInterval: Duration
    /// When upkeep renews a lease.
    public var upkeepPolicy: LeaseUpkeepPolicy
    /// A shell command that prints an entitlement token for a renewal (`--token-command`), run with
    /// `STOWAGE_ASSET_ID`, `STOWAGE_LEASE_ID` and `STOWAGE_KEY_SERVER` set; nil: the token the asset was downloaded
    /// with.
    public var tokenCommand: String?
    /// How often the queue and the conditions are checked.
    public var tickInterval: Duration
    /// The first wait after a download stopped for a condition that may pass (network down); doubled each time, up to
    /// ``maximumRetryDelay``.
    public var initialRetryDelay: Duration
    public var maximumRetryDelay: Duration
    /// How downloads behave (timeouts, retries); the service sets the rate, the free-space floor and pausing on
    /// transient failures from the members above.
    public var downloads: DownloadSession.Configuration
    /// The free bytes of the file system holding a URL (injectable for tests).
    public var freeSpace: @Sendable (URL) -> Int64?

    public init(
        maxDownloads: Int = 2,
        bytesPerSecond: Int64? = nil,
        keepFreeBytes: Int64 = 256 << 20,
        window: TimeWindow? = nil,
        upkeepInterval: Duration = .seconds(900),
        upkeepPolicy: LeaseUpkeepPolicy = LeaseUpkeepPolicy(),
        tokenCommand: String? = nil,
        tickInterval: Duration = .seconds(1),
        initialRetryDelay: Duration = .seconds(2),
        maximumRetryDelay: Duration = .seconds(300),
        downloads: DownloadSession.Configuration = DownloadSession.Configuration(),
        freeSpace: @escaping @Sendable (URL) -> Int64? = DownloadSession.systemFreeSpace
    ) {
        self.maxDownloads = maxDownloads
        self.bytesPerSecond = bytesPerSecond
        self.keepFreeBytes = keepFreeBytes
        self.window = window
        self.upkeepInterval = upkeepInterval
        self.upkeepPolicy = upkeepPolicy
        self.tokenCommand = tokenCommand
        self.tickInterval = tickInterval
        self.initialRetryDelay = initialRetryDelay
        self.maximumRetryDelay = maximumRetryDelay
        self.downloads = downloads
        self.freeSpace = freeSpace
    }

    /// The download session configuration the service runs with.
    var sessionConfiguration: DownloadSession.Configuration {
        var configuration = downloads
        configuration.storageMargin = keepFreeBytes
        configuration.freeSpace = freeSpace
        configuration.pausesOnTransientFailure = true
        // A failure that may pass is the queue's to wait out, with its own back-off; the transfer gives up sooner.
        configuration.retry.networkDownGrace = min(configuration.retry.networkDownGrace, 15)
        if let rate = bytesPerSecond {
            configuration.bandwidth = TokenBucket(bytesPerSecond: Int(rate), capacity: Int(max(64 << 10, rate / 4)))
            // Under a low shared rate a stream's next read may wait its turn behind every other stream's: allow for it.
            let streams = Double(max(1, maxDownloads) * 4)
            let turn = Int64((streams * Double(256 << 10) / Double(rate)).rounded(.up))
            configuration.readTimeout = max(configuration.readTimeout, 3 * turn)
            configuration.transferTimeout = max(configuration.transferTimeout, 86_400)
        }
        return configuration
    }
}

/// Where the service listens: `service.sock` in the data directory (a Unix domain socket, mode 0600, in a
/// directory of mode 0700: only the owner can talk to it), and `service.lock`, which one running service holds.
public struct ServiceEndpoint: Sendable, Hashable {
    public let dataDirectory: DataDirectory

    public init(dataDirectory: DataDirectory) {
        self.dataDirectory = dataDirectory
    }

    public var socketURL: URL { dataDirectory.url.appendingPathComponent("service.sock") }
    var lockURL: URL { dataDirectory.url.appendingPathComponent("service.lock") }

    /// The longest socket path Linux takes (`sun_path` holds 108 bytes with the terminating NUL).
    static let maximumSocketPathBytes = 107

    /// - Throws: ``ServiceSetupError`` `socket_path_too_long` when the data directory's path is too long to hold the
    ///   socket.
    func checkSocketPath() throws(ServiceSetupError) {
        guard socketURL.path.utf8.count <= Self.maximumSocketPathBytes else {
            throw ServiceSetupError(
                code: .socketPathTooLong,
                message: "the service's socket \(socketURL.path) is longer than the \(Self.maximumSocketPathBytes) bytes a Unix "
                    + "socket path may have; use a shorter data directory ($STOWAGE_HOME)"
            )
        }
    }
}
