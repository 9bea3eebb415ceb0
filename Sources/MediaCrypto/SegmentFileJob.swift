public import StowageCore
public import StowageCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Decrypts or encrypts one segment file (`stowage segment decrypt|encrypt`): the container is detected from the
/// first bytes, SAMPLE-AES fMP4 takes the rendition's init section, and the output streams through the segment's
/// transform a buffer at a time. `-` reads standard input or writes standard output. A file output is written beside
/// its path and renamed into place only on success, so a failure leaves no partial segment and the file that was
/// there (the input itself, decrypted in place) as it was; a device or pipe (`/dev/null`) is written as it is.
///
/// ```swift
/// try SegmentFileJob(method: .aes128, direction: .decrypt, key: key, iv: iv, input: "seg_0.ts", output: "clear_0.ts").run()
/// ```
public struct SegmentFileJob: Sendable {
    public var method: SegmentEncryptionMethod
    public var direction: AESCBCCipher.Direction
    public var key: SecretBytes
    /// The EXT-X-KEY IV (or the media sequence number as a 128-bit value); optional for SAMPLE-AES fMP4.
    public var iv: [UInt8]?
    /// For SAMPLE-AES fMP4 encryption: the key ID written in the init section (all zeros when nil).
    public var keyID: [UInt8]?
    /// For SAMPLE-AES fMP4: the rendition's init section (protected to decrypt, clear to encrypt).
    public var initSection: String?
    /// For SAMPLE-AES fMP4 encryption: where the protected init section is written.
    public var initOutput: String?
    public var input: String
    public var output: String

    public init(
        method: SegmentEncryptionMethod,
        direction: AESCBCCipher.Direction,
        key: SecretBytes,
        iv: [UInt8]?,
        keyID: [UInt8]? = nil,
        initSection: String? = nil,
        initOutput: String? = nil,
        input: String,
        output: String
    ) {
        self.method = method
        self.direction = direction
        self.key = key
        self.iv = iv
        self.keyID = keyID
        self.initSection = initSection
        self.initOutput = initOutput
        self.input = input
        self.output = output
    }

    /// Runs the job.
    ///
    /// - Throws: ``SegmentFileError`` (a file that cannot be opened, a missing init section or IV),
    ///   ``SegmentCryptoError`` (wrong key, damaged segment), ``SegmentIOError``.
    public func run() throws {
        let inputDescriptor = try Self.open(input, forWriting: false)
        defer { if inputDescriptor != STDIN_FILENO { close(inputDescriptor) } }
        let prefix = try Self.readPrefix(inputDescriptor, path: input)
        let container = SegmentContainer.detect(prefix)
        let protection = try protectionOfInitSection(container: container)
        guard method.isSampleEncryption && container == .fragmentedMP4 || iv != nil else {
            throw SegmentFileError.missingIV(method: method, container: container)
        }
        let target = try OutputTarget(output)
        let outputDescriptor = target.descriptor
        defer { target.close() }
        do {
            let name = input == "-" ? "stdin" : input
            let startIV = iv ?? [UInt8](repeating: 0, count: 16)
            let transform =
                direction == .decrypt
                ? try SegmentCryptography.decryptor(
                    method: method,
                    container: container,
                    key: key,
                    iv: startIV,
                    initSection: protection,
                    segment: name
                )
                : try SegmentCryptography.encryptor(
                    method: method,
                    container: container,
                    key: key,
                    iv: startIV,
                    initSection: protection,
                    segment: name
                )
            try transform.process(prefix) { bytes in try SegmentIOError.writeAll(bytes, to: outputDescriptor) }
            try transform.run(from: inputDescriptor, to: outputDescriptor)
            try target.commit()
        } catch {
            target.discard()
            throw error
        }
    }

    /// Where the output goes: standard output, a device or pipe written in place, or a regular file replaced through an
    /// ``AtomicFile`` that ``commit()`` puts in place (not synced: a command's output, which the user can run again).
    private struct OutputTarget {
        let descriptor: Int32
        let path: String
        /// The file's replacement, for a regular file.
        let file: AtomicFile?

        init(_ path: String) throws {
            self.path = path
            if path == "-" {
                descriptor = STDOUT_FILENO
                file = nil
                return
            }
            var status = stat()
            if stat(path, &status) == 0, status.st_mode & S_IFMT != S_IFREG {
                descriptor = Glibc.open(path, O_WRONLY | O_CLOEXEC)
                file = nil
                guard descriptor >= 0 else { throw SegmentFileError.cannotOpen(path: path, forWriting: true, errorNumber: errno) }
                return
            }
            do {
                let replacement = try AtomicFile(replacing: path)
                file = replacement
                descriptor = replacement.descriptor
            } catch {
                throw SegmentFileError.cannotOpen(path: path, forWriting: true, errorNumber: error.errorNumber)
            }
        }

        func commit() throws {
            do {
                try file?.commit(durable: false)
            } catch {
                throw SegmentFileError.cannotOpen(path: path, forWriting: true, errorNumber: error.errorNumber)
            }
        }

        func discard() { file?.discard() }

        func close() {
            if file == nil, descriptor != STDOUT_FILENO { _ = Glibc.close(descriptor) }
        }
    }

    /// The init section to decrypt or encrypt with, for SAMPLE-AES fMP4; nil otherwise. Writes the protected one when
    /// encrypting with ``initOutput``.
    private func protectionOfInitSection(container: SegmentContainer) throws -> CBCSInitSection? {
        guard method.isSampleEncryption, container == .fragmentedMP4 else { return nil }
        guard let path = initSection else { throw SegmentFileError.missingInitSection }
        let bytes = try Self.readWhole(path)
        let section =
            direction == .decrypt
            ? try CBCSInitSection.parse(bytes, segment: path)
            : try CBCSInitSection.encrypting(
                clearInit: bytes,
                keyID: keyID ?? [UInt8](repeating: 0, count: 16),
                constantIV: iv ?? [UInt8](repeating: 0, count: 16),
                segment: path
            )
        if direction == .encrypt, let initOutput { try Self.writeWhole(section.bytes, to: initOutput) }
        return section
    }

    private static func open(_ path: String, forWriting: Bool) throws -> Int32 {
        if path == "-" { return forWriting ? STDOUT_FILENO : STDIN_FILENO }
        let descriptor =
            forWriting ? Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) : Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw SegmentFileError.cannotOpen(path: path, forWriting: forWriting, errorNumber: errno) }
        return descriptor
    }

    /// Up to ``SegmentContainer/detectionLength`` bytes: enough to tell MPEG-TS from fMP4.
    private static func readPrefix(_ descriptor: Int32, path: String) throws -> [UInt8] {
        var prefix = [UInt8](repeating: 0, count: SegmentContainer.detectionLength)
        var filled = 0
        while filled < prefix.count {
            let count = prefix.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + filled, $0.count - filled) }
            if count < 0, errno == EINTR { continue }
            if count < 0 { throw SegmentIOError(operation: "read", errorNumber: errno) }
            guard count > 0 else { break }
            filled += count
        }
        prefix.removeSubrange(filled...)
        return prefix
    }

    private static func readWhole(_ path: String) throws -> [UInt8] {
        let descriptor = try open(path, forWriting: false)
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, $0.count) }
            if count < 0, errno == EINTR { continue }
            if count < 0 { throw SegmentIOError(operation: "read", errorNumber: errno) }
            guard count > 0 else { return bytes }
            guard bytes.count + count <= Self.initSectionLimit else {
                throw SegmentCryptoError.limitExceeded(segment: path, detail: "an init section larger than 16 MiB")
            }
            bytes += buffer[0..<count]
        }
    }

    private static func writeWhole(_ bytes: [UInt8], to path: String) throws {
        let descriptor = try open(path, forWriting: true)
        defer { close(descriptor) }
        try bytes.withUnsafeBytes { try SegmentIOError.writeAll($0, to: descriptor) }
    }

    /// Init sections are a few KB; this bounds a hostile one.
    static let initSectionLimit = 16 << 20
}

/// Why a segment file job could not run.
public struct SegmentFileError: StowageError, Hashable {
    public let code: ErrorCode
    public let message: String
    public let path: String?

    public var subject: ErrorSubject { ErrorSubject(path: path) }
    public var description: String { "\(code): \(message)" }

    static func cannotOpen(path: String, forWriting: Bool, errorNumber: Int32) -> Self {
        Self(
            code: forWriting ? .outputFailed : .unreadable,
            message: "Cannot open \(path) for \(forWriting ? "writing" : "reading"): \(String(cString: strerror(errorNumber))).",
            path: path
        )
    }

    static var missingInitSection: Self {
        Self(
            code: .missingInitSection,
            message: "A SAMPLE-AES fMP4 segment needs its rendition's init section: pass --init FILE.",
            path: nil
        )
    }

    static func missingIV(method: SegmentEncryptionMethod, container: SegmentContainer) -> Self {
        Self(
            code: .missingIV,
            message: "\(method.rawValue) \(container == .transportStream ? "MPEG-TS " : "")segments need an IV: pass --iv with 32 hex "
                + "digits (the EXT-X-KEY IV, or the media sequence number as a 128-bit big-endian value).",
            path: nil
        )
    }
}
