import AsyncHTTPClient
import Foundation
import HLS
import KeyDelivery
import NIOCore
import NIOHTTP1
import OfflinePackage
public import StowageCore

#if canImport(Glibc)
import Glibc
#endif

/// A package remuxed into one file (``OfflineLibrary/export(assetId:to:overwrite:ffmpeg:)``).
public struct ExportResult: Sendable, Hashable, Codable {
    public var assetId: String
    /// The file written.
    public var path: String
    /// Its size in bytes.
    public var bytes: Int64
    /// `mp4` or `matroska`.
    public var format: String
}

/// Why an export did not happen.
public struct ExportError: StowageError, Hashable {
    public typealias Code = ErrorCode

    public let reason: Code
    public let message: String
    public let assetId: String?
    public let path: String?

    public var code: ErrorCode { reason }
    public var subject: ErrorSubject { ErrorSubject(assetId: assetId, path: path) }
    public var description: String { message }
}

extension OfflineLibrary {
    /// Remuxes a complete package into one file, as yt-dlp and N_m3u8DL-RE do after a download: every downloaded video,
    /// audio and subtitle rendition, with ffmpeg and no re-encoding (`-c copy`; WebVTT subtitles become `mov_text` in
    /// MP4). The package is decrypted on the way by the playback gate and server, so the lease rules apply as for
    /// ``play(assetId:player:port:fileCheck:downloadWait:onRequest:online:)``, a first play included.
    ///
    /// A package whose keys are identity keys (or that is clear) exports freely. One with skd keys exports only when
    /// its lease, as the key server signed it, says `exportAllowed` (the asset policy's `exportAllowed`,
    /// docs/key-protocol-extensions.md): an exported file is outside every lease.
    ///
    /// ffmpeg writes `.NAME.PID.part` beside the output; it is renamed into place (replacing an old export in one step)
    /// only when ffmpeg succeeded, and removed otherwise. Its log and the copy of the served playlist it reads (which
    /// names the playback session's paths) are beside it, readable by the user only, and removed when done.
    ///
    /// - Parameters:
    ///   - path: the file to write: `.mp4`, `.m4v` (MP4) or `.mkv` (Matroska).
    ///   - overwrite: replace an existing file.
    ///   - ffmpeg: the ffmpeg to run (looked up on `PATH`).
    /// - Throws: ``ExportError``; ``Playback/PlaybackError`` when the gate refuses playback (lease expired, package
    ///   damaged); ``StowageCore/ChildProcessError`` when ffmpeg cannot be started.
    public func export(assetId: String, to path: String, overwrite: Bool = false, ffmpeg: String = "ffmpeg") async throws -> ExportResult {
        let output = URL(fileURLWithPath: path).standardizedFileURL
        let format = try Self.exportFormat(of: output, assetId: assetId, overwrite: overwrite)
        let folder = output.deletingLastPathComponent()
        let manifest = try PackageDirectory(assetId: assetId, in: dataDirectory).readManifest()
        guard manifest.isComplete else {
            throw ExportError(
                reason: .exportIncomplete,
                message: "asset \(assetId) is not completely downloaded; finish it with `stowage resume \(assetId)`, then export",
                assetId: assetId,
                path: nil
            )
        }
        if manifest.keys.contains(where: { $0.kind == .skd }) { try checkExportAllowed(assetId: assetId) }
        // What can fail before ffmpeg runs is checked before the gate, which records a first play (it starts a
        // rental's playback window).
        guard ChildProcess.isAvailable(ffmpeg) else {
            throw ExportError(
                reason: .exportFailed,
                message: "cannot export asset \(assetId): \(ffmpeg) is not installed (not on PATH); install it (apt install ffmpeg) and export again",
                assetId: assetId,
                path: output.path
            )
        }
        let part = folder.appendingPathComponent(".\(output.lastPathComponent).\(ProcessInfo.processInfo.processIdentifier).part")
        let log = folder.appendingPathComponent(".\(output.lastPathComponent).\(ProcessInfo.processInfo.processIdentifier).log")
        let copy = folder.appendingPathComponent(".\(output.lastPathComponent).\(ProcessInfo.processInfo.processIdentifier).m3u8")
        defer {
            for file in [part, log, copy] { try? FileManager.default.removeItem(at: file) }
        }
        guard FileManager.default.createFile(atPath: log.path, contents: nil, attributes: [.posixPermissions: 0o600]),
            let errors = FileHandle(forWritingAtPath: log.path)
        else {
            throw ExportError(
                reason: .invalidExportPath,
                message: "cannot write in \(folder.path) (\(String(cString: strerror(errno)))); export to a folder you can write",
                assetId: assetId,
                path: output.path
            )
        }
        defer { try? errors.close() }
        let handle = try await play(assetId: assetId, player: nil, online: false)
        let status: ChildProcess.Termination
        do {
            let arguments = try await Self.remuxArguments(
                of: handle.url,
                assetId: assetId,
                format: format,
                to: part,
                copy: copy,
                http: keyHTTP.direct
            )
            let child = try ChildProcess.launch(
                "/usr/bin/env",
                [ffmpeg] + arguments,
                environment: SecretInput.childEnvironment,
                standardOutput: .null,
                standardError: .descriptor(errors.fileDescriptor)
            )
            status = await child.waitForExit()
        } catch {
            _ = await handle.stop()
            throw error
        }
        _ = await handle.stop()
        if status == .exited(127) {
            throw ExportError(
                reason: .exportFailed,
                message: "cannot export asset \(assetId): \(ffmpeg) is not installed (not on PATH); install it (apt install ffmpeg) and export again",
                assetId: assetId,
                path: output.path
            )
        }
        guard status == .exited(0) else {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            let last = text.split(separator: "\n").suffix(3).joined(separator: "; ")
            throw ExportError(
                reason: .exportFailed,
                message: "ffmpeg could not remux asset \(assetId) into \(output.path) (\(status)): \(last.isEmpty ? "it printed nothing" : last); "
                    + "nothing was written",
                assetId: assetId,
                path: output.path
            )
        }
        // rename(2) replaces an old export in one step: it is never gone before the new one is in place.
        guard rename(part.path, output.path) == 0 else {
            throw ExportError(
                reason: .exportFailed,
                message: "cannot put the export of asset \(assetId) in place at \(output.path): \(String(cString: strerror(errno))); "
                    + "nothing was written; check the folder's permissions and export again",
                assetId: assetId,
                path: output.path
            )
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: output.path)[.size] as? NSNumber)?.int64Value ?? 0
        return ExportResult(assetId: assetId, path: output.path, bytes: size, format: format)
    }

    /// The container ffmpeg writes for `output` (by its extension), once its folder exists and it does not (unless
    /// `overwrite`).
    static func exportFormat(of output: URL, assetId: String, overwrite: Bool) throws(ExportError) -> String {
        let format: String
        switch output.pathExtension.lowercased() {
        case "mp4", "m4v": format = "mp4"
        case "mkv": format = "matroska"
        default:
            throw ExportError(
                reason: .invalidExportPath,
                message: "cannot export to \(output.path): name a .mp4, .m4v or .mkv file",
                assetId: assetId,
                path: output.path
            )
        }
        let folder = output.deletingLastPathComponent()
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isFolder), isFolder.boolValue else {
            throw ExportError(
                reason: .invalidExportPath,
                message: "cannot export to \(output.path): the folder \(folder.path) does not exist",
                assetId: assetId,
                path: output.path
            )
        }
        if FileManager.default.fileExists(atPath: output.path), !overwrite {
            throw ExportError(
                reason: .exportExists,
                message: "\(output.path) exists already; choose another name or pass --overwrite",
                assetId: assetId,
                path: output.path
            )
        }
        return format
    }

}

extension OfflineLibrary {
    /// Refuses export of a leased package unless the lease playback would use allows it, as signed by the key server:
    /// the asset's own leases are judged (the ones the keyring takes keys from; a key URI naming another asset in an
    /// edited manifest changes nothing), and every one of them that still holds keys must say `exportAllowed`.
    ///
    /// - Throws: ``ExportError`` `export_not_allowed`, saying whether there is no valid lease or its policy refuses.
    func checkExportAllowed(assetId: String) throws {
        let evaluation = try keyStore.evaluate(assetId: assetId, at: clock.now)
        guard evaluation.isValid, evaluation.lease != nil else {
            let why = evaluation.error?.message ?? "no lease on this device covers it"
            throw ExportError(
                reason: .exportNotAllowed,
                message: "asset \(assetId) cannot be exported: it cannot play now (\(why)); renew its lease with "
                    + "`stowage keys renew \(assetId)` while online, then export",
                assetId: assetId,
                path: nil
            )
        }
        let holding = try keyStore.leases(assetId: assetId).filter { $0.state.holdsKeyMaterial && $0.hasKeyMaterial }
        guard !holding.isEmpty, holding.allSatisfy({ $0.record.terms.exportAllowed == true }) else {
            throw ExportError(
                reason: .exportNotAllowed,
                message: "asset \(assetId) is protected by keys leased from its key server, whose policy does not allow export "
                    + "(the lease does not say exportAllowed); play it with `stowage play \(assetId)` instead, or, if the "
                    + "policy has changed since, `stowage keys renew \(assetId)` and export again",
                assetId: assetId,
                path: nil
            )
        }
    }

    /// ffmpeg's arguments to remux the playlist the gate serves at `master` into `part`.
    ///
    /// The gate serves its entry URL once (a URL read from a command line cannot be replayed), and ffmpeg reads the
    /// playlist more than once here, so the playlist is fetched once and kept in `copy` (removed with the export's
    /// other files) with its URIs made absolute; they name the gate's session paths, which serve as often as asked.
    ///
    /// ffmpeg's HLS demuxer reads subtitle renditions only with `-strict experimental`, and it ignores WebVTT's
    /// `X-TIMESTAMP-MAP` (RFC 8216bis 3.1.4), so cues would come out early by the media's start time (1.4 s for an
    /// ffmpeg-segmented stream). The video and audio come from one reading of the playlist; each subtitle rendition
    /// comes from another reading of the same playlist shifted by its own map (`-itsoffset`), so both readings start
    /// at the same time and the shift is all that differs. ffmpeg skips the segments of streams a reading does not
    /// map, so the extra readings fetch only subtitles.
    static func remuxArguments(of master: URL, assetId: String, format: String, to part: URL, copy: URL, http: HTTPClient) async throws -> [String] {
        let text = String(decoding: try await get(master, assetId: assetId, http: http), as: UTF8.self)
        guard
            FileManager.default.createFile(
                atPath: copy.path,
                contents: Data(absolutePaths(text, origin: master).utf8),
                attributes: [.posixPermissions: 0o600]
            )
        else {
            throw ExportError(
                reason: .invalidExportPath,
                message: "cannot write in \(copy.deletingLastPathComponent().path); export to a folder you can write",
                assetId: assetId,
                path: copy.path
            )
        }
        // The local copy names only the playback server's http URLs; nothing else may be opened.
        let input = ["-protocol_whitelist", "file,http,tcp", "-strict", "experimental", "-i", copy.path]
        var arguments = ["-nostdin", "-hide_banner", "-loglevel", "error"] + input
        var maps = ["-map", "0:v?", "-map", "0:a?"]
        let offsets = try await subtitleOffsets(of: text, url: master, assetId: assetId, http: http)
        // One extra reading per distinct offset (usually one for all subtitle renditions).
        var readings: [Double: Int] = [:]
        for (index, offset) in offsets.enumerated() {
            let reading: Int
            if let known = readings[offset] {
                reading = known
            } else {
                reading = readings.count + 1
                readings[offset] = reading
                arguments += ["-itsoffset", String(format: "%.6f", offset)] + input
            }
            maps += ["-map", "\(reading):s:\(index)"]
        }
        arguments += maps + ["-c", "copy"]
        if format == "mp4" { arguments += ["-c:s", "mov_text", "-movflags", "+faststart"] }
        return arguments + ["-f", format, "-y", part.path]
    }

    /// For each subtitle rendition of the served playlist, in order: the seconds its cues lie after the media's
    /// timeline as WebVTT counts them, from the first segment's `X-TIMESTAMP-MAP=MPEGTS:n,LOCAL:t` (n / 90 000 - t;
    /// 0 when there is no map, as RFC 8216bis 3.1.4 says).
    static func subtitleOffsets(of text: String, url master: URL, assetId: String, http: HTTPClient) async throws -> [Double] {
        guard case .multivariant(let playlist) = try PlaylistParser.parse(text, url: master).playlist else {
            return []
        }
        var offsets: [Double] = []
        for rendition in playlist.renditions where rendition.type == .subtitles {
            guard let uri = rendition.uri, let url = PlaylistURI.resolve(uri, against: master) else { continue }
            guard case .media(let media) = try PlaylistParser.parse(try await get(url, assetId: assetId, http: http), url: url).playlist,
                let first = media.segments.first, let segment = PlaylistURI.resolve(first.uri, against: url)
            else {
                offsets.append(0)
                continue
            }
            let cues = String(decoding: try await get(segment, assetId: assetId, http: http), as: UTF8.self)
            offsets.append(WebVTTTimestampMap.offset(in: cues) ?? 0)
        }
        return offsets
    }

    /// `text` with each URI that is an absolute path (`/TOKEN/...`, as the gate writes them) made a URL on `origin`'s
    /// host, so the playlist can be read from a file.
    static func absolutePaths(_ text: String, origin: URL) -> String {
        guard let scheme = origin.scheme, let host = origin.host else { return text }
        let base = "\(scheme)://\(host)\(origin.port.map { ":\($0)" } ?? "")"
        return text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            if line.hasPrefix("/") { return base + line }
            return line.replacingOccurrences(of: #"URI="/"#, with: #"URI=""# + base + "/")
        }.joined(separator: "\n")
    }

    /// One GET to the loopback playback server.
    private static func get(_ url: URL, assetId: String, http: HTTPClient) async throws -> [UInt8] {
        let response = try await http.execute(HTTPClientRequest(url: url.absoluteString), timeout: .seconds(30))
        let body = Array(try await response.body.collect(upTo: PlaylistParser.maximumSize).readableBytesView)
        guard response.status.code == 200 else {
            // The gate's refusal (the lease ended, a file is damaged) is the body's text.
            let said = String(decoding: body.prefix(300), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw ExportError(
                reason: .exportFailed,
                message:
                    "cannot export asset \(assetId): playback refused a file with \(response.status.code) (\(said.isEmpty ? "no reason given" : said)); "
                    + "check it with `stowage verify \(assetId)` and `stowage keys list`, then export again; nothing was written",
                assetId: assetId,
                path: nil
            )
        }
        return body
    }
}

/// WebVTT's `X-TIMESTAMP-MAP` header (RFC 8216bis 3.1.4), which ties cue times to the media's MPEG-2 timestamps.
enum WebVTTTimestampMap {
    /// Seconds to add to the cue times of `text` to put them on the media's timeline (`MPEGTS / 90 000 - LOCAL`);
    /// nil when the header has no map or a malformed one.
    static func offset(in text: String) -> Double? {
        // The map is in the header: the lines before the first blank line.
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).prefix(while: { !$0.trimmingCharacters(in: .whitespaces).isEmpty })
        {
            let line = line.trimmingCharacters(in: .whitespacesAndNewlines)
            guard line.hasPrefix("X-TIMESTAMP-MAP=") else { continue }
            var ticks: Double?
            var local: Double?
            for field in line.dropFirst("X-TIMESTAMP-MAP=".count).split(separator: ",") {
                let parts = field.split(separator: ":", maxSplits: 1)
                guard parts.count == 2 else { return nil }
                switch parts[0].trimmingCharacters(in: .whitespaces) {
                case "MPEGTS": ticks = Double(parts[1].trimmingCharacters(in: .whitespaces))
                case "LOCAL": local = cueTime(parts[1].trimmingCharacters(in: .whitespaces))
                default: continue
                }
            }
            guard let ticks, let local else { return nil }
            return ticks / 90_000 - local
        }
        return nil
    }

    /// A WebVTT timestamp, `hh:mm:ss.ttt` or `mm:ss.ttt`, in seconds.
    static func cueTime(_ text: String) -> Double? {
        let fields = text.split(separator: ":")
        guard (2...3).contains(fields.count), let seconds = Double(fields[fields.count - 1]) else { return nil }
        var total = seconds
        var scale = 60.0
        for field in fields.dropLast().reversed() {
            guard let value = Double(field) else { return nil }
            total += value * scale
            scale *= 60
        }
        return total
    }
}
