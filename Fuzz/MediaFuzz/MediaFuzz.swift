// libFuzzer entry point for the segment parsers and decryptors of MediaCrypto; built and run by scripts/fuzz-media.sh
// (see docs/fuzzing.md).
//
// The first input byte picks what is fuzzed, the second how the rest is cut into chunks; the next 16 are the key and the
// 16 after them the IV (so seeds made from real encrypted media decrypt, and the fuzzer reaches what follows):
//   0: the SAMPLE-AES MPEG-TS decryptor (the rewriter: PAT/PMT, PES, H.264 NAL units, AAC/AC-3 frames);
//   1: the MPEG-TS validator;
//   2: an fMP4 init section (CBCSInitSection.parse, two length bytes then the init section) and a segment after it:
//      the fMP4 validator and the SAMPLE-AES (cbcs) fragment decryptor;
//   3: the same for SAMPLE-AES-CTR (cenc);
//   4: Apple packed audio (ID3 PRIV timestamp, ADTS/AC-3 frames) under SAMPLE-AES;
//   5: AES-128 whole-segment decryption (CBC padding).
// For every input:
//   1. failures are SegmentCryptoError, nothing else (no trap, no sanitizer report);
//   2. streaming does not change the answer: the input fed whole and fed in chunks of the chosen size give the same
//      output, or both fail.
import MediaCrypto
import StowageCrypto

/// Traps with enough context to see what went wrong.
private func violation(_ property: String, _ details: String) -> Never {
    fatalError("MediaFuzz property violated: \(property)\n\(details)")
}

/// Runs `make()`'s transform over `data` in chunks of `size` bytes: the output, or the error.
private func run(_ make: () throws -> any SegmentTransform, _ data: [UInt8], chunk size: Int) -> Result<[UInt8], SegmentCryptoError>? {
    let transform: any SegmentTransform
    do {
        transform = try make()
    } catch let error as SegmentCryptoError {
        return .failure(error)
    } catch {
        violation("only SegmentCryptoError is thrown", "making the transform threw \(type(of: error)): \(error)")
    }
    var output: [UInt8] = []
    do {
        var start = 0
        repeat {
            let end = min(data.count, start + size)
            try transform.process(Array(data[start..<end])) { output.append(contentsOf: $0) }
            start = end
        } while start < data.count
        try transform.finish { output.append(contentsOf: $0) }
        return .success(output)
    } catch let error as SegmentCryptoError {
        return .failure(error)
    } catch {
        violation("only SegmentCryptoError is thrown", "\(type(of: error)): \(error)")
    }
}

/// Checks that the transform gives one answer whatever the chunking.
private func checkStreaming(_ make: () throws -> any SegmentTransform, _ data: [UInt8], chunk size: Int, _ what: String) {
    guard let whole = run(make, data, chunk: max(1, data.count)), let chunked = run(make, data, chunk: size) else { return }
    switch (whole, chunked) {
    case (.success(let a), .success(let b)):
        if a != b { violation("chunking does not change the output", "\(what): \(a.count) bytes whole, \(b.count) in chunks of \(size)") }
    case (.failure, .failure):
        break
    case (.success, .failure(let error)):
        violation("chunking does not change the outcome", "\(what): whole succeeded, chunks of \(size) failed: \(error)")
    case (.failure(let error), .success):
        violation("chunking does not change the outcome", "\(what): whole failed (\(error)), chunks of \(size) succeeded")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard bytes.count >= 34 else { return 0 }
    let size = Int(bytes[1]) * 7 + 1
    let key = SecretBytes(bytes[2..<18])
    let iv = Array(bytes[18..<34])
    var data = Array(bytes.dropFirst(34))
    switch bytes[0] % 6 {
    case 0:
        checkStreaming(
            { try SegmentCryptography.decryptor(method: .sampleAES, container: .transportStream, key: key, iv: iv, segment: "fuzz.ts") },
            data,
            chunk: size,
            "SAMPLE-AES MPEG-TS"
        )
    case 1:
        /// Whether the validator accepts `data` fed in chunks of `size` bytes; traps on an error of another type.
        func accepts(chunk size: Int) -> Bool {
            let validator = TransportStreamValidator(segment: "fuzz.ts")
            do {
                var offset = 0
                repeat {
                    let end = min(data.count, offset + size)
                    try data[offset..<end].withUnsafeBytes { try validator.process($0) }
                    offset = end
                } while offset < data.count
                _ = try validator.finish()
                return true
            } catch is SegmentCryptoError {
                return false
            } catch {
                violation("only SegmentCryptoError is thrown", "the validator threw \(type(of: error)): \(error)")
            }
        }
        let whole = accepts(chunk: max(1, data.count))
        if whole != accepts(chunk: size) {
            violation("chunking does not change the validator's outcome", "whole: \(whole), chunks of \(size): \(!whole)")
        }
    case 2, 3:
        guard data.count >= 2 else { return 0 }
        let initLength = min(data.count - 2, Int(data[0]) << 8 | Int(data[1]))
        let initBytes = Array(data[2..<(2 + initLength)])
        data = Array(data[(2 + initLength)...])
        let initSection: CBCSInitSection
        do {
            initSection = try CBCSInitSection.parse(initBytes, segment: "init.mp4")
        } catch {
            return 0
        }
        _ = try? initSection.clearInitSection()
        let validator = FragmentedMP4Validator.Stream(initSection: initSection, segment: "fuzz.m4s")
        _ = try? validator.process(data)
        let method: SegmentEncryptionMethod = bytes[0] % 6 == 2 ? .sampleAES : .sampleAESCTR
        checkStreaming(
            {
                try SegmentCryptography.decryptor(
                    method: method,
                    container: .fragmentedMP4,
                    key: key,
                    iv: iv,
                    initSection: initSection,
                    segment: "fuzz.m4s"
                )
            },
            data,
            chunk: size,
            "\(method.rawValue) fMP4"
        )
    case 4:
        checkStreaming(
            { try SegmentCryptography.decryptor(method: .sampleAES, container: .packedAudio, key: key, iv: iv, segment: "fuzz.aac") },
            data,
            chunk: size,
            "SAMPLE-AES packed audio"
        )
    default:
        checkStreaming(
            { try SegmentCryptography.decryptor(method: .aes128, container: .other, key: key, iv: iv, segment: "fuzz.ts") },
            data,
            chunk: size,
            "AES-128"
        )
    }
    return 0
}
