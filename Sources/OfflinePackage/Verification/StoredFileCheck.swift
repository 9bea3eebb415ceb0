import Foundation
import MediaCrypto
import StowageCore
import StowageCrypto

#if canImport(Glibc)
import Glibc
#endif

/// One pass over one stored file: where it leads, its size, and, reading it once, its SHA-256 and a trial
/// decryption whose clear output is validated and dropped. Memory stays at one read buffer plus what the decryptor
/// and validator hold; nothing clear is written anywhere.
struct StoredFileCheck: Sendable {
    /// Decrypt the file and validate the result.
    struct TrialDecryption: Sendable {
        var method: SegmentEncryptionMethod
        var key: SecretBytes
        var iv: [UInt8]
        /// The rendition's protected init section, for SAMPLE-AES fMP4.
        var protection: CBCSInitSection?
        /// The init section made clear, for validating fragments.
        var clearInitSection: CBCSInitSection?
        /// What the clear data must be; nil accepts any container.
        var expected: SegmentContainer?
        /// SAMPLE-AES MPEG-TS: the segments its PES packets may span into.
        var neighbours = TransportStreamNeighbours.none
    }

    /// What one pass found.
    struct Outcome: Sendable {
        var problems: [VerificationProblem] = []
        /// Whether the size matched (and the file could be read through when it was read).
        var isIntact = false
        var hashed = false
        var decrypted = false
        /// The file hashed whole to its recorded SHA-256, with the identity it had before and after the read.
        var checked: VerifiedFileRecords.Entry?
    }

    static let bufferSize = 1 << 20

    var rendition: String
    var file: PackageFile
    var url: URL
    /// The package folder with every link resolved.
    var root: String
    var hash: Bool
    var trial: TrialDecryption?

    /// Runs the check.
    /// - Throws: `CancellationError` only.
    func run() throws -> Outcome {
        var outcome = Outcome()
        guard let size = try located(&outcome) else { return outcome }
        guard size == file.size else {
            outcome.problems.append(Self.sizeProblem(file, rendition: rendition, actual: size))
            return outcome
        }
        outcome.isIntact = true
        guard hash || trial != nil else { return outcome }

        var hasher = hash ? SHA256Hasher() : nil
        var decryption: (transform: any SegmentTransform, check: ClearMediaCheck)?
        var decryptionFailure: (any Error)?
        var identity: FileIdentity?
        let readFailure = try Self.forEachChunk(of: url, unchangedIdentity: &identity) { chunk in
            hasher?.update(chunk)
            guard let trial, decryptionFailure == nil else { return }
            do {
                if decryption == nil { decryption = try start(trial, firstChunk: chunk) }
                guard let decryption else { return }
                try decryption.transform.process(chunk) { decryption.check.consume($0) }
            } catch {
                decryptionFailure = error
            }
        }
        if let readFailure {
            outcome.isIntact = false
            outcome.problems.append(
                VerificationProblem(
                    .fileUnreadable,
                    message: "cannot read \(file.path): \(readFailure); check its permissions, or delete the asset and download it again",
                    rendition: rendition,
                    path: file.path
                )
            )
            return outcome
        }
        if let hasher, let expected = file.sha256 {
            var finished = hasher
            let digest = Hex.encode(finished.finalize())
            outcome.hashed = true
            if digest == expected.lowercased(), let identity {
                outcome.checked = VerifiedFileRecords.Entry(sha256: digest, identity: identity)
            }
            if digest != expected.lowercased() {
                outcome.problems.append(
                    VerificationProblem(
                        .fileModified,
                        message: "\(file.path) has the right size but not the content that was downloaded (SHA-256 \(digest), "
                            + "expected \(expected)); it was changed outside Stowage: delete the asset and download it again",
                        rendition: rendition,
                        path: file.path
                    )
                )
            }
        }
        if let trial {
            // A file shorter than one chunk, or empty: the transform starts here.
            if decryption == nil, decryptionFailure == nil {
                do { decryption = try start(trial, firstChunk: UnsafeRawBufferPointer(start: nil, count: 0)) } catch { decryptionFailure = error }
            }
            if decryptionFailure == nil, let decryption {
                do { try decryption.transform.finish { decryption.check.consume($0) } } catch { decryptionFailure = error }
            }
            outcome.decrypted = true
            if let decryptionFailure {
                outcome.problems.append(decryptionProblem(decryptionFailure))
            } else if let damage = decryption?.check.finish() {
                outcome.problems.append(
                    VerificationProblem(
                        .invalidMedia,
                        message: "\(file.path) decrypts, but not to valid media (\(damage.description)); "
                            + "the file is damaged or the key is wrong: delete the asset and download it again",
                        rendition: rendition,
                        path: file.path,
                        keyId: file.key?.keyId,
                        cause: damage.code
                    )
                )
            }
        }
        return outcome
    }

    /// Where the file is: nil (with a problem) when it is missing, leads outside the package or is not a regular file.
    private func located(_ outcome: inout Outcome) throws -> Int64? {
        if Task.isCancelled { throw CancellationError() }
        guard let resolved = Self.realPath(url.path) else {
            let reason = errno == ENOENT ? "is missing" : "cannot be reached (\(String(cString: strerror(errno))))"
            outcome.problems.append(
                VerificationProblem(
                    .fileMissing,
                    message: "\(file.path) \(reason); it was deleted outside Stowage: delete the asset and download it again",
                    rendition: rendition,
                    path: file.path
                )
            )
            return nil
        }
        guard resolved.hasPrefix(root + "/") else {
            outcome.problems.append(
                VerificationProblem(
                    .fileModified,
                    message: "\(file.path) was replaced by a link leading outside the package (to \(resolved)); "
                        + "delete the asset and download it again",
                    rendition: rendition,
                    path: file.path
                )
            )
            return nil
        }
        var info = stat()
        guard stat(resolved, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            outcome.problems.append(
                VerificationProblem(
                    .fileMissing,
                    message: "\(file.path) is not a regular file; delete the asset and download it again",
                    rendition: rendition,
                    path: file.path
                )
            )
            return nil
        }
        return Int64(info.st_size)
    }

    /// The decryptor for the file, built from its first bytes (SAMPLE-AES needs the container).
    private func start(
        _ trial: TrialDecryption,
        firstChunk: UnsafeRawBufferPointer
    ) throws -> (transform: any SegmentTransform, check: ClearMediaCheck) {
        let container: SegmentContainer =
            trial.method.isSampleEncryption ? SegmentContainer.detect(Array(firstChunk.prefix(SegmentContainer.detectionLength))) : .other
        let transform = try SegmentCryptography.decryptor(
            method: trial.method,
            container: container,
            key: trial.key,
            iv: trial.iv,
            initSection: trial.protection,
            segment: file.path,
            neighbours: trial.neighbours
        )
        return (transform, ClearMediaCheck(expected: trial.expected, initSection: trial.clearInitSection, segment: file.path))
    }

    private func decryptionProblem(_ error: any Error) -> VerificationProblem {
        let crypto = error as? SegmentCryptoError
        return VerificationProblem(
            .decryptionFailed,
            message: "\(file.path) cannot be decrypted with key \(file.key?.keyId ?? "?"): \(crypto?.description ?? "\(error)"); "
                + "the key is wrong or the file is damaged: delete the asset and download it again",
            rendition: rendition,
            path: file.path,
            keyId: file.key?.keyId,
            cause: crypto?.code
        )
    }

    static func sizeProblem(_ file: PackageFile, rendition: String, actual: Int64) -> VerificationProblem {
        let expected = file.size ?? 0
        let smaller = actual < expected
        return VerificationProblem(
            smaller ? .fileTruncated : .fileSizeMismatch,
            message: "\(file.path) has \(actual) bytes, the manifest says \(expected): it was "
                + (smaller ? "truncated" : "extended") + " outside Stowage; delete the asset and download it again",
            rendition: rendition,
            path: file.path,
            expectedSize: expected,
            actualSize: actual
        )
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Calls `body` with consecutive chunks of the file.
    /// - Returns: why reading stopped early, nil when the whole file was read.
    /// - Throws: `CancellationError`, or what `body` throws.
    static func forEachChunk(of url: URL, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> String? {
        var identity: FileIdentity?
        return try forEachChunk(of: url, unchangedIdentity: &identity, body)
    }

    /// ``forEachChunk(of:_:)``, setting `unchangedIdentity` to the identity of the file it read (taken from the open
    /// descriptor, so a file put in its place by name is not mistaken for it) when it was the same before and after the
    /// read: what `verified.json` may record for it.
    static func forEachChunk(
        of url: URL,
        unchangedIdentity: inout FileIdentity?,
        _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> String? {
        do {
            let file = try ChunkedFile(url)
            let before = FileIdentity(descriptor: file.descriptor)
            try file.forEachChunk(chunkSize: bufferSize) { chunk in
                if Task.isCancelled { throw CancellationError() }
                try body(chunk)
            }
            unchangedIdentity = before.flatMap { FileIdentity(descriptor: file.descriptor) == $0 ? $0 : nil }
            return nil
        } catch let error as FileReadError {
            return error.reason
        }
    }

    /// A whole small file, or why it could not be read.
    enum WholeFile {
        case bytes([UInt8])
        case unreadable(String)
    }

    /// Reads a whole small file (an init section), refusing one over `limit` bytes.
    /// - Throws: `CancellationError` only.
    static func readWhole(_ url: URL, limit: Int) throws -> WholeFile {
        var bytes: [UInt8] = []
        var tooLarge = false
        let failure = try forEachChunk(of: url) { chunk in
            guard !tooLarge else { return }
            guard bytes.count + chunk.count <= limit else {
                tooLarge = true
                return
            }
            bytes.append(contentsOf: chunk)
        }
        if let failure { return .unreadable(failure) }
        if tooLarge { return .unreadable("it is larger than \(limit) bytes") }
        return .bytes(bytes)
    }
}
