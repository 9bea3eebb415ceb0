import ArgumentParser
import Foundation
import KeyDelivery
import MediaCrypto
import StowageCrypto

/// `stowage segment decrypt|encrypt`
struct SegmentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "segment",
        abstract: "Decrypt or encrypt one HLS segment (AES-128, AES-256, SAMPLE-AES for MPEG-TS and fMP4).",
        subcommands: [Decrypt.self, Encrypt.self]
    )

    struct Options: ParsableArguments {
        @Option(help: "aes-128, aes-256, aes-256-ctr, sample-aes, or sample-aes-ctr (fMP4 cenc, decrypt only).")
        var method: String

        /// The content key: 16 bytes, 32 for aes-256.
        @OptionGroup var key: KeyOptions

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
                  stowage segment decrypt --method aes-128 --key-file movie.key \\
                    --iv 00000000000000000000000000000007 seg_0.ts clear_0.ts
                  stowage segment decrypt --method sample-aes --key - --init init.mp4 seg_1.m4s clear_1.m4s < movie.key
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
                  stowage segment encrypt --method sample-aes --key-file movie.key \\
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
        guard !(options.key.readsStandardInput && options.input == "-") else {
            throw ValidationError("--key - and the input - both read standard input: give the key with --key-file")
        }
        let contentKey = options.key.resolve(lengths: [method.keyLength], json: false)
        var iv: [UInt8]?
        if let text = options.iv {
            let digits = text.hasPrefix("0x") || text.hasPrefix("0X") ? String(text.dropFirst(2)) : text
            guard let bytes = Hex.decode(digits), bytes.count == 16 else { throw ValidationError("--iv must be 32 hex digits") }
            iv = bytes
        }
        var keyID: [UInt8]?
        if let text = options.keyId {
            guard let bytes = Hex.decode(text), bytes.count == 16 else { throw ValidationError("--key-id must be 32 hex digits") }
            keyID = bytes
        }
        let job = SegmentFileJob(
            method: method,
            direction: direction,
            key: contentKey,
            iv: iv,
            keyID: keyID,
            initSection: options.initSection,
            initOutput: options.initOut,
            input: options.input,
            output: options.output
        )
        do {
            try job.run()
        } catch {
            CommandOutput.fail(error, json: false)
        }
    }
}
