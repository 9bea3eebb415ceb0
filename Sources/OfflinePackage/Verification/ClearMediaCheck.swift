import MediaCrypto

/// Validates decrypted segment data as it streams past, without keeping it: the container is detected from the first
/// bytes, then the MPEG-TS or fragmented MP4 validator checks the rest. Memory stays at the detection prefix plus
/// what the validators hold (a PES header, one `moof`).
///
/// The first failure is kept and later input is ignored, so the decryptor can keep running to check its padding.
final class ClearMediaCheck {
    private enum Stage {
        case detecting([UInt8])
        case transportStream(TransportStreamValidator)
        case fragmentedMP4(FragmentedMP4Validator.Stream)
        case other
    }

    /// What the decrypted data must be; nil accepts any container (packed audio, WebVTT) and validates TS or fMP4.
    private let expected: SegmentContainer?
    /// The rendition's init section made clear, for fragment validation.
    private let initSection: CBCSInitSection?
    private let segment: String
    private var stage: Stage = .detecting([])
    /// The first damage found.
    private(set) var failure: SegmentCryptoError?

    init(expected: SegmentContainer?, initSection: CBCSInitSection?, segment: String) {
        self.expected = expected
        self.initSection = initSection
        self.segment = segment
    }

    /// Checks the next chunk of clear data.
    func consume(_ chunk: UnsafeRawBufferPointer) {
        guard failure == nil, !chunk.isEmpty else { return }
        do throws(SegmentCryptoError) {
            switch stage {
            case .detecting(var prefix):
                let wanted = SegmentContainer.detectionLength - prefix.count
                prefix.append(contentsOf: chunk.prefix(wanted))
                guard prefix.count >= SegmentContainer.detectionLength else {
                    stage = .detecting(prefix)
                    return
                }
                try start(with: prefix)
                if chunk.count > wanted { try feed(UnsafeRawBufferPointer(rebasing: chunk[wanted...])) }
            default:
                try feed(chunk)
            }
        } catch {
            failure = error
        }
    }

    /// Ends the data.
    /// - Returns: the first damage found, nil when the data is valid.
    func finish() -> SegmentCryptoError? {
        guard failure == nil else { return failure }
        do throws(SegmentCryptoError) {
            if case .detecting(let prefix) = stage { try start(with: prefix) }
            switch stage {
            case .transportStream(let validator): _ = try validator.finish()
            case .fragmentedMP4(let validator): _ = try validator.finish()
            case .detecting, .other: break
            }
        } catch {
            failure = error
        }
        return failure
    }

    private func start(with prefix: [UInt8]) throws(SegmentCryptoError) {
        let detected = SegmentContainer.detect(prefix)
        if let expected, detected != expected {
            let name = expected == .transportStream ? "an MPEG-2 transport stream" : "a fragmented MP4 segment"
            throw .malformedContainer(segment: segment, detail: "the decrypted data is not \(name)")
        }
        switch detected {
        case .transportStream:
            // HLS segments of one rendition may split a PES packet between them (players concatenate segments).
            stage = .transportStream(TransportStreamValidator(segment: segment, boundaries: .open))
        case .fragmentedMP4: stage = .fragmentedMP4(FragmentedMP4Validator.Stream(initSection: initSection, segment: segment))
        case .packedAudio, .other: stage = .other
        }
        // Array.withUnsafeBytes rethrows untyped errors, so the typed one is carried out by hand.
        var failure: SegmentCryptoError?
        prefix.withUnsafeBytes { bytes in
            do throws(SegmentCryptoError) { try feed(bytes) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    private func feed(_ chunk: UnsafeRawBufferPointer) throws(SegmentCryptoError) {
        switch stage {
        case .transportStream(let validator): try validator.process(chunk)
        case .fragmentedMP4(let validator): try validator.process(chunk)
        case .detecting, .other: break
        }
    }
}
