import ArgumentParser
import Foundation
import KeyDelivery
import OfflinePackage
import StowageCore
import StowageLibrary

/// `stowage keys list|renew|return|sync|trust|unpin|audit`: the content keys this device holds (KeySession,
/// docs/key-delivery-offline.md).
struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "List, renew, return and release the content-key leases kept in the data directory.",
        discussion: """
            The data directory is $STOWAGE_HOME, else $XDG_DATA_HOME/stowage, else ~/.local/share/stowage.
            Each lease remembers the key server it came from: renewals, first-play reports and releases go there.
            Example:
              STOWAGE_HOME=/tmp/stowage stowage keys list --json
              stowage keys renew movie-1 --token-file ~/.config/stowage/token
              stowage keys return movie-1
              stowage keys fetch movie-1 --key-server https://keys.example.com --token-file token.jwt
              stowage keys sync
              stowage keys trust https://keys.example.com
              stowage keys audit --verify
            """,
        subcommands: [List.self, Renew.self, Return.self, Fetch.self, Sync.self, Trust.self, Unpin.self, Audit.self]
    )

    static func fail(_ error: any Error, json: Bool) -> Never {
        CommandOutput.fail(error, json: json)
    }

    static func time(_ value: Int64?) -> String {
        guard let value else { return "-" }
        return HumanTime.date(value)
    }

    static func duration(_ seconds: Int64?) -> String {
        guard let seconds else { return "unlimited" }
        return HumanTime.duration(seconds)
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

        func run() async throws {
            do {
                let rows = try await Library.with { try $0.leases() }
                if json {
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
                    print(String(decoding: try encoder.encode(rows), as: UTF8.self))
                    return
                }
                if rows.isEmpty { print("no leases in \(DataDirectory.fromEnvironment().url.path)") }
                for row in rows {
                    print(
                        "\(row.assetId)  lease \(row.leaseId)  \(row.type)  \(row.tampering == nil ? row.state : "tampered")"
                            + (row.pendingRelease ? "  release pending" : "")
                    )
                    if let tampering = row.tampering { print("  refused (lease_tampered): \(tampering)") }
                    print("  key server: \(row.keyServer)")
                    print("  keys: \(row.keyIds.joined(separator: ", "))")
                    print("  storage expires: \(KeysCommand.time(row.storageExpiresAt))")
                    print("  playback time left: \(KeysCommand.duration(row.playbackTimeLeft))")
                    print("  renewable until: \(row.renewableUntil.map { KeysCommand.time($0) } ?? "not renewable")")
                    if let renewed = row.lastRenewedAt {
                        print("  last renewed: \(KeysCommand.time(renewed))\(row.lastRenewedBy.map { " by the \($0)" } ?? "")")
                    }
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
                Each lease is renewed with the key server it came from. A renewal also clears that lease's latches (a
                clock once set back, a tampered time record) and repairs a lease refused with lease_tampered.
                Example:
                  stowage keys renew movie-1 --token-file ~/.config/stowage/token
                  STOWAGE_TOKEN="$TOKEN" stowage keys renew --all
                """
        )

        @Argument(help: "The asset whose leases to renew.")
        var asset: String?

        @Flag(help: "Renew every lease that still holds keys.")
        var all = false

        @OptionGroup var tokenInput: TokenOptions

        @OptionGroup var output: OutputOptions

        func validate() throws {
            guard (asset != nil) != all else { throw ValidationError("give either an ASSET or --all") }
        }

        struct Renewed: Encodable {
            let assetId: String
            let leaseId: String
            let storageExpiresAt: Int64
        }

        func run() async throws {
            do {
                let token = tokenInput.required(for: "renewing a lease", json: output.json)
                let renewed = try await Library.with { try await $0.renewLeases(assetId: all ? nil : asset, token: token) }
                if output.json {
                    print(
                        Library.json(renewed.map { Renewed(assetId: $0.assetId, leaseId: $0.leaseId, storageExpiresAt: $0.terms.storageExpiresAt) })
                    )
                    return
                }
                for record in renewed {
                    print("renewed \(record.assetId) lease \(record.leaseId): storage expires \(KeysCommand.time(record.terms.storageExpiresAt))")
                }
            } catch {
                KeysCommand.fail(error, json: output.json)
            }
        }
    }

    // MARK: return

    struct Return: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Return an asset: erase its keys now, then tell the key server (queued if it cannot be reached).",
            discussion: """
                Example:
                  stowage keys return movie-1
                """
        )

        @Argument(help: "The asset to return.")
        var asset: String

        @OptionGroup var output: OutputOptions

        struct Returned: Encodable {
            let assetId: String
            let returned: [String]
            let sync: KeySession.SyncReport
        }

        func run() async throws {
            do {
                let (returned, sync) = try await Library.with { try await $0.returnLeases(assetId: asset) }
                if output.json {
                    print(Library.json(Returned(assetId: asset, returned: returned.map(\.leaseId), sync: sync)))
                    return
                }
                print(returned.isEmpty ? "no leases of \(asset) to return" : "returned \(returned.count) lease(s) of \(asset)")
                KeysCommand.report(sync)
            } catch {
                KeysCommand.fail(error, json: output.json)
            }
        }
    }

    // MARK: fetch

    struct Fetch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Obtain again the keys of a downloaded asset that this device no longer holds, without downloading media.",
            discussion: """
                For a package whose lease was returned or whose storage window ended, or after `stowage recover` set a
                damaged state database aside. Keys still held are left alone; the key server decides whether to issue
                a new lease, as it would for a new download. The key server and token default to those of the asset's
                download, else to the server of its last lease.
                Example:
                  stowage keys fetch movie-1 --key-server https://keys.example.com --token-file token.jwt
                  stowage keys fetch movie-1 --json
                """
        )

        @Argument(help: "The asset whose keys to obtain.")
        var asset: String

        @Option(name: .customLong("key-server"), help: "The key server's URL (default: the download's, else the last lease's).")
        var keyServer: String?

        /// The entitlement token (default: the download's).
        @OptionGroup var tokenInput: TokenOptions

        @OptionGroup var output: OutputOptions

        func run() async throws {
            do {
                let token = tokenInput.resolve(json: output.json)
                let fetched = try await Library.with { try await $0.fetchKeys(assetId: asset, keyServerURL: keyServer, token: token) }
                if output.json {
                    print(Library.json(fetched))
                    return
                }
                if fetched.leaseIds.isEmpty && fetched.identityKeys == 0 {
                    print("every key of \(asset) is held already; nothing fetched")
                    return
                }
                for leaseId in fetched.leaseIds { print("lease \(leaseId) of \(asset) stored") }
                print("\(asset): \(fetched.skdKeys) skd key(s) and \(fetched.identityKeys) identity key(s) obtained")
            } catch {
                KeysCommand.fail(error, json: output.json)
            }
        }
    }

    static func report(_ sync: KeySession.SyncReport) {
        for leaseId in sync.reported { print("reported the first play of lease \(leaseId)") }
        for leaseId in sync.released { print("released lease \(leaseId)") }
        for (leaseId, reason) in sync.failed.sorted(by: { $0.key < $1.key }) { print("lease \(leaseId) still queued: \(reason)") }
    }

    // MARK: sync

    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Tell the key servers what they must know: first plays, then every queued release.",
            discussion: """
                Each report goes to the key server its lease came from.
                Example:
                  stowage keys sync
                Exits 1 while something remains queued.
                """
        )

        @OptionGroup var output: OutputOptions

        func run() async throws {
            let sync: KeySession.SyncReport
            do {
                sync = try await Library.with { try await $0.syncLeases() }
            } catch {
                KeysCommand.fail(error, json: output.json)
            }
            if output.json {
                print(Library.json(sync))
                if !sync.isComplete { throw ExitCode(1) }
                return
            }
            if sync.reported.isEmpty && sync.released.isEmpty && sync.failed.isEmpty { print("nothing queued") }
            KeysCommand.report(sync)
            if !sync.isComplete { throw ExitCode(1) }
        }
    }

    // MARK: trust

    struct Trust: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Trust a key server that playlists advertise (key-servers.json in the data directory), or list the trusted ones.",
            discussion: """
                Downloads send the entitlement token only to a key server named with --key-server or
                --trust-key-server, listed here, or advertised on the playlist's own host over https.
                Example:
                  stowage keys trust https://keys.example.com
                  stowage keys trust https://keys.example.com --remove
                  stowage keys trust
                """
        )

        @Argument(help: "The key server URL (https, or http on loopback); omitted: list the trusted ones.")
        var url: String?

        @Flag(help: "Stop trusting it.")
        var remove = false

        @OptionGroup var output: OutputOptions

        func run() async throws {
            do {
                guard let url else {
                    let list = try await Library.with { try $0.trustedKeyServers() }
                    if output.json { return print(Library.json(["trusted": list])) }
                    print(list.isEmpty ? "no key servers trusted beyond the playlists' own hosts" : list.joined(separator: "\n"))
                    return
                }
                guard let parsed = URL(string: url) else { throw ValidationError("\(url) is not a URL") }
                let list = try await Library.with { try $0.trustKeyServer(parsed, remove: remove) }
                if output.json { return print(Library.json(["trusted": list])) }
                print(remove ? "no longer trusted: \(url)" : "trusted: \(url)")
                print("trusted key servers: \(list.isEmpty ? "none" : list.joined(separator: ", "))")
            } catch {
                KeysCommand.fail(error, json: output.json)
            }
        }
    }

    // MARK: unpin

    struct Unpin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Forget the signing key pinned for a key server, after its operator changed it on purpose.",
            discussion: """
                Refused while a lease from that key server still holds keys (delete or return the asset first).
                Example:
                  stowage keys unpin https://keys.example.com
                """
        )

        @Argument(help: "The key server URL.")
        var url: String

        @OptionGroup var output: OutputOptions

        func run() async throws {
            do {
                guard let parsed = URL(string: url), let key = KeyServerURL.normalized(parsed) else {
                    throw ValidationError("\(url) is not an http(s) URL")
                }
                let removed = try await Library.with { try $0.unpinKeyServer(parsed) }
                if output.json { return print(Library.json(["keyServer": key, "unpinned": "\(removed)"])) }
                print(removed ? "unpinned \(key)" : "no key was pinned for \(key)")
            } catch {
                KeysCommand.fail(error, json: output.json)
            }
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

        @OptionGroup var output: OutputOptions

        func run() async throws {
            let intact: Bool
            do {
                if verify {
                    let result = try await Library.with { try $0.verifyAuditJournal() }
                    print(output.json ? Library.json(result) : result.description)
                    intact = result.isIntact
                } else if output.json {
                    print(Library.json(try await Library.with { try $0.auditEntries() }))
                    intact = true
                } else {
                    for entry in try await Library.with({ try $0.auditEntries() }) {
                        print(
                            "\(entry.sequence)  \(KeysCommand.time(entry.time))  \(entry.kind)  \(entry.assetId ?? "-")  \(entry.leaseId ?? "-")  \(entry.detail)"
                        )
                    }
                    intact = true
                }
            } catch {
                KeysCommand.fail(error, json: output.json)
            }
            if !intact { throw ExitCode(1) }
        }
    }
}
