import ArgumentParser
import Foundation
import KeyDelivery
import KeyServer
import Logging
import StowageCrypto

/// `stowage keyserver init|add-asset|token|run`: set up and run the key server (docs/key-server.md).
struct KeyServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keyserver",
        abstract: "Set up and run the key server that issues content keys under leases.",
        discussion: """
            Example:
              stowage keyserver init --data-dir /tmp/keys
              openssl rand -hex 16 | stowage keyserver add-asset movie-1 --key-id 000102030405060708090a0b0c0d0e0f --key - --data-dir /tmp/keys
              stowage keyserver token --sub alice --asset movie-1 --data-dir /tmp/keys
              stowage keyserver run --data-dir /tmp/keys --port 8443
            A fleet keeps its state in PostgreSQL: give each command --database URL (or set STOWAGE_KEYSERVER_DATABASE),
            and copy the data directory (keys, config.json) to every instance:
              stowage keyserver init --data-dir /srv/keys --database postgres://stowage@db.internal/keys
              stowage keyserver run --data-dir /srv/keys --database postgres://stowage@db.internal/keys --host 0.0.0.0
            Documentation: docs/key-server.md.
            """,
        subcommands: [Initialize.self, AddAsset.self, Token.self, Run.self, Migrate.self, RotateMasterKey.self]
    )

    /// Where a command finds the server: its data directory, and the PostgreSQL database when one is named.
    struct Location: ParsableArguments {
        @Option(help: "The key server's data directory: keys and config.json (and keyserver.sqlite without --database).")
        var dataDir: String

        @Option(
            help: ArgumentHelp(
                "A PostgreSQL database for the server's state: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|require&pool=N].",
                discussion: "Defaults to STOWAGE_KEYSERVER_DATABASE; without either, keyserver.sqlite in --data-dir."
            )
        )
        var database: String?

        var directory: KeyServerDataDirectory {
            let named = database ?? ProcessInfo.processInfo.environment["STOWAGE_KEYSERVER_DATABASE"]
            return KeyServerDataDirectory(path: dataDir, database: named?.isEmpty == false ? named : nil)
        }
    }

    /// Prints a setup error as every command does and exits 1.
    static func fail(_ error: any Error) -> Never {
        CommandOutput.fail(error, json: false)
    }

    /// `stowage keyserver init --data-dir DIR`
    struct Initialize: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "init",
            abstract: "Create a data directory: signing key, master key, token secret, config.json with the default policy, database.",
            discussion: """
                Existing files are kept, so running it again is harmless. Prints the server's public signing key.
                With --database, creates the PostgreSQL schema or brings it up to date (what `run` asks for when it finds
                an old one); safe to run from several instances at once.
                """
        )

        @OptionGroup var location: Location

        func run() async throws {
            do {
                let directory = try await KeyServerDataDirectory.initialize(at: location.dataDir, database: location.directory.database)
                let publicKey = try directory.loadSigningKey().publicKey.rawRepresentation
                print("initialized \(directory.path)")
                if directory.database != nil { print("database schema at version \(PostgresKeyServerStore.schemaVersion)") }
                print("server signing key (base64): \(Data(publicKey).base64EncodedString())")
            } catch {
                KeyServerCommand.fail(error)
            }
        }
    }

    /// `stowage keyserver add-asset ASSET_ID --key-id HEX (--key - | --key-file FILE) [--policy NAME] --data-dir DIR`
    struct AddAsset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-asset",
            abstract: "Add a content key to an asset; the key is sealed under the master key, never stored in the clear."
        )

        @Argument(help: "The asset ID, [A-Za-z0-9._-]{1,128}.")
        var assetID: String

        @Option(help: "The key ID: 32 hex digits (as in skd://ASSET_ID/KEY_ID).")
        var keyId: String

        /// The 16-byte content key.
        @OptionGroup var contentKey: KeyOptions

        @Option(help: "A policy name from config.json; the default policy when left out.")
        var policy: String?

        @OptionGroup var location: Location

        func run() async throws {
            let key = contentKey.resolve(lengths: [16], json: false)
            do {
                try await location.directory.addAsset(id: assetID, keyID: keyId.lowercased(), key: key, policy: policy)
                print("added key \(keyId.lowercased()) to asset \(assetID)")
            } catch {
                KeyServerCommand.fail(error)
            }
        }
    }

    /// `stowage keyserver token --sub ACCOUNT --asset ASSET_ID [--ttl SECONDS] --data-dir DIR`
    struct Token: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "token",
            abstract: "Print an HS256 entitlement token signed with the data directory's token secret.",
            discussion: """
                Repeat --asset for several assets; --asset '*' (every asset) only where config.json sets allowWildcardAssets.
                The token carries iat, exp and aud (config.json's tokenAudience); --ttl is at most maxTokenLifetime.
                Example:
                  stowage keyserver token --sub alice --asset movie-1 --ttl 3600 --data-dir /srv/keys
                """
        )

        @Option(help: "The account (the token's sub claim).")
        var sub: String

        @Option(help: "An asset the token entitles (repeatable), or '*'.")
        var asset: [String]

        @Option(help: "Seconds until the token expires.")
        var ttl: Int64 = 86_400

        @Option(help: "The key server's data directory.")
        var dataDir: String

        func validate() throws {
            guard !asset.isEmpty else { throw ValidationError("give at least one --asset") }
            guard ttl > 0 else { throw ValidationError("--ttl must be positive") }
        }

        func run() async throws {
            do {
                print(try await KeyServerDataDirectory(path: dataDir).makeToken(subject: sub, assets: asset, ttl: ttl))
            } catch {
                KeyServerCommand.fail(error)
            }
        }
    }

    /// `stowage keyserver migrate --from DATA_DIR --database URL`
    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "migrate",
            abstract: "Copy a key server's SQLite store into an empty PostgreSQL database, verified before it is committed.",
            discussion: """
                Copies assets and sealed keys, devices, leases, the replay window's nonces and the audit log in one
                transaction; counts every table on both sides and opens a sample of content keys from both with the data
                directory's master key before committing. Stop the key server using the SQLite store first: rows it
                writes during the copy make the migration fail (migration_mismatch) rather than be lost.
                Then run the server with the same data directory and --database URL.
                Example:
                  stowage keyserver migrate --from /srv/keys --database postgres://stowage@db.internal/keys
                """
        )

        @Option(help: "The SQLite key server's data directory (its keyserver.sqlite and master key).")
        var from: String

        @Option(help: "The PostgreSQL database to fill: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=...].")
        var database: String

        func run() async throws {
            do {
                let report = try await KeyServerStoreMigration.copy(from: KeyServerDataDirectory(path: from), to: database)
                for (table, rows) in report.counts { print("\(table): \(rows) rows") }
                print("verified: row counts equal, \(report.keysCompared) content keys open the same from both")
                print("next: stowage keyserver run --data-dir \(from) --database URL")
            } catch {
                KeyServerCommand.fail(error)
            }
        }
    }

    /// `stowage keyserver rotate-master-key [--prepare] --data-dir DIR [--database URL]`
    struct RotateMasterKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-master-key",
            abstract: "Re-seal every content key under a new master key, in batches, while servers keep serving.",
            discussion: """
                Creates master-key.next (unless --prepare made it), re-seals every content key under it in batches of
                --batch-size rows, then keeps master-key as master-key.old, renames master-key.next over master-key,
                re-seals what was added meanwhile and deletes master-key.old. Running servers open keys sealed under
                any of the three files and read them again when they change, so none needs a restart. Killed part-way,
                every key still opens; run it again to carry on.
                With --database (a fleet), run --prepare first and copy master-key.next into every instance's data
                directory, then rotate; afterwards copy the new master-key to every instance.
                Example:
                  stowage keyserver rotate-master-key --data-dir /tmp/keys
                  stowage keyserver rotate-master-key --prepare --data-dir /srv/keys --database postgres://stowage@db.internal/keys
                """
        )

        @Flag(help: "Only create master-key.next, to copy to every instance of a fleet before rotating.")
        var prepare = false

        @Option(help: "Rows re-sealed per transaction.")
        var batchSize = 1_000

        @OptionGroup var location: Location

        func validate() throws {
            guard batchSize > 0, batchSize <= 100_000 else { throw ValidationError("--batch-size must be between 1 and 100000") }
        }

        func run() async throws {
            let directory = location.directory
            do {
                if prepare {
                    let created = try directory.prepareMasterKeyRotation()
                    let file = directory.path(of: KeyServerDataDirectory.nextMasterKeyFile)
                    print(created ? "created \(file)" : "\(file) already exists; kept")
                    print("next: copy it (mode 0600) into the data directory of every instance, then run rotate-master-key without --prepare")
                    return
                }
                let report = try await directory.rotateMasterKey(batchSize: batchSize)
                if report.finishedEarlierRotation {
                    print("finished the rotation an earlier run left: \(report.resealedInFinalPass) of \(report.keys) content keys re-sealed")
                } else {
                    print("re-sealed \(report.resealed + report.resealedInFinalPass) of \(report.keys) content keys under the new master key")
                }
                print("\(directory.path(of: KeyServerDataDirectory.masterKeyFile)) is the new master key; master-key.old was deleted")
                if directory.database != nil { print("next: copy master-key into the data directory of every instance") }
            } catch {
                KeyServerCommand.fail(error)
            }
        }
    }

    /// `stowage keyserver run --data-dir DIR [--host 127.0.0.1] [--port N]`
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run",
            abstract: "Serve the key protocol over HTTP.",
            discussion: """
                Prints 'listening on http://HOST:PORT' once ready; stops on Ctrl-C or SIGTERM, after the requests in
                flight. Logs one line per request on standard error (request ID, route, status, duration), as text or
                JSON. Besides the protocol it answers GET /healthz (up), GET /readyz (database reachable, schema
                current; 503 otherwise) and GET /metrics (Prometheus). With --database, refuses a database it cannot reach or whose schema is not current
                (database_unavailable, schema_outdated naming `stowage keyserver init --database URL`).
                Plain HTTP belongs on loopback: put a TLS proxy in front to serve other hosts.
                """
        )

        @OptionGroup var location: Location

        @Option(help: "The address to bind.")
        var host = "127.0.0.1"

        @Option(help: "The port; 0 picks a free one.")
        var port = 0

        @Option(help: "How log lines on standard error look: text, or json (one object per line, for log shippers).")
        var logFormat: LogFormat = .text

        @Option(help: "The least severe log lines written: trace, debug, info (one line per request), notice, warning, error.")
        var logLevel: LogLevel = .info

        enum LogFormat: String, ExpressibleByArgument, CaseIterable {
            case text, json
        }

        /// swift-log's levels, as the command line spells them.
        enum LogLevel: String, ExpressibleByArgument, CaseIterable {
            case trace, debug, info, notice, warning, error, critical

            var level: Logger.Level { Logger.Level(rawValue: rawValue)! }
        }

        func run() async throws {
            let level = logLevel.level
            let format = logFormat
            LoggingSystem.bootstrap { label in
                switch format {
                case .json: JSONLogHandler(label: label)
                case .text: StreamLogHandler.standardError(label: label)
                }
            }
            var logger = Logger(label: "stowage.keyserver")
            logger.logLevel = level
            let server: KeyServerApplication
            do {
                server = try await KeyServerApplication(dataDirectory: location.directory, logger: logger)
            } catch {
                KeyServerCommand.fail(error)
            }
            let service = KeyServerService(server, host: host, port: port) { address in
                // Unbuffered, so a script reading our output sees the line at once.
                Terminal.standardOutput("listening on \(address.baseURL.absoluteString)\n")
            }
            do {
                try await CommandOutput.runUntilSignalled([service])
                await server.close()
            } catch {
                await server.close()
                KeyServerCommand.fail(error)  // cannot bind, for example
            }
        }
    }
}
