public import StowageCrypto

/// Whole-segment encryption, METHOD=AES-128 (RFC 8216bis 5.2) or AES-256: AES-CBC over the entire segment with
/// PKCS#7 padding, the chain restarted for every segment (and for an encrypted EXT-X-MAP); or AES-256-CTR (as Shaka
/// Player accepts it): the IV is the initial counter block, no padding.
///
/// Streaming: feed chunks as they arrive and receive output through `emit`; memory stays at one internal buffer
/// of ``chunkSize`` bytes whatever the segment's size.
///
/// ```swift
/// let cipher = try WholeSegmentCipher(method: .aes128, key: key, iv: iv, direction: .decrypt, segment: "seg1.ts")
/// for chunk in chunks { try cipher.process(chunk) { try output.write($0) } }
/// try cipher.finish { try output.write($0) }
/// ```
public final class WholeSegmentCipher: SegmentTransform {
    /// The whole-segment methods.
    public enum Method: String, Sendable, CaseIterable {
        case aes128 = "AES-128"
        case aes256 = "AES-256"
        case aes256CTR = "AES-256-CTR"

        /// The key length the method needs.
        public var keyLength: Int { self == .aes128 ? 16 : 32 }
    }

    /// The OpenSSL cipher behind the method.
    private enum Engine {
        case cbc(AESCBCCipher)
        case ctr(AESCTRCipher)
    }

    /// Input is processed in pieces of at most this many bytes, which bounds the output buffer.
    public static let chunkSize = 256 * 1024

    private let engine: Engine
    private let segment: String
    private let output: UnsafeMutableRawBufferPointer

    /// - Parameters:
    ///   - method: AES-128 (16-byte key) or AES-256 (32-byte key).
    ///   - iv: 16 bytes: the IV attribute, or the media sequence number (see `ResolvedKey.iv`).
    ///   - segment: the segment's name, used in errors.
    public init(method: Method, key: SecretBytes, iv: [UInt8], direction: AESCBCCipher.Direction, segment: String) throws(SegmentCryptoError) {
        guard key.count == method.keyLength else { throw .invalidKey(segment: segment) }
        guard iv.count == 16 else { throw .invalidIV(segment: segment) }
        do {
            engine =
                method == .aes256CTR
                ? .ctr(try AESCTRCipher(key: key, iv: iv))
                : .cbc(try AESCBCCipher(key: key, iv: iv, direction: direction, padding: true))
        } catch {
            throw .cryptoFailure(segment: segment)
        }
        self.segment = segment
        output = .allocate(byteCount: Self.chunkSize + 32, alignment: 16)
    }

    deinit {
        // Clear bytes pass through this buffer on decryption; do not leave them in freed memory.
        output.initializeMemory(as: UInt8.self, repeating: 0)
        output.deallocate()
    }

    /// Transforms the next chunk of the segment.
    public func process(_ chunk: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        var offset = 0
        while offset < chunk.count {
            let piece = UnsafeRawBufferPointer(rebasing: chunk[offset..<min(chunk.count, offset + Self.chunkSize)])
            let written: Int
            do {
                switch engine {
                case .cbc(let cipher): written = try cipher.update(piece, into: output)
                case .ctr(let cipher): written = try cipher.update(piece, into: output)
                }
            } catch {
                throw SegmentCryptoError.cryptoFailure(segment: segment)
            }
            if written > 0 { try emit(UnsafeRawBufferPointer(rebasing: output[0..<written])) }
            offset += piece.count
        }
    }

    /// Ends the segment: checks (decrypt) or adds (encrypt) the padding.
    /// - Throws: ``SegmentCryptoError/badPadding(segment:)`` or ``SegmentCryptoError/truncatedSegment(segment:)``.
    public func finish(emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard case .cbc(let cipher) = engine else { return }  // CTR has no padding and nothing held back.
        let written: Int
        do {
            written = try cipher.finish(into: output)
        } catch let error as CryptoError where error == .badPadding {
            throw SegmentCryptoError.badPadding(segment: segment)
        } catch let error as CryptoError where error == .truncatedInput {
            throw SegmentCryptoError.truncatedSegment(segment: segment)
        } catch {
            throw SegmentCryptoError.cryptoFailure(segment: segment)
        }
        if written > 0 { try emit(UnsafeRawBufferPointer(rebasing: output[0..<written])) }
    }
}
