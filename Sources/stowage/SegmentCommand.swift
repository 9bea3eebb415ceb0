import ArgumentParser
import Foundation
import MediaCrypto
import StowageCrypto

#if canImport(Glibc)
import Glibc
#endif

/// `stowage segment decrypt|encrypt`
struct SegmentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "segment",
        abstract: "Decrypt or encrypt one HLS segment (AES-128, AES-256, SAMPLE-AES for MPEG-TS and fMP4).",
        subcommands: [Decrypt.self, Encrypt.self]
    )

    struct Options: ParsableArguments {
        @Option(help: "aes-128, aes-256, aes-256-ctr or sample-aes.")
        var method: String

        @Option(help: "The content key in hex (32 digits; 64 for aes-256).")
        var key: String

        @Option(
            help:
                "The IV in hex (32 digits): the EXT-X-KEY IV, or the media sequence number as a 128-bit big-endian value. Optional for SAMPLE-AES fMP4, where the media carries it."
        )
        var iv: String?

        @Option(
            name: .customLong("init"),
            help: "For SAMPLE-AES fMP4: the rendition's init section (the protected one for decrypt, the clear one for encrypt)."
        )
        var initSection: String?

        @Option(help: "For SAMPLE-AES fMP4 encryption: the key ID written in the init section's tenc box (32 hex digits; default all zeros).")
        var keyId: String?

        @Option(help: "For SAMPLE-AES fMP4 encryption: where to write the protected init section.")
        var initOut: String?

        @Argument(help: "Input segment, or - for standard input.")
        var input: String

        @Argument(help: "Output file, or - for standard output.")
        var output: String
    }

    struct Decrypt: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Decrypt one segment; the container (MPEG-TS or fMP4) is detected.",
            discussion: """
                Examples:
                  stowage segment decrypt --method aes-128 --key 000102030405060708090a0b0c0d0e0f \\
                    --iv 00000000000000000000000000000007 seg_0.ts clear_0.ts
                  stowage segment decrypt --method sample-aes --key ... --init init.mp4 seg_1.m4s -
                """
        )
        @OptionGroup var options: Options
        func run() throws { try SegmentCommand.run(options, direction: .decrypt) }
    }

    struct Encrypt: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Encrypt one clear segment; the container (MPEG-TS or fMP4) is detected.",
            discussion: """
                Example:
                  stowage segment encrypt --method sample-aes --key 000102030405060708090a0b0c0d0e0f \\
                    --iv 0a0b0c0d0e0f10111213141516171819 clear_0.ts seg_0.ts
                """
        )
        @OptionGroup var options: Options
        func run() throws { try SegmentCommand.run(options, direction: .encrypt) }
    }

    static func run(_ options: Options, direction: AESCBCCipher.Direction) throws {
        guard let method = SegmentEncryptionMethod(name: options.method) else {
            throw ValidationError("--method must be aes-128, aes-256, aes-256-ctr or sample-aes")
        }
        guard let keyBytes = Hex.decode(options.key), keyBytes.count == method.keyLength else {
            throw ValidationError("--key must be \(method.keyLength * 2) hex digits for \(method.rawValue)")
        }
        var iv: [UInt8]?
        if let text = options.iv {
            let digits = text.hasPrefix("0x") || text.hasPrefix("0X") ? String(text.dropFirst(2)) : text
            guard let bytes = Hex.decode(digits), bytes.count == 16 else { throw ValidationError("--iv must be 32 hex digits") }
            iv = bytes
        }
        let input = try open(options.input, forWriting: false)
        defer { if input != STDIN_FILENO { close(input) } }
        var prefix = [UInt8](repeating: 0, count: SegmentContainer.detectionLength)
        var filled = 0
        while filled < prefix.count {
            let count = prefix.withUnsafeMutableBytes { read(input, $0.baseAddress! + filled, $0.count - filled) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            filled += count
        }
        prefix.removeSubrange(filled...)
        let container = SegmentContainer.detect(prefix)
        var initSection: CBCSInitSection?
        if method == .sampleAES, container == .fragmentedMP4 {
            guard let path = options.initSection else {
                CommandOutput.fail(
                    code: "missing_init_section",
                    message: "SAMPLE-AES fMP4 needs the rendition's init section: pass --init FILE",
                    json: false
                )
            }
            var keyID = [UInt8](repeating: 0, count: 16)
            if let text = options.keyId {
                guard let bytes = Hex.decode(text), bytes.count == 16 else { throw ValidationError("--key-id must be 32 hex digits") }
                keyID = bytes
            }
            do {
                let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
                initSection =
                    direction == .decrypt
                    ? try CBCSInitSection.parse(bytes, segment: path)
                    : try CBCSInitSection.encrypting(clearInit: bytes, keyID: keyID, constantIV: iv ?? Array(repeating: 0, count: 16), segment: path)
                if direction == .encrypt, let initOut = options.initOut, let initSection {
                    try Data(initSection.bytes).write(to: URL(fileURLWithPath: initOut), options: .atomic)
                }
            } catch let error as SegmentCryptoError {
                CommandOutput.fail(code: error.code, message: error.description, json: false)
            } catch {
                CommandOutput.fail(code: "unreadable", message: "cannot read or write an init section: \(error.localizedDescription)", json: false)
            }
        }
        guard method == .sampleAES && container == .fragmentedMP4 || iv != nil else {
            throw ValidationError("--iv is required for \(method.rawValue) \(container == .transportStream ? "MPEG-TS" : "") segments")
        }
        let output = try open(options.output, forWriting: true)
        defer { if output != STDOUT_FILENO { close(output) } }
        do {
            let key = SecretBytes(keyBytes)
            let segmentName = options.input == "-" ? "stdin" : options.input
            let transform =
                direction == .decrypt
                ? try SegmentCryptography.decryptor(
                    method: method,
                    container: container,
                    key: key,
                    iv: iv ?? Array(repeating: 0, count: 16),
                    initSection: initSection,
                    segment: segmentName
                )
                : try SegmentCryptography.encryptor(
                    method: method,
                    container: container,
                    key: key,
                    iv: iv ?? Array(repeating: 0, count: 16),
                    initSection: initSection,
                    segment: segmentName
                )
            try transform.process(prefix) { try writeAll($0, to: output) }
            try transform.run(from: input, to: output)
        } catch let error as SegmentCryptoError {
            if output != STDOUT_FILENO { unlink(options.output) }
            CommandOutput.fail(code: error.code, message: error.description, json: false)
        } catch let error as SegmentIOError {
            if output != STDOUT_FILENO { unlink(options.output) }
            CommandOutput.fail(code: "io_error", message: error.description, json: false)
        }
    }

    private static func open(_ path: String, forWriting: Bool) throws -> Int32 {
        if path == "-" { return forWriting ? STDOUT_FILENO : STDIN_FILENO }
        let descriptor = forWriting ? Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) : Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            CommandOutput.fail(
                code: forWriting ? "output_failed" : "unreadable",
                message: "cannot open \(path): \(String(cString: strerror(errno)))",
                json: false
            )
        }
        return descriptor
    }

    private static func writeAll(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) throws {
        var offset = 0
        while offset < bytes.count {
            let count = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if count < 0 {
                if errno == EINTR { continue }
                throw SegmentIOError(operation: "write", errorNumber: errno)
            }
            offset += count
        }
    }
}
