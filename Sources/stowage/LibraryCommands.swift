import ArgumentParser
import Foundation
import OfflinePackage
import StowageCore
import StowageLibrary
import StowageService

/// Shared pieces of the commands that read the offline library: opening it, rendering.
enum Library {
    /// Runs `body` with the library on `$STOWAGE_HOME` (or the default data directory), closing it after.
    static func with<T>(_ body: (OfflineLibrary) async throws -> T) async throws -> T {
        let library = try OfflineLibrary()
        do {
            let result = try await body(library)
            await library.close()
            return result
        } catch {
            await library.close()
            throw error
        }
    }

    static func json<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// One line of JSON (keys sorted), for event streams.
    static func line<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    static func fail(_ error: any Error, json: Bool, status: Int32 = 1) -> Never {
        CommandOutput.fail(error, json: json, status: status)
    }

    static func megabytes(_ bytes: Int64) -> String { String(format: "%.1f MB", Double(bytes) / 1e6) }

    /// `48h`, `30m`, `2d`, `90s` or plain seconds.
    static func parseDuration(_ text: String) throws -> Int64 {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800]
        if let unit = text.last, let multiplier = units[unit], let value = Int64(text.dropLast()), value >= 0 { return value * multiplier }
        if let value = Int64(text), value >= 0 { return value }
        throw ValidationError("'\(text)' is not a duration: use e.g. 48h, 30m, 2d or seconds")
    }

    static func leaseText(_ lease: PackageLeaseSummary?) -> String {
        guard let lease else { return "no lease" }
        guard lease.isValid else { return lease.code?.rawValue ?? "invalid" }
        var parts = ["valid"]
        if let left = lease.timeLeft { parts.append("\(HumanTime.duration(left)) left") }
        if !lease.playbackStarted, let playback = lease.playbackDuration { parts.append("\(HumanTime.duration(playback)) to watch once started") }
        return parts.joined(separator: ", ")
    }
}

/// `stowage list [--json]`
struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the offline assets: state, size on disk, renditions offline, lease and time left.",
        discussion: """
            Example:
              stowage list
              stowage list --json
            """
    )

    @Flag(help: "Print JSON.")
    var json = false

    func run() async throws {
        do {
            let rows = try await ServiceDriver.either {
                try await $0.assets()
            } local: {
                try $0.assets()
            }
            if json {
                print(Library.json(rows))
                return
            }
            if rows.isEmpty {
                print("no offline assets (stowage download URL adds one)")
                return
            }
            for row in rows {
                let title = row.title.map { " \"\($0)\"" } ?? ""
                print(
                    "\(row.assetId)\(title)  \(row.state)  \(Library.megabytes(row.sizeOnDisk))  renditions \(row.renditionsOffline)/\(row.renditions) offline  lease: \(Library.leaseText(row.lease))"
                )
                // One line, whatever a server put in the message: a line feed in it must not print a row of its own.
                if let failure = row.failure, row.state != "complete" {
                    print("    " + ControlCharacters.shown("\(failure)", keepingLineBreaks: false))
                }
            }
        } catch {
            Library.fail(error, json: json)
        }
    }
}

/// `stowage info ASSET [--json]`
struct InfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show which media selections of an asset play offline and which only online.",
        discussion: """
            Example:
              stowage info demo-1
            """
    )

    @Argument(help: "The asset ID.")
    var assetId: String

    @Flag(help: "Print JSON.")
    var json = false

    func run() async throws {
        do {
            let info = try await ServiceDriver.either {
                try await $0.info(assetId: assetId)
            } local: {
                try $0.info(assetId: assetId)
            }
            if json {
                print(Library.json(info))
                return
            }
            print("\(info.assetId)\(info.title.map { " \"\($0)\"" } ?? "") from \(info.sourceURL)")
            print(
                "  \(info.isComplete ? "complete" : "incomplete"), \(Library.megabytes(info.sizeOnDisk)) on disk, lease: \(Library.leaseText(info.lease))"
            )
            print("  playable offline: \(info.isPlayableOffline ? "yes" : "no")")
            if let recording = info.recording {
                let state = recording.isRecording ? "recording (interrupted: `stowage resume \(info.assetId)` goes on)" : "recorded"
                let why = recording.endReason.map { ", ended by \($0.rawValue)" } ?? ""
                print("  \(recording.playlistType) stream \(state)\(why): \(HumanTime.duration(Int64(recording.seconds.rounded()))) of media")
                if let start = recording.startsAt {
                    print("    wall clock: \(HumanTime.instant(start)) to \(HumanTime.instant(recording.endsAt ?? start))")
                }
                if let first = recording.firstMediaSequence, let last = recording.lastMediaSequence {
                    print("    media sequence \(first) to \(last)")
                }
                for gap in recording.gaps {
                    let span = gap.startsAt.map { " (\(HumanTime.instant($0)) to \(HumanTime.instant(gap.endsAt ?? $0)))" } ?? ""
                    print(
                        "    gap in \(gap.renditionId): \(gap.segments) segment(s) from sequence \(gap.firstMediaSequence), about "
                            + "\(HumanTime.duration(Int64(gap.seconds.rounded())))\(span)"
                    )
                }
            }
            for selection in info.selections {
                let detail = [selection.language, selection.resolution, selection.bandwidth.map { "\($0 / 1000) kbit/s" }].compactMap { $0 }
                let availability = selection.isPlayableOffline ? "offline" : "online only (\(selection.reason ?? "not downloaded"))"
                print("  \(selection.kind) \(selection.renditionId): \(selection.name) \(detail.joined(separator: ", ")) — \(availability)")
            }
        } catch {
            Library.fail(error, json: json)
        }
    }
}

/// `stowage delete ASSET`
struct DeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete an offline asset: files removed, key material erased, the lease release queued.",
        discussion: """
            Works offline; the release reaches the key server with the next `stowage keys sync`. Deleting twice is
            not an error. A running `stowage play` of the asset ends. A download of the asset running in the download
            service is stopped first; one running in another terminal makes it fail with asset_busy (pause it first).
            Example:
              stowage delete demo-1
            """
    )

    @Argument(help: "The asset ID.")
    var assetId: String

    @Flag(help: "Print JSON.")
    var json = false

    func run() async throws {
        do {
            let deletion = try await ServiceDriver.either {
                try await $0.delete(assetId: assetId)
            } local: {
                try $0.delete(assetId: assetId)
            }
            let report = deletion.report
            if json {
                print(Library.json(report))
                return
            }
            if deletion.nothingToDelete {
                print("nothing to delete for \(assetId)")
                return
            }
            print("deleted \(assetId): \(report.filesRemoved) files, \(Library.megabytes(report.bytesFreed)) freed")
            if !report.leasesReturned.isEmpty {
                print("  keys erased; release of \(report.leasesReturned.count) lease(s) queued (sent with `stowage keys sync`)")
            }
            if report.identityKeysErased > 0 { print("  \(report.identityKeysErased) stored AES key(s) erased") }
        } catch {
            Library.fail(error, json: json)
        }
    }
}

/// `stowage verify ASSET [--deep] [--for DURATION] [--json]`
struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check that an asset will play offline: files, keys, lease, and trial decryption.",
        discussion: """
            Quick: every file present with the right size, every key held, the lease valid now, the first and last
            segment of each rendition decrypted and validated. --deep: SHA-256 of every file and every segment
            decrypted. --for 48h: the lease must last that long, counting the playback window as starting now.
            Exit status: 0 playable, 1 not playable, 2 error.
            Example:
              stowage verify demo-1 --deep --for 48h
            """
    )

    @Argument(help: "The asset ID.")
    var assetId: String

    @Flag(help: "Hash every file and trial-decrypt every segment.")
    var deep = false

    @Option(name: .customLong("for"), help: "How long it must stay playable (48h, 30m, 2d, seconds).")
    var duration: String?

    @Flag(help: "Print the report as JSON.")
    var json = false

    func run() async throws {
        do {
            let seconds = try duration.map(Library.parseDuration)
            let report = try await Library.with { try await $0.verify(assetId: assetId, options: .init(deep: deep, duration: seconds)) }
            // Not playable: the report, and the first problem in the one error shape (an `error` member with --json).
            // The lease's problem names the cause (its keys missing follow from it); else the first found.
            let primary = report.problems.first { $0.isLeaseProblem } ?? report.problems.first
            let failure = primary.map {
                CommandLineError(code: $0.code, message: "\(assetId) will not play offline: \($0.message)")
            }
            if json {
                print(Library.json(VerifyOutput(report: report, error: failure.map(ErrorDocument.init))))
            } else {
                print("\(assetId): \(report.isPlayable ? "playable offline" : "NOT playable offline") (\(deep ? "deep" : "quick") check)")
                print("  lease: \(Library.leaseText(report.lease))")
                for rendition in report.renditions {
                    let status = rendition.isPlayable ? "ok" : "\(rendition.problems) problem(s)"
                    print(
                        "  \(rendition.id): \(rendition.files) files, \(Library.megabytes(rendition.bytes)), \(rendition.filesDecrypted) decrypted, \(rendition.filesHashed) hashed — \(status)"
                    )
                }
                for problem in report.problems { print("  problem [\(problem.code.rawValue)]: \(problem.message)") }
                for warning in report.warnings ?? [] { print("  warning [\(warning.code.rawValue)]: \(warning.message)") }
                if let failure { Terminal.standardError(Terminal.errorLine(failure.message, code: failure.code.rawValue)) }
            }
            Foundation.exit(report.exitStatus)
        } catch {
            Library.fail(error, json: json, status: 2)
        }
    }
}

/// The verification report with, when the package will not play, the first problem as the error every command
/// prints: `{"error": {"code", "message"}, "isPlayable": false, ...}`.
struct VerifyOutput: Encodable {
    let report: VerificationReport
    let error: ErrorDocument?

    enum Keys: String, CodingKey { case error }

    func encode(to encoder: any Encoder) throws {
        try report.encode(to: encoder)
        var container = encoder.container(keyedBy: Keys.self)
        try container.encodeIfPresent(error?.error, forKey: .error)
    }
}

/// `stowage pause ASSET`
struct PauseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Pause a download: it keeps its files and waits until `stowage resume`.",
        discussion: """
            While the download service runs, pauses the download there (running or queued). Without the service,
            marks a queued or interrupted download paused; a download running in a terminal is paused with Ctrl-C
            there (this says so: asset_busy).
            Example:
              stowage pause demo-1
            """
    )

    @Argument(help: "The asset ID.")
    var assetId: String

    @Flag(help: "Print JSON.")
    var json = false

    func run() async throws {
        do {
            let state = try await ServiceDriver.either { service in
                ServiceText.line(try await service.pause(assetId: assetId))
            } local: { library in
                try library.markPaused(assetId: assetId)
                return "\(assetId): paused"
            }
            print(json ? #"{"paused":"\#(assetId)"}"# : state)
        } catch {
            Library.fail(error, json: json)
        }
    }
}

/// `stowage recover`: sets a damaged `stowage.sqlite` aside (OfflineLibrary.recoverDatabase).
struct RecoverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recover",
        abstract: "Set a damaged state database (stowage.sqlite) aside and start a new one; packages stay.",
        discussion: """
            For when a command says database_damaged. The damaged file is renamed (stowage.sqlite.damaged-DATE), never
            deleted; packages, their manifests and the device's keys stay. The leases, identity keys, download records
            and audit journal of the damaged file are lost with it: get each asset's keys again while online with
            `stowage keys fetch`. A download that was running must be deleted and started again. Refused while the
            download service or a download runs, and when SQLite finds the file whole.
            Example:
              stowage recover
              stowage keys fetch movie-1 --key-server https://keys.example.com --token-file token.jwt
            """
    )

    @Flag(help: "Print JSON.")
    var json = false

    func run() async throws {
        do {
            let recovery = try await OfflineLibrary.recoverDatabase()
            if json {
                print(Library.json(recovery))
                return
            }
            print("damaged state database set aside: \(recovery.setAsideAt) (\(recovery.damage))")
            print("a new, empty state database was made; packages untouched: \(recovery.assets.count)")
            for asset in recovery.assets {
                if asset.state != "complete" {
                    print("  \(asset.assetId): its download was not complete; `stowage delete \(asset.assetId)`, then download it again")
                } else if asset.needsKeys {
                    print("  \(asset.assetId): `stowage keys fetch \(asset.assetId) --key-server URL --token-file FILE` while online")
                } else {
                    print("  \(asset.assetId): clear, plays as it is")
                }
            }
        } catch {
            Library.fail(error, json: json)
        }
    }
}
