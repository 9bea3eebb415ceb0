public import Foundation
public import HTTPServing
import Hummingbird
public import Logging
import NIOCore
import OfflinePackage
import ServiceLifecycle
public import StowageCore

/// How and why a playback session ended.
public struct PlaybackEnd: Sendable, Hashable, CustomStringConvertible {
    /// Why the session ended.
    public enum Reason: String, Sendable, Hashable {
        /// The caller stopped it (its task was cancelled: Ctrl-C, the player exited).
        case stopped
        /// The package was deleted while it played (`stowage delete`).
        case packageDeleted = "package_deleted"
        /// The player started by ``PlaybackServer/run(player:playerStandardError:onListening:)`` exited.
        case playerExited = "player_exited"
    }

    /// Why the session ended.
    public let reason: Reason
    /// The asset that was playing.
    public let assetId: String
    /// The player's exit status, for ``Reason/playerExited``.
    public let playerExitStatus: Int32?

    /// - Parameters:
    ///   - reason: why the session ended.
    ///   - assetId: the asset that was playing.
    ///   - playerExitStatus: the player's exit status, when a player was started and exited.
    public init(reason: Reason, assetId: String, playerExitStatus: Int32? = nil) {
        self.reason = reason
        self.assetId = assetId
        self.playerExitStatus = playerExitStatus
    }

    /// The refusal to report for ``Reason/packageDeleted``; nil when the session was simply stopped.
    public var error: PlaybackError? {
        reason == .packageDeleted ? .packageDeleted(assetId: assetId) : nil
    }

    public var description: String {
        switch reason {
        case .stopped: "playback of \(assetId) stopped"
        case .packageDeleted: "playback of \(assetId) ended: the package was deleted"
        case .playerExited: "playback of \(assetId) ended: the player exited with status \(playerExitStatus ?? 0)"
        }
    }
}

/// The loopback HLS server of one `stowage play` session: serves an authorized package on 127.0.0.1 under an
/// unguessable session path, with playlists stripped of their key tags and segments decrypted on the fly.
///
/// - URLs: the player is given a one-time entry URL (``Address/multivariantURL``) that serves the multivariant
///   playlist once; that playlist names everything under a second token only the player sees (``PlaybackSessionPath``).
/// - Playlists: `master.m3u8` without EXT-X-SESSION-KEY, each rendition's playlist without EXT-X-KEY.
/// - Segments: streamed from disk through the segment's decryptor (SAMPLE-AES TS to clear TS, cbcs fMP4 to clear fMP4,
///   AES-128 to clear) a chunk at a time, hashed on the way; a file whose SHA-256 differs from the manifest is cut
///   short and logged as `segment_checksum_mismatch`.
/// - Init sections: decrypted (AES-128 EXT-X-MAP) and rewritten clear (cbcs) once per session.
/// - Every request re-checks the gate with the injected clock: 403 once the lease has expired (or the clock was set
///   back), logged in the package's `logs/error.log`; every request goes to `logs/access.log`.
/// - Once the package folder is gone (deleted during play) requests get 410 and ``run(onListening:)`` returns
///   ``PlaybackEnd/Reason/packageDeleted``.
///
/// ```swift
/// let authorization = try gate.authorize(assetId: "movie-1")
/// let server = try PlaybackServer(authorization: authorization, gate: gate)
/// let end = try await server.run { address in print(address.multivariantURL) }
/// ```
public struct PlaybackServer: Sendable {
    /// Where to listen and how to stream.
    public struct Configuration: Sendable {
        /// The address to bind: loopback, since the decrypted stream must not leave the machine.
        public var host: String
        /// 0 lets the OS pick a free port.
        public var port: Int
        /// Bytes read from disk per step of a segment's stream.
        public var chunkSize: Int
        /// How often the package folder is checked for deletion between requests.
        public var packageCheckInterval: Duration
        /// While the package downloads: how long a request for a file not there yet waits for the running download
        /// before it gets `503` with `Retry-After`.
        public var downloadWait: Duration
        /// Told of every request answered (`stowage play --json` prints them).
        public var onRequest: (@Sendable (PlaybackRequestEvent) -> Void)?
        /// The connection cap and request deadlines (``HTTPServing/ConnectionLimits/standard`` by default).
        public var connectionLimits: ConnectionLimits = .standard
        /// The user (uid) whose processes may open the one-time entry URL; nil: the server's own user. Another user's
        /// process, which may have read the URL from the player's command line, is refused and logged
        /// (`playback_url_other_user`). Set it only to run the player as a user of your choosing (a player that
        /// refuses to run as root, say).
        public var playerUser: UInt32?

        public init(
            host: String = "127.0.0.1",
            port: Int = 0,
            chunkSize: Int = 256 * 1024,
            packageCheckInterval: Duration = .milliseconds(500),
            downloadWait: Duration = .seconds(20),
            onRequest: (@Sendable (PlaybackRequestEvent) -> Void)? = nil
        ) {
            self.onRequest = onRequest
            self.host = host
            self.port = port
            self.chunkSize = chunkSize
            self.packageCheckInterval = packageCheckInterval
            self.downloadWait = downloadWait
        }
    }

    /// Where a running session is reachable.
    public struct Address: Sendable, Hashable {
        public var host: String
        public var port: Int
        /// The session path, `/TOKEN/`: only the served playlists name it.
        public var sessionPath: String
        /// The one-time entry path, `/ENTRY/`.
        public var entryPath: String
        /// The multivariant playlist's name in the package (`master.m3u8`).
        public var multivariantPlaylist: String

        /// `http://HOST:PORT/TOKEN/`: where the player is sent by the playlists (in-process callers may use it too).
        public var sessionURL: URL { URL(string: "http://\(host):\(port)\(sessionPath)")! }
        /// `http://HOST:PORT/TOKEN/master.m3u8`: the multivariant playlist under the session token, any number of times,
        /// for a caller in this process that plays more than once (a second rendition, say). Never put it on a command
        /// line: give players ``multivariantURL``.
        public var sessionMultivariantURL: URL { sessionURL.appendingPathComponent(multivariantPlaylist) }
        /// `http://HOST:PORT/ENTRY/master.m3u8`: the URL to give the player. It serves the multivariant playlist once.
        public var multivariantURL: URL { URL(string: "http://\(host):\(port)\(entryPath)")!.appendingPathComponent(multivariantPlaylist) }
    }

    /// The authorized package served.
    public let authorization: PlaybackAuthorization
    /// The gate each request is re-checked with.
    public let gate: PlaybackGate
    /// The session's unguessable path.
    public let sessionPath: PlaybackSessionPath
    public let configuration: Configuration
    private let logger: Logger

    /// - Parameters:
    ///   - authorization: what ``PlaybackGate/authorize(assetId:)`` granted.
    ///   - gate: the gate that granted it (its clock and key store re-check every request).
    ///   - sessionPath: the session path; a fresh random one by default.
    ///   - configuration: loopback, OS-assigned port by default.
    ///   - logger: the server's logger; warnings and errors only by default.
    /// - Throws: when no random session path can be drawn.
    public init(
        authorization: PlaybackAuthorization,
        gate: PlaybackGate,
        sessionPath: PlaybackSessionPath? = nil,
        configuration: Configuration = Configuration(),
        logger: Logger? = nil
    ) throws {
        self.authorization = authorization
        self.gate = gate
        self.sessionPath = try sessionPath ?? PlaybackSessionPath()
        self.configuration = configuration
        var fallback = Logger(label: "stowage.playback")
        fallback.logLevel = .warning
        self.logger = logger ?? fallback
    }

    /// Serves until the calling task is cancelled or the package is deleted, then shuts down gracefully.
    ///
    /// - Parameter onListening: called once with the bound address (with the real port when 0 was asked for).
    /// - Returns: why the session ended.
    /// - Throws: the server's error when it cannot bind.
    @discardableResult
    public func run(onListening: @escaping @Sendable (Address) async -> Void = { _ in }) async throws -> PlaybackEnd {
        let (events, continuation) = AsyncStream.makeStream(of: PlaybackEnd.Reason.self, bufferingPolicy: .bufferingOldest(4))
        let responder = PlaybackResponder(
            granted: RecordingAuthorization(authorization),
            gate: gate,
            sessionPath: sessionPath,
            entry: EntryLatch(owner: configuration.playerUser ?? geteuid()),
            logs: PlaybackLogs(package: authorization.package, onRequest: configuration.onRequest),
            initSections: InitSectionCache(),
            playlists: ClearPlaylistCache(),
            onlineFiles: OnlineFiles(),
            // Files the download or `verify --deep` checked, unchanged since, are not hashed again.
            verified: VerifiedFiles(trusted: VerifiedFileRecords.read(in: authorization.package).identities(for: authorization.manifest)),
            chunkSize: max(4096, configuration.chunkSize),
            downloadWait: configuration.downloadWait,
            downloadPoll: .milliseconds(100),
            end: { continuation.yield($0) }
        )
        let host = configuration.host
        let address = Address(
            host: host,
            port: 0,
            sessionPath: sessionPath.description,
            entryPath: sessionPath.entryPrefix,
            multivariantPlaylist: authorization.manifest.multivariantPlaylist
        )
        let app = Application(
            responder: responder,
            server: configuration.connectionLimits.server,
            configuration: configuration.connectionLimits.configuration(
                address: .hostname(host, port: configuration.port),
                serverName: "stowage-play"
            ),
            onServerRunning: { channel in
                var bound = address
                bound.port = channel.localAddress?.port ?? 0
                responder.prepare()
                if let local = channel.localAddress?.ipAddress, let port = channel.localAddress?.port {
                    await ServerWarmUp.request(host: local, port: port, path: responder.warmUpPath)
                }
                await onListening(bound)
            },
            logger: logger
        )
        // The service group runs in its own task so that ending the session is a graceful shutdown rather than a
        // cancellation of every open connection (the pattern of OriginServer's Origin).
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: logger))
        let runner = Task {
            defer { continuation.yield(.stopped) }
            try await group.run()
        }
        let package = authorization.package
        let interval = configuration.packageCheckInterval
        let watcher = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                if !package.exists || !FileSystem.exists(package.manifestURL) {
                    continuation.yield(.packageDeleted)
                    return
                }
            }
        }
        let reason = await withTaskCancellationHandler {
            var iterator = events.makeAsyncIterator()
            return await iterator.next() ?? .stopped
        } onCancel: {
            continuation.yield(.stopped)
        }
        watcher.cancel()
        await group.triggerGracefulShutdown()
        try await runner.value
        continuation.finish()
        if reason == .packageDeleted {
            logger.notice("playback ended: the package was deleted", metadata: ["asset": "\(authorization.assetId)"])
        }
        return PlaybackEnd(reason: reason, assetId: authorization.assetId)
    }

    /// Serves while `player` plays the session's URL: starts the player once the server listens, and ends the
    /// session when the player exits (``PlaybackEnd/Reason/playerExited``), when the package is deleted (the player is
    /// then terminated), or when the calling task is cancelled (Ctrl-C; the player is terminated too).
    ///
    /// ```swift
    /// let end = try await server.run(player: .ffplay) { address in print(address.multivariantURL) }
    /// ```
    ///
    /// - Parameters:
    ///   - player: the player to start.
    ///   - playerStandardError: where the player's diagnostics go; inherited by default.
    ///   - onListening: called once with the bound address, before the player starts.
    /// - Returns: why the session ended.
    /// - Throws: the server's error when it cannot bind; the player's when it cannot be started.
    @discardableResult
    public func run(
        player: PlaybackPlayer,
        playerStandardError: ChildProcess.Stream = .inherit,
        onListening: @escaping @Sendable (Address) async -> Void = { _ in }
    ) async throws -> PlaybackEnd {
        let (urls, continuation) = AsyncStream.makeStream(of: URL.self, bufferingPolicy: .bufferingOldest(1))
        let assetId = authorization.assetId
        return try await withThrowingTaskGroup(of: PlaybackEnd?.self) { group in
            group.addTask {
                defer { continuation.finish() }
                return try await self.run { address in
                    await onListening(address)
                    continuation.yield(address.multivariantURL)
                }
            }
            group.addTask {
                var iterator = urls.makeAsyncIterator()
                guard let url = await iterator.next() else { return nil }
                let status = try await player.play(url, standardError: playerStandardError)
                return PlaybackEnd(reason: .playerExited, assetId: assetId, playerExitStatus: status)
            }
            // The first to end decides; the other is stopped (the server gracefully, the player terminated).
            var first: PlaybackEnd?
            while let next = try await group.next() {
                if first == nil, let next { first = next }
                group.cancelAll()
            }
            return first ?? PlaybackEnd(reason: .stopped, assetId: assetId)
        }
    }
}
