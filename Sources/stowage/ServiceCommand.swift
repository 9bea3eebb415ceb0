import ArgumentParser
import Foundation
import Logging
import OfflinePackage
import ServiceLifecycle
import StowageCore
import StowageLibrary
import StowageService
import UnixSignals

/// `stowage service run|install|status|upkeep`: the background download service (docs/service.md).
struct ServiceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "service",
        abstract: "Run the background download service: a queue of downloads that outlives the terminal, and lease upkeep.",
        discussion: """
            While the service runs, `stowage download --background` hands downloads to it, and list, info, pause,
            resume, cancel, delete and `download --attach` go through it. When it does not run, every command works
            on its own as before.
            Example:
              stowage service run --max-downloads 2 --limit-rate 5M --keep-free 2G
              stowage service install --window 01:00-07:00 && systemctl --user enable --now stowage
              stowage service status
            Documentation: docs/service.md.
            """,
        subcommands: [Run.self, Install.self, Status.self, Upkeep.self]
    )

    /// The options `run` and `install` share.
    struct Options: ParsableArguments {
        @Option(help: "Downloads run at once; more wait in the queue.")
        var maxDownloads = 2

        @Option(help: "A total rate all downloads share, e.g. 500K, 5M (powers of 1024).")
        var limitRate: String?

        @Option(help: "Free space to keep on the data directory's file system, e.g. 2G; downloads wait below it.")
        var keepFree = "256M"

        @Option(help: "Local hours downloads may run, HH:MM-HH:MM (e.g. 01:00-07:00, or 22:00-06:00 across midnight).")
        var window: String?

        @Option(help: "Seconds between lease upkeep rounds (renewals, releases, purge).")
        var upkeepInterval = 900

        @Option(help: "Renew a lease once less than this share of its storage window is left.")
        var renewBelow = 0.25

        @Option(help: "A shell command that prints an entitlement token for a renewal (gets STOWAGE_ASSET_ID, STOWAGE_LEASE_ID, STOWAGE_KEY_SERVER).")
        var tokenCommand: String?

        @OptionGroup var proxy: ProxyOptions

        func validate() throws {
            guard (1...16).contains(maxDownloads) else { throw ValidationError("--max-downloads must be 1...16") }
            guard upkeepInterval >= 1 else { throw ValidationError("--upkeep-interval must be at least 1 second") }
            guard renewBelow > 0, renewBelow < 1 else { throw ValidationError("--renew-below must be between 0 and 1, e.g. 0.25") }
        }

        func configuration() throws -> ServiceConfiguration {
            ServiceConfiguration(
                maxDownloads: maxDownloads,
                bytesPerSecond: try limitRate.map { try ByteQuantity.parse($0, option: "--limit-rate") },
                keepFreeBytes: try ByteQuantity.parse(keepFree, option: "--keep-free"),
                window: try window.map { try TimeWindow(parsing: $0) },
                upkeepInterval: .seconds(upkeepInterval),
                upkeepPolicy: LeaseUpkeepPolicy(renewWhenLeft: renewBelow),
                tokenCommand: tokenCommand,
                downloads: DownloadSession.Configuration(proxy: try proxy.settings())
            )
        }

        /// The options as `service run` arguments (for the systemd unit).
        var arguments: [String] {
            var words = ["--max-downloads", String(maxDownloads), "--keep-free", keepFree, "--upkeep-interval", String(upkeepInterval)]
            words += ["--renew-below", String(renewBelow)]
            if let limitRate { words += ["--limit-rate", limitRate] }
            if let window { words += ["--window", window] }
            if let tokenCommand { words += ["--token-command", tokenCommand] }
            if let proxy = proxy.proxy { words += ["--proxy", proxy] }
            return words
        }
    }

    /// `stowage service run`
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the service in the foreground (for systemd or a container) until SIGTERM or Ctrl-C.",
            discussion: """
                Listens on DATA/service.sock (mode 0600). At start it continues every pending download, even one
                interrupted by a crash, without fetching complete files again. SIGTERM or Ctrl-C stops running
                downloads so that the next start continues them.
                Example:
                  stowage service run --max-downloads 1 --limit-rate 2M --window 01:00-07:00
                """
        )

        @OptionGroup var options: Options

        func run() async throws {
            do {
                var logger = Logger(label: "stowage.service")
                logger.logLevel = .notice
                // Announced once it answers: a service refused (another one runs) says only why.
                let service = try DownloadService.open(configuration: try options.configuration(), logger: logger) { socket in
                    Terminal.standardError("download service on \(socket); Ctrl-C stops it\n")
                }
                let group = ServiceGroup(services: [service], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
                try await group.run()
                await service.library.close()
            } catch {
                CommandOutput.fail(error, json: false)
            }
        }
    }

    /// `stowage service install`
    struct Install: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a systemd user unit that runs the service, and say how to enable it.",
            discussion: """
                Writes ~/.config/systemd/user/stowage.service ($XDG_CONFIG_HOME respected) running this stowage with
                the options given and the current data directory.
                Example:
                  stowage service install --max-downloads 2 --limit-rate 5M
                  systemctl --user daemon-reload && systemctl --user enable --now stowage
                """
        )

        @OptionGroup var options: Options

        func run() async throws {
            do {
                _ = try options.configuration()  // the same checks `run` makes, now rather than at boot
                let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().path
                let unit = SystemdUnit(
                    executable: executable,
                    arguments: options.arguments,
                    dataDirectory: DataDirectory.fromEnvironment().url.path
                )
                let file = try unit.write()
                print("wrote \(file.path)")
                print("enable and start it with: systemctl --user daemon-reload && systemctl --user enable --now stowage")
                print("to keep it running after you log out: loginctl enable-linger \(ProcessInfo.processInfo.environment["USER"] ?? "$USER")")
            } catch {
                CommandOutput.fail(error, json: false)
            }
        }
    }

    /// `stowage service status`
    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show whether the service runs, its queue and its last lease upkeep.",
            discussion: """
                Exit status 0 when it runs, 3 when it does not.
                Example:
                  stowage service status --json
                """
        )

        @Flag(help: "Print JSON.")
        var json = false

        func run() async throws {
            guard let client = await ServiceClient.connect() else {
                if json {
                    print(#"{"running":false}"#)
                } else {
                    print("the download service is not running (start it with `stowage service run`)")
                }
                Foundation.exit(3)
            }
            do {
                let status = try await client.status()
                await client.close()
                if json {
                    print(Library.json(status))
                    return
                }
                print("the download service runs (process \(status.pid)) on \(status.dataDirectory)")
                let rate = status.bytesPerSecond.map { "\(Library.megabytes($0))/s" } ?? "unlimited"
                print("  at most \(status.maxDownloads) download(s) at once, rate \(rate), keeps \(Library.megabytes(status.keepFreeBytes)) free")
                if let window = status.window { print("  runs downloads between \(window) local time") }
                if status.downloads.isEmpty { print("  no downloads pending") }
                for download in status.downloads { print("  " + ServiceText.line(download)) }
                if let upkeep = status.lastUpkeep {
                    print(
                        "  last lease upkeep \(HumanTime.date(upkeep.at)): \(upkeep.renewed.count) renewed, \(upkeep.released.count) released, "
                            + "\(upkeep.purged.count) purged, \(upkeep.renewalFailures.count) renewal failure(s)"
                    )
                    if let failure = upkeep.storeFailure { print("  \(failure.message) [\(failure.code)]") }
                }
            } catch {
                await client.close()
                CommandOutput.fail(error, json: json)
            }
        }
    }

    /// `stowage service upkeep`
    struct Upkeep: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Have the running service look after the leases now (renew what is due, send queued releases, purge).",
            discussion: """
                Example:
                  stowage service upkeep --json
                """
        )

        @Flag(help: "Print JSON.")
        var json = false

        func run() async throws {
            do {
                let client = try await ServiceClient.require()
                let report = try await client.upkeepLeases()
                await client.close()
                if json {
                    print(Library.json(report))
                    return
                }
                print("renewed \(report.renewed.count), released \(report.released.count), purged \(report.purged.count)")
                if let failure = report.storeFailure { print("  \(failure.message) [\(failure.code)]") }
                for (lease, failure) in report.renewalFailures.sorted(by: { $0.key < $1.key }) {
                    print("  \(lease): \(failure.message) [\(failure.code)]")
                }
            } catch {
                CommandOutput.fail(error, json: json)
            }
        }
    }
}

/// How the commands describe a download the service holds.
enum ServiceText {
    static func line(_ download: ServiceDownload) -> String {
        var text = "\(download.assetId): "
        if download.running {
            text += "downloading"
            if let fraction = download.fraction { text += String(format: " %d%%", Int(fraction * 100)) }
        } else if download.waiting {
            text += "waiting"
        } else {
            text += download.state
            if let position = download.position { text += position == 0 ? " (next)" : " (\(position) ahead)" }
        }
        if download.priority != 0 { text += ", priority \(download.priority)" }
        if let reason = download.reason, !download.running {
            text += " — \(ControlCharacters.shown(reason.message, keepingLineBreaks: false)) [\(reason.code)]"
        }
        return text
    }
}
