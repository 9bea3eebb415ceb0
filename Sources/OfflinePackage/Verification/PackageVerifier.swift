public import Foundation
public import KeyDelivery
import MediaCrypto
import StowageCore
import StowageCrypto

/// Answers "will this play offline?" before the user goes offline: `stowage verify ASSET [--deep] [--for DURATION]`.
///
/// It checks, without the network and without writing anything:
/// - the manifest: readable, the schema, every path inside the package, consistent with itself;
/// - every file the manifest lists: present, a regular file inside the package, of the recorded size, and with
///   ``Options/deep`` of the recorded SHA-256 (files deleted, cut, extended or changed behind Stowage's back);
/// - every key ID in use: held now (skd keys from a stored lease, identity keys from the sealed store), and the lease
///   valid now, or with ``Options/duration`` for that long, counting the playback window as starting now;
/// - trial decryption, streamed with bounded memory and never written anywhere: the first and last segment of
///   each rendition (every segment with ``Options/deep``), padding checked, the clear result validated as MPEG-TS
///   or fragmented MP4 (with the init section made clear). WebVTT and clear files get the size and hash checks only.
///
/// Extra files in the package folder (logs, playlists) are not problems. Every problem is named with a stable code
/// in the ``VerificationReport``; the package is playable when there are none.
///
/// ```swift
/// let verifier = PackageVerifier(store: store, device: device, clock: SystemClock(),
///                                options: .init(deep: true, duration: 48 * 3600))
/// let report = try await verifier.verify(try PackageDirectory(assetId: "movie-1", in: dataDirectory))
/// for problem in report.problems { print(problem) }
/// exit(report.exitStatus)
/// ```
public struct PackageVerifier: Sendable {
    /// How thorough the verification is.
    public struct Options: Sendable, Hashable {
        /// Hash every file and trial-decrypt every segment (`--deep`); otherwise sizes only, and trial decryption of
        /// the first and last segment of each rendition.
        public var deep: Bool
        /// `--for`: seconds the package must stay playable from now, counting the playback window; nil: now only.
        public var duration: Int64?
        /// How many files are checked at once.
        public var concurrency: Int

        /// Options; the defaults are a quick verification for now, one file per processor at a time.
        public init(deep: Bool = false, duration: Int64? = nil, concurrency: Int = ProcessInfo.processInfo.activeProcessorCount) {
            self.deep = deep
            self.duration = duration
            self.concurrency = max(1, concurrency)
        }
    }

    /// Init sections are read whole; none is anywhere near this large.
    static let initSectionLimit = 16 << 20

    /// Where keys and leases are kept.
    public let store: KeyStore
    /// This device, which skd keys are wrapped to.
    public let device: DeviceIdentity
    /// The time lease rules are judged at (read once per verification).
    public let clock: any Clock
    /// How thorough to be.
    public var options: Options

    /// A verifier.
    public init(store: KeyStore, device: DeviceIdentity, clock: any Clock, options: Options = Options()) {
        self.store = store
        self.device = device
        self.clock = clock
        self.options = options
    }

    /// Verifies one package.
    ///
    /// Looking at the lease records the local time in the key store, like every lease operation, so a clock set back
    /// is caught (and reported as `clock_rollback_detected`).
    ///
    /// - Returns: the report; problems with the package are in it, never thrown.
    /// - Throws: ``PackageError/notFound(_:)`` when the package folder does not exist; the key store's errors when it
    ///   cannot be read (``KeyStoreError`` `database_failure`); `CancellationError`.
    public func verify(_ package: PackageDirectory) async throws -> VerificationReport {
        let now = clock.now
        guard package.exists else { throw PackageError.notFound(package.assetId) }
        let manifest: PackageManifest
        do {
            manifest = try package.readManifest()
        } catch {
            let reason =
                switch error {
                case .notFound: "the package has no \(PackageManifest.fileName)"
                case .invalidManifest(_, let why): why
                default: error.description
                }
            return VerificationReport(
                assetId: package.assetId,
                title: nil,
                depth: depth,
                verifiedAt: now,
                requiredDuration: options.duration,
                isComplete: false,
                lease: nil,
                keys: [],
                renditions: [],
                problems: [
                    VerificationProblem(
                        .manifestInvalid,
                        message: "the manifest of asset \(package.assetId) cannot be used (\(reason)); delete the asset and download it again",
                        path: PackageManifest.fileName,
                        cause: error.code
                    )
                ]
            )
        }

        var problems = Self.consistencyProblems(of: manifest)
        let keys = try PackageKeyCheck(store: store, device: device).check(manifest, at: now, duration: options.duration)
        problems += keys.problems

        guard let root = StoredFileCheck.realPath(package.url.path) else { throw PackageError.notFound(package.assetId) }
        var plans: [RenditionPlan] = []
        for rendition in manifest.renditions {
            plans.append(try plan(rendition, in: package, root: root, keys: keys.keys))
        }
        let checks = plans.flatMap(\.checks)
        let outcomes = try await run(checks)
        if options.deep {
            // Segments hashed whole and unchanged while read: play need not hash them again (VerifiedFileRecords).
            var checked: [String: VerifiedFileRecords.Entry] = [:]
            for (check, outcome) in zip(checks, outcomes) { checked[check.file.path] = outcome.checked }
            VerifiedFileRecords.record(checked, manifest: manifest, in: package)
        }

        var renditions: [VerificationReport.RenditionResult] = []
        var offset = 0
        for plan in plans {
            let results = outcomes[offset..<offset + plan.checks.count]
            offset += plan.checks.count
            let found = plan.problems + results.flatMap(\.problems)
            problems += found
            let rendition = plan.rendition
            let keyIds = Set(rendition.files.compactMap(\.key?.keyId))
            let keysHeld = keyIds.allSatisfy { keys.keys[$0] != nil }
            let own = problems.filter { $0.rendition == rendition.id }
            // A package-level problem that is not about keys or the lease (those are judged through `keysHeld`).
            let packageDamaged = problems.contains { $0.rendition == nil && $0.code == .manifestInvalid }
            renditions.append(
                VerificationReport.RenditionResult(
                    id: rendition.id,
                    kind: rendition.kind.rawValue,
                    name: rendition.name,
                    language: rendition.language,
                    isComplete: rendition.isComplete,
                    isPlayable: rendition.isComplete && own.isEmpty && keysHeld && (keyIds.isEmpty || keys.leaseIsValid)
                        && !packageDamaged,
                    files: rendition.files.count,
                    bytes: rendition.files.reduce(0) { $0 + ($1.size ?? 0) },
                    filesHashed: plan.hashedInitSections + results.filter(\.hashed).count,
                    filesDecrypted: plan.decryptedInitSections + results.filter(\.decrypted).count,
                    problems: own.count
                )
            )
        }
        return VerificationReport(
            assetId: manifest.assetId,
            title: manifest.title,
            depth: depth,
            verifiedAt: now,
            requiredDuration: options.duration,
            isComplete: manifest.isComplete,
            lease: keys.lease.map(PackageLeaseSummary.init),
            keys: manifest.keys.map {
                VerificationReport.KeyStatus(keyId: $0.keyId, kind: $0.kind.rawValue, isAvailable: keys.keys[$0.keyId] != nil)
            },
            renditions: renditions,
            problems: problems,
            warnings: (manifest.recording?.gaps ?? []).map { gap in
                let span = gap.startsAt.map { start in
                    ", from \(HumanTime.instant(start)) to \(HumanTime.instant(gap.endsAt ?? start + gap.seconds)) on the broadcast's clock"
                }
                return VerificationProblem(
                    .recordingGap,
                    message:
                        "\(gap.segments) segment(s) of \(gap.renditionId) from media sequence \(gap.firstMediaSequence), about "
                        + "\(HumanTime.duration(Int64(gap.seconds.rounded()))), were not recorded\(span ?? ""): they left the live "
                        + "playlist before they were fetched; players skip the gap",
                    rendition: gap.renditionId
                )
            }
        )
    }

    private var depth: VerificationReport.Depth { options.deep ? .deep : .quick }

    // MARK: - Planning

    /// What to check in one rendition: the init sections are checked (and prepared for trial decryption) while
    /// planning; the segments become ``StoredFileCheck``s run concurrently.
    private struct RenditionPlan {
        var rendition: PackageRendition
        var problems: [VerificationProblem] = []
        var checks: [StoredFileCheck] = []
        var hashedInitSections = 0
        var decryptedInitSections = 0
    }

    /// An init section as trial decryption of its segments needs it.
    private struct PreparedInitSection {
        /// The protected init section, for SAMPLE-AES fMP4.
        var protection: CBCSInitSection?
        /// The init section made clear, for validating fragments; nil when it is not fragmented MP4.
        var clear: CBCSInitSection?
    }

    private func plan(
        _ rendition: PackageRendition,
        in package: PackageDirectory,
        root: String,
        keys: [String: SecretBytes]
    ) throws -> RenditionPlan {
        var plan = RenditionPlan(rendition: rendition)
        guard rendition.isComplete else {
            plan.problems.append(
                VerificationProblem(
                    .packageIncomplete,
                    message: "the \(rendition.kind.rawValue) rendition '\(rendition.name)' (\(rendition.id)) is not completely "
                        + "downloaded; let the download finish, or resume it while online",
                    rendition: rendition.id
                )
            )
            return plan
        }
        let positions = rendition.segments.indices.filter { rendition.segments[$0].file != nil }
        let segments = positions.map { rendition.segments[$0] }
        let trialIndexes: Set<Int> =
            options.deep ? Set(segments.indices) : Set([segments.indices.first, segments.indices.last].compactMap { $0 })
        var neededInitSections: [Int: SegmentEncryptionMethod] = [:]
        for index in trialIndexes {
            let segment = segments[index]
            guard let section = segment.initSection, let key = segment.file?.key,
                let method = SegmentEncryptionMethod(name: key.method)
            else { continue }
            neededInitSections[section] = method
        }

        var prepared: [Int: PreparedInitSection] = [:]
        for (index, file) in rendition.initSections.enumerated() {
            guard file.size != nil, let url = try? package.url(forRelativePath: file.path) else { continue }
            let check = StoredFileCheck(rendition: rendition.id, file: file, url: url, root: root, hash: options.deep, trial: nil)
            let outcome = try check.run()
            plan.problems += outcome.problems
            if outcome.hashed { plan.hashedInitSections += 1 }
            guard outcome.isIntact, let method = neededInitSections[index] else { continue }
            let (section, problems) = try prepare(file, url: url, rendition: rendition.id, segmentMethod: method, keys: keys)
            plan.problems += problems
            if section != nil || !problems.isEmpty, file.key != nil { plan.decryptedInitSections += 1 }
            prepared[index] = section
        }

        for (index, segment) in segments.enumerated() {
            guard let file = segment.file, file.size != nil, let url = try? package.url(forRelativePath: file.path) else { continue }
            var trial: StoredFileCheck.TrialDecryption?
            if trialIndexes.contains(index), let key = file.key, let content = keys[key.keyId],
                let method = SegmentEncryptionMethod(name: key.method), let iv = Hex.decode(key.iv), iv.count == 16
            {
                var initSection: PreparedInitSection?
                if let section = segment.initSection {
                    initSection = prepared[section]
                }
                // Without its init section (damaged, or its key missing) a fragment cannot be judged; the init
                // section's own problem says why.
                if segment.initSection == nil || initSection != nil {
                    trial = StoredFileCheck.TrialDecryption(
                        method: method,
                        key: content,
                        iv: iv,
                        protection: initSection?.protection,
                        clearInitSection: initSection?.clear,
                        expected: initSection.map { $0.clear == nil ? nil : .fragmentedMP4 } ?? Self.expectedContainer(file.path),
                        neighbours: rendition.transportStreamNeighbours(ofSegmentAt: positions[index], in: package) { keys[$0.keyId] }
                    )
                }
            }
            plan.checks.append(StoredFileCheck(rendition: rendition.id, file: file, url: url, root: root, hash: options.deep, trial: trial))
        }
        return plan
    }

    /// Decrypts an init section (an AES-128 EXT-X-MAP) and parses it for its fragments.
    private func prepare(
        _ file: PackageFile,
        url: URL,
        rendition: String,
        segmentMethod: SegmentEncryptionMethod,
        keys: [String: SecretBytes]
    ) throws -> (PreparedInitSection?, [VerificationProblem]) {
        var bytes: [UInt8]
        switch try StoredFileCheck.readWhole(url, limit: Self.initSectionLimit) {
        case .unreadable(let reason):
            let problem = VerificationProblem(
                .fileUnreadable,
                message: "cannot read the init section \(file.path): \(reason); delete the asset and download it again",
                rendition: rendition,
                path: file.path
            )
            return (nil, [problem])
        case .bytes(let read):
            bytes = read
        }
        // RFC 8216bis 4.4.4.5: an EXT-X-MAP under an AES-128 key is itself encrypted with that key.
        if let key = file.key, let method = SegmentEncryptionMethod(name: key.method), !method.isSampleEncryption {
            guard let content = keys[key.keyId], let iv = Hex.decode(key.iv), iv.count == 16 else { return (nil, []) }
            do {
                let cipher = try SegmentCryptography.decryptor(method: method, container: .other, key: content, iv: iv, segment: file.path)
                bytes = try cipher.transform(bytes)
            } catch {
                let crypto = error as? SegmentCryptoError
                let problem = VerificationProblem(
                    .decryptionFailed,
                    message: "the init section \(file.path) cannot be decrypted with key \(key.keyId): "
                        + "\(crypto?.description ?? "\(error)"); the key is wrong or the file is damaged: delete the asset and "
                        + "download it again",
                    rendition: rendition,
                    path: file.path,
                    keyId: key.keyId,
                    cause: crypto?.code
                )
                return (nil, [problem])
            }
        }
        let detected = SegmentContainer.detect(Array(bytes.prefix(SegmentContainer.detectionLength)))
        if let expected = Self.expectedContainer(file.path), detected != expected {
            let problem = VerificationProblem(
                .invalidMedia,
                message: "the init section \(file.path) is not "
                    + (expected == .fragmentedMP4 ? "fragmented MP4" : "an MPEG-2 transport stream")
                    + (file.key == nil ? "" : " after decryption") + "; the file is damaged or the key is wrong: delete the asset "
                    + "and download it again",
                rendition: rendition,
                path: file.path,
                keyId: file.key?.keyId,
                cause: .malformedContainer
            )
            return (nil, [problem])
        }
        guard detected == .fragmentedMP4 else { return (PreparedInitSection(protection: nil, clear: nil), []) }
        do throws(SegmentCryptoError) {
            let parsed = try CBCSInitSection.parse(bytes, segment: file.path)
            guard segmentMethod.isSampleEncryption else { return (PreparedInitSection(protection: nil, clear: parsed), []) }
            guard parsed.protectsAnyTrack else {
                let problem = VerificationProblem(
                    .decryptionFailed,
                    message: "the playlist sample-encrypts the segments of \(file.path) (\(segmentMethod)), but that init section "
                        + "protects no track (no sinf box): players would take the encrypted samples for clear ones. The source "
                        + "is inconsistent; report it to its provider",
                    rendition: rendition,
                    path: file.path,
                    keyId: file.key?.keyId,
                    cause: .unsupportedEncryption
                )
                return (nil, [problem])
            }
            let clear = try CBCSInitSection.parse(try parsed.clearInitSection(), segment: file.path)
            return (PreparedInitSection(protection: parsed, clear: clear), [])
        } catch {
            let problem = VerificationProblem(
                .invalidMedia,
                message: "the init section \(file.path) is not a valid fragmented MP4 init section (\(error.description)); "
                    + "delete the asset and download it again",
                rendition: rendition,
                path: file.path,
                keyId: file.key?.keyId,
                cause: error.code
            )
            return (nil, [problem])
        }
    }

    /// What a segment without an init section must decrypt to, by its file name (Stowage names files by container).
    static func expectedContainer(_ path: String) -> SegmentContainer? {
        switch (path as NSString).pathExtension.lowercased() {
        case "ts", "m2ts", "mts": .transportStream
        case "m4s", "mp4", "m4v", "m4a", "cmfv", "cmfa": .fragmentedMP4
        default: nil
        }
    }

    // MARK: - Running

    /// Runs the checks, at most ``Options/concurrency`` at a time, and returns their outcomes in order.
    private func run(_ checks: [StoredFileCheck]) async throws -> [StoredFileCheck.Outcome] {
        var outcomes = [StoredFileCheck.Outcome](repeating: StoredFileCheck.Outcome(), count: checks.count)
        try await withThrowingTaskGroup(of: (Int, StoredFileCheck.Outcome).self) { group in
            var next = 0
            func startNext() {
                guard next < checks.count else { return }
                let index = next
                let check = checks[index]
                next += 1
                group.addTask { (index, try check.run()) }
            }
            for _ in 0..<min(options.concurrency, checks.count) { startNext() }
            while let (index, outcome) = try await group.next() {
                outcomes[index] = outcome
                startNext()
            }
        }
        return outcomes
    }

    // MARK: - The manifest against itself

    /// What makes a manifest lie about itself: a file naming a key the manifest does not list or an IV that is not
    /// 16 bytes, a method Stowage cannot decrypt, a complete rendition with a file of unknown size or checksum, a
    /// segment naming an init section that is not there.
    static func consistencyProblems(of manifest: PackageManifest) -> [VerificationProblem] {
        var problems: [VerificationProblem] = []
        let keyIds = Set(manifest.keys.map(\.keyId))
        for rendition in manifest.renditions {
            func invalid(_ what: String, path: String? = nil) {
                problems.append(
                    VerificationProblem(
                        .manifestInvalid,
                        message: "the manifest of asset \(manifest.assetId) \(what); delete the asset and download it again",
                        rendition: rendition.id,
                        path: path
                    )
                )
            }
            var unsupported: Set<String> = []
            for file in rendition.files {
                if rendition.isComplete, file.size == nil || file.sha256 == nil {
                    invalid("marks rendition \(rendition.id) complete but gives no size or checksum for \(file.path)", path: file.path)
                }
                guard let key = file.key else { continue }
                if !keyIds.contains(key.keyId) {
                    invalid("names key \(key.keyId) for \(file.path) but does not list it", path: file.path)
                }
                if Hex.decode(key.iv)?.count != 16 {
                    invalid("gives \(file.path) the IV '\(key.iv)', which is not 32 hex digits", path: file.path)
                }
                if SegmentEncryptionMethod(name: key.method) == nil, unsupported.insert(key.method).inserted {
                    problems.append(
                        VerificationProblem(
                            .decryptionFailed,
                            message: "rendition \(rendition.id) is encrypted with METHOD=\(key.method), which Stowage cannot decrypt",
                            rendition: rendition.id,
                            path: file.path,
                            keyId: key.keyId,
                            cause: .unsupportedMethod
                        )
                    )
                }
            }
            for segment in rendition.segments {
                if let section = segment.initSection, !rendition.initSections.indices.contains(section) {
                    invalid("gives segment \(segment.index) of rendition \(rendition.id) the init section \(section), which it does not list")
                }
            }
        }
        return problems
    }
}
