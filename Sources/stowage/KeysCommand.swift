import ArgumentParser
import AsyncHTTPClient
import Foundation
import KeyDelivery
import OfflinePackage

/// `stowage keys list|renew|return|sync|audit`: the content keys this device holds (KeySession, docs/key-delivery-offline.md).
struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "List, renew, return and release the content-key leases kept in the data directory.",
        discussion: """
            The data directory is $STOWAGE_HOME, else $XDG_DATA_HOME/stowage, else ~/.local/share/stowage.
            The key server URL given last with --key-server is remembered there (key-server.url).
            Example:
              STOWAGE_HOME=/tmp/stowage stowage keys list --json
              stowage keys renew movie-1 --key-server http://127.0.0.1:8443 --token eyJhbGciOi...
              stowage keys return movie-1
              stowage keys sync --key-server http://127.0.0.1:8443
              stowage keys audit --verify
            """,
        subcommands: [List.self, Renew.self, Return.self, Sync.self, Audit.self]
    )

    static let serverURLFileName = "key-server.url"

    static var dataDirectory: URL { DataDirectory.fromEnvironment().url }

    static func openStore() throws -> KeyStore {
        try KeyStore(dataDirectory: dataDirectory)
    }

    static func fail(_ error: any Error, json: Bool = false) -> Never {
        switch error {
        case let error as KeySessionError: CommandOutput.fail(code: error.code, message: error.message, json: json)
        case let error as KeyStoreError: CommandOutput.fail(code: error.code, message: error.message, json: json)
        case let error as LeaseError: CommandOutput.fail(code: error.code, message: error.message, json: json)
        case let error as ValidationError: CommandOutput.fail(code: "invalid_arguments", message: error.message, json: json)
        default: CommandOutput.fail(code: "keys_failed", message: "\(error)", json: json)
        }
    }

    /// The key server URL: `given` (remembered for next time), else the remembered one.
    static func serverURL(_ given: String?) throws -> URL? {
        let file = dataDirectory.appendingPathComponent(serverURLFileName)
        if let given {
            guard let url = URL(string: given), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil else {
                throw ValidationError("--key-server must be an http(s) URL, got \(given)")
            }
            try? Data((given + "\n").utf8).write(to: file, options: .atomic)
            return url
        }
        guard let data = try? Data(contentsOf: file) else { return nil }
        return URL(string: String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Runs `body` with a session on `url`, shutting the HTTP client down after.
    static func withSession<Result>(url: URL, token: String?, store: KeyStore, _ body: (KeySession) async throws -> Result) async throws -> Result {
        let device = try DeviceIdentity.loadOrCreate(in: dataDirectory)
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        let session = KeySession(clock: SystemClock(), http: http, store: store, device: device, serverURL: url, token: token)
        let result: Swift.Result<Result, any Error>
        do {
            result = .success(try await body(session))
        } catch {
            result = .failure(error)
        }
        try? await http.shutdown()
        return try result.get()
    }

    static func time(_ value: Int64?) -> String {
        guard let value else { return "-" }
        return ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(value)))
    }

    static func duration(_ seconds: Int64?) -> String {
        guard let seconds else { return "unlimited" }
        return seconds >= 86_400 ? "\(seconds / 86_400)d\((seconds % 86_400) / 3_600)h" : "\(seconds / 3_600)h\((seconds % 3_600) / 60)m"
    }

    // MARK: list

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show every lease: asset, key IDs, type, state, storage expiry, playback time left, renewable until, pending release.",
            discussion: """
                Example:
                  STOWAGE_HOME=/tmp/stowage stowage keys list
                  stowage keys list --json
                """
        )

        @Flag(help: "Print a JSON array instead of a table.")
        var json = false

        struct Row: Encodable {
            var leaseId: String
            var assetId: String
            var keyIds: [String]
            var type: String
            var state: String
            var storageExpiresAt: Int64
            var playbackTimeLeft: Int64?
            var renewableUntil: Int64?
            var pendingRelease: Bool
        }

        func run() async throws {
            do {
                let store = try KeysCommand.openStore()
                let now = SystemClock().now
                let pending = Set(try store.pendingReleases().map(\.leaseId))
                let rows = try store.leases().map { lease in
                    let record = lease.record
                    let playbackLeft: Int64? =
                        if !record.state.holdsKeyMaterial { 0 } else if let end = record.playbackEndsAt { max(0, end - now) } else {
                            record.terms.playbackDuration
                        }
                    return Row(
                        leaseId: lease.leaseId,
                        assetId: lease.assetId,
                        keyIds: record.terms.keyIds,
                        type: record.terms.type.rawValue,
                        state: record.state.rawValue,
                        storageExpiresAt: record.terms.storageExpiresAt,
                        playbackTimeLeft: playbackLeft,
                        renewableUntil: record.terms.renewableUntil,
                        pendingRelease: pending.contains(lease.leaseId)
                    )
                }
                if json {
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
                    print(String(decoding: try encoder.encode(rows), as: UTF8.self))
                    return
                }
                if rows.isEmpty { print("no leases in \(KeysCommand.dataDirectory.path)") }
                for row in rows {
                    print("\(row.assetId)  lease \(row.leaseId)  \(row.type)  \(row.state)\(row.pendingRelease ? "  release pending" : "")")
                    print("  keys: \(row.keyIds.joined(separator: ", "))")
                    print("  storage expires: \(KeysCommand.time(row.storageExpiresAt))")
                    print("  playback time left: \(KeysCommand.duration(row.playbackTimeLeft))")
                    print("  renewable until: \(row.renewableUntil.map { KeysCommand.time($0) } ?? "not renewable")")
                }
            } catch {
                KeysCommand.fail(error, json: json)
            }
        }
    }

    // MARK: renew

    struct Renew: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Renew the leases of an asset (or all leases) with the key server.",
            discussion: """
                Example:
                  stowage keys renew movie-1 --key-server http://127.0.0.1:8443 --token eyJhbGciOi...
                  stowage keys renew --all --key-server https://keys.example.com --token "$TOKEN"
                """
        )

        @Argument(help: "The asset whose leases to renew.")
        var asset: String?

        @Flag(help: "Renew every lease that still holds keys.")
        var all = false

        @Option(help: "The key server's base URL.")
        var keyServer: String

        @Option(help: "The entitlement token (JWT).")
        var token: String

        func validate() throws {
            guard (asset != nil) != all else { throw ValidationError("give either an ASSET or --all") }
        }

        func run() async throws {
            do {
                let store = try KeysCommand.openStore()
                guard let url = try KeysCommand.serverURL(keyServer) else { throw ValidationError("--key-server is required") }
                let leases = try store.leases(assetId: all ? nil : asset).filter { $0.state.holdsKeyMaterial && $0.hasKeyMaterial }
                if leases.isEmpty { throw KeySessionError.leaseNotStored(asset ?? "any asset") }
                try await KeysCommand.withSession(url: url, token: token, store: store) { session in
                    for lease in leases {
                        let record = try await session.renew(leaseId: lease.leaseId)
                        print("renewed \(record.assetId) lease \(record.leaseId): storage expires \(KeysCommand.time(record.terms.storageExpiresAt))")
                    }
                }
            } catch {
                KeysCommand.fail(error)
            }
        }
    }

    // MARK: return

    struct Return: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Return an asset: erase its keys now, then tell the key server (queued if it cannot be reached).",
            discussion: """
                Example:
                  stowage keys return movie-1 --key-server http://127.0.0.1:8443
                """
        )

        @Argument(help: "The asset to return.")
        var asset: String

        @Option(help: "The key server's base URL (default: the one used last).")
        var keyServer: String?

        func run() async throws {
            do {
                let store = try KeysCommand.openStore()
                guard let url = try KeysCommand.serverURL(keyServer) else {
                    let returned = try store.returnAsset(assetId: asset, at: SystemClock().now)
                    print(
                        "returned \(returned.count) lease(s) of \(asset); releases queued (no key server known: run `stowage keys sync --key-server URL`)"
                    )
                    return
                }
                let (returned, sync) = try await KeysCommand.withSession(url: url, token: nil, store: store) { session in
                    try await session.returnAsset(assetId: asset)
                }
                print(returned.isEmpty ? "no leases of \(asset) to return" : "returned \(returned.count) lease(s) of \(asset)")
                KeysCommand.report(sync)
            } catch {
                KeysCommand.fail(error)
            }
        }
    }

    static func report(_ sync: KeySession.SyncReport) {
        for leaseId in sync.released { print("released lease \(leaseId)") }
        for (leaseId, reason) in sync.failed.sorted(by: { $0.key < $1.key }) { print("release of \(leaseId) still queued: \(reason)") }
    }

    // MARK: sync

    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send every queued release to the key server.",
            discussion: """
                Example:
                  stowage keys sync --key-server http://127.0.0.1:8443
                Exits 1 while releases remain queued.
                """
        )

        @Option(help: "The key server's base URL (default: the one used last).")
        var keyServer: String?

        func run() async throws {
            let sync: KeySession.SyncReport
            do {
                let store = try KeysCommand.openStore()
                guard let url = try KeysCommand.serverURL(keyServer) else { throw ValidationError("no key server known: pass --key-server URL") }
                sync = try await KeysCommand.withSession(url: url, token: nil, store: store) { try await $0.syncReleases() }
            } catch {
                KeysCommand.fail(error)
            }
            if sync.released.isEmpty && sync.failed.isEmpty { print("no releases queued") }
            KeysCommand.report(sync)
            if !sync.isComplete { throw ExitCode(1) }
        }
    }

    // MARK: audit

    struct Audit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the key audit journal, or check its hash chain with --verify.",
            discussion: """
                Example:
                  stowage keys audit
                  stowage keys audit --verify
                """
        )

        @Flag(help: "Check the hash chain; exit 1 if it was altered.")
        var verify = false

        func run() async throws {
            let intact: Bool
            do {
                let store = try KeysCommand.openStore()
                if verify {
                    let result = try store.verifyAuditJournal()
                    print(result.description)
                    intact = result.isIntact
                } else {
                    for entry in try store.auditEntries() {
                        print(
                            "\(entry.sequence)  \(KeysCommand.time(entry.time))  \(entry.kind)  \(entry.assetId ?? "-")  \(entry.leaseId ?? "-")  \(entry.detail)"
                        )
                    }
                    intact = true
                }
            } catch {
                KeysCommand.fail(error)
            }
            if !intact { throw ExitCode(1) }
        }
    }
}
