import AssetDownload
import Foundation
import HLS

/// The human-readable form of `stowage inspect`.
struct InspectionSummary {
    let inspection: PlaylistInspection

    init(_ inspection: PlaylistInspection) {
        self.inspection = inspection
    }

    func render() -> String {
        var out = ""
        switch inspection.playlist {
        case .multivariant(let playlist):
            renderMultivariant(playlist, into: &out)
        case .media(let playlist):
            out += "Media playlist \(display(inspection.url))\n"
            renderMedia(playlist, segments: inspection.resolvedSegments ?? [], indent: "  ", into: &out)
        }
        renderWarnings(inspection.warnings, indent: "", into: &out)
        return out
    }

    private func renderMultivariant(_ playlist: MultivariantPlaylist, into out: inout String) {
        out += "Multivariant playlist \(display(inspection.url))\n"
        var header: [String] = []
        if let version = playlist.version { header.append("version \(version)") }
        if playlist.independentSegments { header.append("independent segments") }
        if !playlist.definitions.isEmpty { header.append("\(playlist.definitions.count) variable(s) defined") }
        if !header.isEmpty { out += "  \(header.joined(separator: ", "))\n" }

        out += "Variants (\(playlist.variants.count)):\n"
        for (index, variant) in playlist.variants.enumerated() {
            var fields = ["\(formatBitrate(variant.bandwidth))"]
            if let average = variant.averageBandwidth { fields.append("avg \(formatBitrate(average))") }
            if let resolution = variant.resolution { fields.append("\(resolution)") }
            if let rate = variant.frameRate { fields.append("\(PlaylistWriter.decimal(rate)) fps") }
            if let codecs = variant.codecs { fields.append("codecs \(codecs)") }
            for (name, group) in [("audio", variant.audio), ("video", variant.video), ("subtitles", variant.subtitles)] {
                if let group { fields.append("\(name)=\(group)") }
            }
            out += "  \(index + 1). \(fields.joined(separator: "  "))\n     \(variant.uri)\n"
        }
        if !playlist.iFrameVariants.isEmpty {
            out += "I-frame variants (\(playlist.iFrameVariants.count)):\n"
            for variant in playlist.iFrameVariants {
                out += "  \(formatBitrate(variant.bandwidth))  \(variant.resolution.map { "\($0)  " } ?? "")\(variant.uri)\n"
            }
        }
        let types: [MediaType] = [.audio, .video, .subtitles, .closedCaptions]
        if !playlist.renditions.isEmpty {
            out += "Renditions (\(playlist.renditions.count)):\n"
            for type in types {
                let renditions = playlist.renditions.filter { $0.type == type }
                guard !renditions.isEmpty else { continue }
                out += "  \(type.rawValue):\n"
                for rendition in renditions {
                    var flags: [String] = []
                    if let language = rendition.language { flags.append(language) }
                    if rendition.isDefault == true { flags.append("default") }
                    if rendition.autoselect == true { flags.append("autoselect") }
                    if rendition.forced == true { flags.append("forced") }
                    if let channels = rendition.channels { flags.append("\(channels) ch") }
                    let location = rendition.uri ?? rendition.instreamID.map { "in-stream \($0)" } ?? "in the variant stream"
                    out += "    [\(rendition.groupID)] \(rendition.name)\(flags.isEmpty ? "" : " (\(flags.joined(separator: ", ")))")  \(location)\n"
                }
            }
        }
        if !playlist.sessionKeys.isEmpty {
            out += "Session keys (\(playlist.sessionKeys.count)):\n"
            for key in playlist.sessionKeys { out += "  \(describe(key, inSegments: false))\n" }
        }
        if !playlist.sessionData.isEmpty {
            out += "Session data:\n"
            for data in playlist.sessionData { out += "  \(data.dataID) = \(data.value ?? data.uri ?? "")\n" }
        }
        if let steering = playlist.contentSteering {
            out += "Content steering: \(steering.serverURI)\(steering.pathwayID.map { " (pathway \($0))" } ?? "")\n"
        }
        if let media = inspection.mediaPlaylists {
            out += "Media playlists (\(media.count)):\n"
            for item in media {
                out += "  \(item.role) \(item.label): \(item.uri)\n"
                if let error = item.error {
                    out += "    error: \(error)\n"
                } else if let playlist = item.playlist {
                    renderMedia(playlist, segments: item.resolvedSegments ?? [], indent: "    ", into: &out)
                }
                renderWarnings(item.warnings, indent: "    ", into: &out)
            }
        }
    }

    private func renderMedia(_ playlist: MediaPlaylist, segments: [ResolvedSegment], indent: String, into out: inout String) {
        var header: [String] = []
        if let type = playlist.playlistType { header.append(type.rawValue) }
        header.append(playlist.isComplete ? "complete" : "live (no EXT-X-ENDLIST)")
        header.append("target duration \(playlist.targetDuration) s")
        if let sequence = playlist.mediaSequence { header.append("media sequence \(sequence)") }
        if playlist.iFramesOnly { header.append("I-frames only") }
        out += "\(indent)\(header.joined(separator: ", "))\n"
        let gaps = segments.filter(\.isGap).count
        let discontinuities = playlist.segments.filter(\.isDiscontinuity).count
        out += "\(indent)segments: \(playlist.segments.count), duration \(formatDuration(playlist.totalDuration))"
        if gaps > 0 { out += ", \(gaps) gap(s)" }
        if discontinuities > 0 { out += ", \(discontinuities) discontinuity(ies)" }
        if segments.contains(where: { $0.byteRange != nil }) { out += ", byte ranges" }
        out += "\n"
        let initSections = Set(segments.compactMap { $0.initializationSection.map { "\($0.uri)|\($0.byteRange?.description ?? "")" } })
        if !initSections.isEmpty { out += "\(indent)init sections: \(initSections.count)\n" }

        let encrypted = segments.filter { !$0.keys.isEmpty }
        if encrypted.isEmpty {
            out += "\(indent)encryption: none\n"
        } else {
            let methods = Set(encrypted.compactMap { $0.method?.rawValue }).sorted().joined(separator: ", ")
            out += "\(indent)encryption: \(methods) on \(encrypted.count) of \(segments.count) segments\n"
            let keys = playlist.distinctKeys
            out += "\(indent)keys (\(keys.count)):\n"
            for key in keys { out += "\(indent)  \(describe(key))\n" }
        }
    }

    private func renderWarnings(_ warnings: [PlaylistWarning], indent: String, into out: inout String) {
        guard !warnings.isEmpty else { return }
        out += "\(indent)Warnings (\(warnings.count)):\n"
        for warning in warnings { out += "\(indent)  \(warning)\n" }
    }

    /// A key's method, format, URI and IV; a session key has no media sequence to take an IV from.
    private func describe(_ key: EncryptionKey, inSegments: Bool = true) -> String {
        var parts = ["\(key.method)", "keyformat \(key.effectiveKeyFormat)"]
        // A data: URI is the key itself: named, not shown.
        if let uri = key.uri { parts.append(InlineKeyRedaction.apply(uri) == uri ? uri : "inline key (data: URI, not shown)") }
        if let iv = key.iv {
            parts.append("IV 0x\(iv)")
        } else if inSegments {
            parts.append("IV from media sequence")
        }
        return parts.joined(separator: "  ")
    }

    private func display(_ url: URL) -> String { url.isFileURL ? url.path : url.absoluteString }

    private func formatBitrate(_ bitsPerSecond: Int) -> String {
        bitsPerSecond >= 1_000_000
            ? String(format: "%.2f Mbit/s", Double(bitsPerSecond) / 1e6)
            : String(format: "%.0f kbit/s", Double(bitsPerSecond) / 1e3)
    }

    private func formatDuration(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded(.down))
        return String(format: "%.3f s (%d:%02d:%02d)", seconds, whole / 3600, whole / 60 % 60, whole % 60)
    }
}
