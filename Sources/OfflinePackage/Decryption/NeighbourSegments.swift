public import Foundation
public import MediaCrypto
import StowageCore
public import StowageCrypto

#if canImport(Glibc)
import Glibc
#endif

extension TransportStreamNeighbour {
    /// A neighbouring segment stored at `url`, or in bytes `offset..<offset + length` of it (EXT-X-BYTERANGE); read
    /// only when a PES packet turns out to span into it. Nil when the file is not there.
    public static func file(
        _ url: URL,
        offset: Int64 = 0,
        length: Int64? = nil,
        name: String,
        key: SecretBytes,
        iv: [UInt8]
    ) -> TransportStreamNeighbour? {
        let size: Int64
        if let length {
            size = length
        } else {
            var info = stat()
            guard stat(url.path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
            size = Int64(info.st_size)
        }
        return TransportStreamNeighbour(name: name, key: key, iv: iv, size: Int(size)) { start, count in
            let file = try ChunkedFile(url)
            return try file.read(count: max(0, min(count, Int(size) - start)), at: offset + Int64(start))
        }
    }
}

extension PackageRendition {
    /// The stored SAMPLE-AES MPEG-TS segments before and after `segments[index]`, for PES packets split between
    /// segments: each only when it is stored whole, under SAMPLE-AES, in the same discontinuity sequence and with no
    /// GAP between. `key` gives a segment's content key (nil when it is not at hand); `previousPending` and
    /// `nextPending` are set for one that exists but is not stored yet (a download still running).
    public func transportStreamNeighbours(
        ofSegmentAt index: Int,
        in package: PackageDirectory,
        key: (PackageSegmentKey) -> SecretBytes?
    ) -> TransportStreamNeighbours {
        var neighbours = TransportStreamNeighbours.none
        guard segments.indices.contains(index), let file = segments[index].file, file.key?.method == SegmentEncryptionMethod.sampleAES.rawValue
        else { return neighbours }
        func neighbour(_ other: Int) -> TransportStreamNeighbour? {
            guard segments.indices.contains(other) else { return nil }
            let segment = segments[other]
            guard segment.discontinuitySequence == segments[index].discontinuitySequence, !segment.isGap,
                segment.initSection == segments[index].initSection, let file = segment.file, file.size != nil,
                let segmentKey = file.key, segmentKey.method == SegmentEncryptionMethod.sampleAES.rawValue,
                let content = key(segmentKey), let iv = Hex.decode(segmentKey.iv), iv.count == 16,
                let url = try? package.url(forRelativePath: file.path)
            else { return nil }
            return .file(url, name: file.path, key: content, iv: iv)
        }
        neighbours.previous = neighbour(index - 1)
        neighbours.next = neighbour(index + 1)
        func pending(_ other: Int) -> Bool {
            guard segments.indices.contains(other), let file = segments[other].file else { return false }
            return file.size == nil && segments[other].discontinuitySequence == segments[index].discontinuitySequence
        }
        neighbours.previousPending = neighbours.previous == nil && pending(index - 1)
        neighbours.nextPending = neighbours.next == nil && pending(index + 1)
        return neighbours
    }
}
