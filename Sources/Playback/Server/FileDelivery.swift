import Foundation
import Hummingbird
import MediaCrypto
import NIOCore
import OfflinePackage
import StowageCrypto
import Synchronization

/// How one file of the package is decrypted on its way to the player.
struct Decryption: Sendable {
    var method: SegmentEncryptionMethod
    var container: SegmentContainer
    var key: SecretBytes
    var iv: [UInt8]
    /// The rendition's cbcs init section, for SAMPLE-AES fMP4 segments.
    var initSection: CBCSInitSection?
}

/// One segment to stream: read from disk a chunk at a time, hashed, decrypted and written to the response.
struct SegmentStream: Sendable {
    var assetId: String
    var url: URL
    var file: PackageFile
    var decryption: Decryption?

    /// Streams the file into `writer` and returns the bytes written.
    ///
    /// Memory stays at two chunks plus what the decryptor holds (a PES packet, a `moof`): each chunk's output is held
    /// back until the next chunk is read, and the last one until the file's SHA-256 has been checked, so a file
    /// modified on disk never reaches the player whole: the response is cut short instead (the connection is closed
    /// without the final chunk), and the caller logs why.
    ///
    /// - Throws: ``PlaybackError`` `segment_missing`, `segment_modified`, `segment_checksum_mismatch`,
    ///   `decryption_failed`; or the writer's error when the player went away.
    func stream(into writer: inout any ResponseBodyWriter, chunkSize: Int) async throws -> Int {
        let path = file.path
        guard let handle = try? ChunkedFile(url) else { throw PlaybackError.segmentMissing(assetId: assetId, path: path) }
        if let expected = file.size, let size = handle.size, size != expected {
            throw PlaybackError.segmentModified(assetId: assetId, path: path, expected: expected, found: size)
        }
        let transform: (any SegmentTransform)?
        do {
            transform = try decryption.map { decryption in
                try SegmentCryptography.decryptor(
                    method: decryption.method,
                    container: decryption.container,
                    key: decryption.key,
                    iv: decryption.iv,
                    initSection: decryption.initSection,
                    segment: path
                )
            }
        } catch {
            throw PlaybackError.unsupportedEncryption(assetId: assetId, path: path, detail: "\(error)")
        }
        var hasher = SHA256Hasher()
        var held = ByteBuffer()
        var offset: Int64 = 0
        var written = 0
        while true {
            let chunk: [UInt8]
            do {
                chunk = try handle.read(count: chunkSize, at: offset)
            } catch {
                throw PlaybackError.segmentMissing(assetId: assetId, path: path)
            }
            if chunk.isEmpty { break }
            offset += Int64(chunk.count)
            hasher.update(chunk)
            var output = ByteBuffer()
            output.reserveCapacity(chunk.count + 1024)
            if let transform {
                do {
                    try transform.process(chunk) { output.writeBytes($0) }
                } catch {
                    throw PlaybackError.decryptionFailed(assetId: assetId, path: path, detail: "\(error)")
                }
            } else {
                output.writeBytes(chunk)
            }
            if held.readableBytes > 0 {
                written += held.readableBytes
                try await writer.write(held)
            }
            held = output
        }
        if let transform {
            do {
                try transform.finish { held.writeBytes($0) }
            } catch {
                throw PlaybackError.decryptionFailed(assetId: assetId, path: path, detail: "\(error)")
            }
        }
        guard Hex.encode(hasher.finalize()) == file.sha256?.lowercased() else {
            throw PlaybackError.segmentChecksumMismatch(assetId: assetId, path: path)
        }
        if held.readableBytes > 0 {
            written += held.readableBytes
            try await writer.write(held)
        }
        return written
    }
}

/// Init sections as the player gets them (decrypted when AES-128, made clear when cbcs), prepared once per session.
///
/// Init sections are small (a few KB: `moov` without samples), so they are read whole, checked against their
/// SHA-256, and kept.
final class InitSectionCache: Sendable {
    /// What a prepared init section is.
    struct Prepared: Sendable {
        /// The bytes to send.
        var bytes: [UInt8]
        /// The parsed protection, for decrypting the rendition's cbcs segments.
        var protection: CBCSInitSection?
    }

    /// The largest init section accepted.
    static let maximumSize: Int64 = 8 << 20

    private let prepared = Mutex<[String: Prepared]>([:])

    /// The prepared init section at `path`.
    func prepare(_ role: FileRole, in authorization: PlaybackAuthorization) throws(PlaybackError) -> Prepared {
        let file = role.file
        if let done = prepared.withLock({ $0[file.path] }) { return done }
        let assetId = authorization.assetId
        guard let url = try? authorization.package.url(forRelativePath: file.path), let handle = try? ChunkedFile(url) else {
            throw .segmentMissing(assetId: assetId, path: file.path)
        }
        guard let size = handle.size, size <= Self.maximumSize else {
            throw .unsupportedEncryption(assetId: assetId, path: file.path, detail: "an init section over \(Self.maximumSize >> 20) MiB")
        }
        if let expected = file.size, expected != size {
            throw .segmentModified(assetId: assetId, path: file.path, expected: expected, found: size)
        }
        guard var bytes = try? handle.read(count: Int(size), at: 0), bytes.count == Int(size) else {
            throw .segmentMissing(assetId: assetId, path: file.path)
        }
        guard Hex.encode(SHA256Hasher.hash(bytes)) == file.sha256?.lowercased() else {
            throw .segmentChecksumMismatch(assetId: assetId, path: file.path)
        }
        // RFC 8216bis 4.4.4.5: an EXT-X-MAP under AES-128 is encrypted whole with the key in effect.
        if let key = file.key {
            let decryption = try Decryptions.wholeFile(key, path: file.path, in: authorization)
            do {
                let cipher = try SegmentCryptography.decryptor(
                    method: decryption.method,
                    container: .other,
                    key: decryption.key,
                    iv: decryption.iv,
                    segment: file.path
                )
                bytes = try cipher.transform(bytes)
            } catch {
                throw .decryptionFailed(assetId: assetId, path: file.path, detail: "\(error)")
            }
        }
        var protection: CBCSInitSection?
        if case .initSection(let sampleEncrypted) = role.kind, sampleEncrypted,
            SegmentContainer.detect(Array(bytes.prefix(SegmentContainer.detectionLength))) == .fragmentedMP4
        {
            do {
                let parsed = try CBCSInitSection.parse(bytes, segment: file.path)
                bytes = try parsed.clearInitSection()
                protection = parsed
            } catch {
                throw .decryptionFailed(assetId: assetId, path: file.path, detail: "\(error)")
            }
        }
        let result = Prepared(bytes: bytes, protection: protection)
        prepared.withLock { $0[file.path] = result }
        return result
    }
}

/// Turns a manifest's per-file key into what the decryptors take.
enum Decryptions {
    /// The key, method and IV of a file encrypted whole or sample by sample.
    static func wholeFile(_ key: PackageSegmentKey, path: String, in authorization: PlaybackAuthorization) throws(PlaybackError) -> Decryption {
        let assetId = authorization.assetId
        guard let method = SegmentEncryptionMethod(name: key.method) else {
            throw .unsupportedEncryption(assetId: assetId, path: path, detail: "METHOD=\(key.method) is not one Stowage decrypts")
        }
        guard let content = authorization.keys[key.keyId] else {
            throw .keyMissing(
                assetId: assetId,
                keyId: key.keyId,
                detail: "the key \(key.keyId) was not read at authorization. Download the asset again."
            )
        }
        guard content.count == method.keyLength else {
            throw .unsupportedEncryption(
                assetId: assetId,
                path: path,
                detail: "the key \(key.keyId) has \(content.count) bytes, \(key.method) needs \(method.keyLength)"
            )
        }
        guard let iv = Hex.decode(key.iv), iv.count == 16 else {
            throw .invalidManifest(assetId: assetId, reason: "the IV of \(path) is not 32 hex digits")
        }
        return Decryption(method: method, container: .other, key: content, iv: iv, initSection: nil)
    }
}
