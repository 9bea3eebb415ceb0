public import StowageCrypto

/// The container of a segment, detected from its first bytes.
public enum SegmentContainer: String, Sendable, Hashable, CaseIterable {
    /// MPEG-2 transport stream (`.ts`).
    case transportStream = "ts"
    /// Fragmented MP4 (`.mp4`, `.m4s`), an init section or a fragment.
    case fragmentedMP4 = "fmp4"
    /// Packed audio (RFC 8216bis 3.4): raw AAC (ADTS), AC-3 or E-AC-3 frames, usually after an ID3 timestamp tag.
    case packedAudio = "packed-audio"
    /// Anything else (WebVTT, unknown).
    case other

    /// How many leading bytes ``detect(_:)`` wants to see when the segment is that long.
    public static let detectionLength = 376

    /// Detects the container from the first bytes of a segment.
    public static func detect(_ prefix: [UInt8]) -> SegmentContainer {
        if TransportStreamDetection.looksLikeTransportStream(prefix) { return .transportStream }
        if FragmentedMP4Detection.looksLikeFragmentedMP4(prefix) { return .fragmentedMP4 }
        if looksLikePackedAudio(prefix) { return .packedAudio }
        return .other
    }

    /// An ID3v2 tag, or an ADTS or AC-3 / E-AC-3 sync word, at the start.
    private static func looksLikePackedAudio(_ prefix: [UInt8]) -> Bool {
        guard prefix.count >= 4 else { return false }
        if prefix[0] == 0x49, prefix[1] == 0x44, prefix[2] == 0x33, prefix[3] <= 4 { return true }
        return AudioFrameHeader.codec(atStartOf: prefix) != nil
    }
}

/// The HLS encryption methods Stowage can decrypt and produce.
public enum SegmentEncryptionMethod: String, Sendable, Hashable, CaseIterable {
    /// Whole-segment AES-128-CBC with PKCS#7 padding.
    case aes128 = "AES-128"
    /// Whole-segment AES-256-CBC with PKCS#7 padding.
    case aes256 = "AES-256"
    /// Whole-segment AES-256-CTR, the IV being the initial counter block (as Shaka Player accepts it).
    case aes256CTR = "AES-256-CTR"
    /// Sample encryption: Apple's SAMPLE-AES for MPEG-TS, `cbcs` for fMP4.
    case sampleAES = "SAMPLE-AES"
    /// Sample encryption with AES-CTR: ISO/IEC 23001-7 `cenc` for fMP4 (RFC 8216bis 4.4.4.4), as Widevine- and
    /// PlayReady-packaged HLS uses it. Decryption only.
    case sampleAESCTR = "SAMPLE-AES-CTR"

    /// The method named by an EXT-X-KEY METHOD value or a command-line spelling (`aes-128`, `sample-aes`).
    public init?(name: String) {
        self.init(rawValue: name.uppercased())
    }

    /// Whether the method encrypts samples inside the container (SAMPLE-AES, SAMPLE-AES-CTR), keeping every size,
    /// rather than the whole file.
    public var isSampleEncryption: Bool { self == .sampleAES || self == .sampleAESCTR }

    /// The key length the method takes.
    public var keyLength: Int { self == .aes256 || self == .aes256CTR ? 32 : 16 }
}

/// Builds the streaming decryptor or encryptor for a segment from its method, container and key.
public enum SegmentCryptography {
    /// A decryptor for one media segment.
    /// - Parameters:
    ///   - initSection: for SAMPLE-AES fMP4, the rendition's protected init section (as parsed, or as made by
    ///     `CBCSInitSection.encrypting(clearInit:keyID:constantIV:segment:)` for encryption); required there.
    ///   - segment: the segment's name, used in errors.
    ///   - promptOutput: emit output as soon as it is ready, for a player waiting on a segment still arriving, rather
    ///     than in batches (SAMPLE-AES MPEG-TS gathers 256 KiB otherwise).
    ///   - neighbours: for SAMPLE-AES MPEG-TS, the rendition's segments before and after this one, which PES packets
    ///     may span into (``TransportStreamNeighbours``); ignored otherwise.
    public static func decryptor(
        method: SegmentEncryptionMethod,
        container: SegmentContainer,
        key: SecretBytes,
        iv: [UInt8],
        initSection: CBCSInitSection? = nil,
        segment: String,
        promptOutput: Bool = false,
        neighbours: TransportStreamNeighbours = .none
    ) throws(SegmentCryptoError) -> any SegmentTransform {
        if method == .sampleAESCTR {
            guard container == .fragmentedMP4, let initSection else {
                throw .unsupportedStream(
                    segment: segment,
                    detail: container == .fragmentedMP4
                        ? "SAMPLE-AES-CTR fMP4 needs the rendition's init section (--init)"
                        : "SAMPLE-AES-CTR is defined for fMP4 (cenc) segments only; this is \(container == .transportStream ? "MPEG-TS" : "neither")"
                )
            }
            return try fragmentDecryptor(initSection: initSection, key: key, iv: iv, scheme: "cenc", method: method, segment: segment)
        }
        return try transform(
            .decrypt,
            method: method,
            container: container,
            key: key,
            iv: iv,
            initSection: initSection,
            segment: segment,
            promptOutput: promptOutput,
            neighbours: neighbours
        )
    }

    /// An encryptor for one media segment (the inverse of ``decryptor(method:container:key:iv:initSection:segment:)``).
    public static func encryptor(
        method: SegmentEncryptionMethod,
        container: SegmentContainer,
        key: SecretBytes,
        iv: [UInt8],
        initSection: CBCSInitSection? = nil,
        segment: String
    ) throws(SegmentCryptoError) -> any SegmentTransform {
        try transform(.encrypt, method: method, container: container, key: key, iv: iv, initSection: initSection, segment: segment)
    }

    /// The fMP4 decryptor, checked to use a scheme of the cipher mode the playlist's METHOD names: SAMPLE-AES is
    /// `cbcs` (or its unpatterned form `cbc1`), SAMPLE-AES-CTR is `cenc` (or its patterned form `cens`).
    private static func fragmentDecryptor(
        initSection: CBCSInitSection,
        key: SecretBytes,
        iv: [UInt8],
        scheme: String,
        method: SegmentEncryptionMethod,
        segment: String
    ) throws(SegmentCryptoError) -> CBCSFragmentDecryptor {
        let decryptor = try CBCSFragmentDecryptor(initSection: initSection, key: key, iv: iv, segment: segment)
        let protected = initSection.tracks.contains { $0.scheme != nil }
        let sameMode = scheme == "cbcs" ? ["cbcs", "cbc1"] : ["cenc", "cens"]
        guard !protected || sameMode.contains(decryptor.scheme) else {
            throw .unsupportedStream(
                segment: segment,
                detail: "the playlist says METHOD=\(method.rawValue), which is '\(scheme)', but the init section's tracks use '\(decryptor.scheme)'"
            )
        }
        return decryptor
    }

    private static func transform(
        _ direction: AESCBCCipher.Direction,
        method: SegmentEncryptionMethod,
        container: SegmentContainer,
        key: SecretBytes,
        iv: [UInt8],
        initSection: CBCSInitSection?,
        segment: String,
        promptOutput: Bool = false,
        neighbours: TransportStreamNeighbours = .none
    ) throws(SegmentCryptoError) -> any SegmentTransform {
        switch method {
        case .aes128:
            return try WholeSegmentCipher(method: .aes128, key: key, iv: iv, direction: direction, segment: segment)
        case .aes256:
            return try WholeSegmentCipher(method: .aes256, key: key, iv: iv, direction: direction, segment: segment)
        case .aes256CTR:
            return try WholeSegmentCipher(method: .aes256CTR, key: key, iv: iv, direction: direction, segment: segment)
        case .sampleAES:
            switch container {
            case .transportStream:
                return direction == .decrypt
                    ? try SampleAESTransportStreamDecryptor(key: key, iv: iv, segment: segment, promptOutput: promptOutput, neighbours: neighbours)
                    : try SampleAESTransportStreamEncryptor(key: key, iv: iv, segment: segment)
            case .fragmentedMP4:
                guard let initSection else {
                    throw .unsupportedStream(segment: segment, detail: "SAMPLE-AES fMP4 needs the rendition's init section (--init)")
                }
                return direction == .decrypt
                    ? try fragmentDecryptor(initSection: initSection, key: key, iv: iv, scheme: "cbcs", method: method, segment: segment)
                    : try CBCSFragmentEncryptor(initSection: initSection, key: key, segment: segment)
            case .packedAudio:
                guard direction == .decrypt else {
                    throw .unsupportedStream(segment: segment, detail: "Stowage decrypts SAMPLE-AES packed audio but does not encrypt it")
                }
                return try PackedAudioDecryptor(key: key, iv: iv, segment: segment)
            case .other:
                throw .unsupportedStream(
                    segment: segment,
                    detail: "SAMPLE-AES is defined for MPEG-TS, fMP4 and packed audio (AAC, AC-3, E-AC-3) segments; this is none of them"
                )
            }
        case .sampleAESCTR:
            guard direction == .decrypt else {
                throw .unsupportedStream(segment: segment, detail: "Stowage decrypts SAMPLE-AES-CTR but does not encrypt with it; use SAMPLE-AES")
            }
            return try decryptor(method: method, container: container, key: key, iv: iv, initSection: initSection, segment: segment)
        }
    }
}
