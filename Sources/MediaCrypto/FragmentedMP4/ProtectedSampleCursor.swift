/// Where a sample cipher stands in one movie fragment: the protected sample (in stream order), its subsample, the
/// progress inside that subsample's protected range, and whether the cipher's chain has been started from the IV.
/// ``CBCSSampleCipher`` and ``CENCSampleCipher`` share it; they differ only in what they do inside a range.
struct ProtectedSampleCursor {
    private(set) var fragment: MovieFragment?
    private var order: [Int] = []
    private var sampleIndex = 0
    private(set) var subsampleIndex = 0
    /// Progress inside the current subsample's protected range: blocks for the CBC-style ciphers, bytes for `cenc`.
    var progress = 0
    /// Position of the current subsample's first byte.
    private(set) var subsampleStart = 0
    /// Whether the cipher has been set to the current sample's (or subsample's) IV.
    var chainStarted = false

    /// Starts on a new fragment's protected samples.
    mutating func load(_ fragment: MovieFragment) {
        order = fragment.samplesInStreamOrder.filter { fragment.samples[$0].isProtected }
        self.fragment = fragment
        sampleIndex = 0
        subsampleIndex = 0
        progress = 0
        chainStarted = false
        subsampleStart = order.first.map { fragment.samples[$0].offset } ?? 0
    }

    /// Whether every protected sample of the fragment has been passed.
    var isComplete: Bool { sampleIndex >= order.count }

    /// The current protected sample; nil once complete (or before a fragment is loaded).
    var sample: FragmentSample? {
        guard let fragment, sampleIndex < order.count else { return nil }
        return fragment.samples[order[sampleIndex]]
    }

    /// How many ranges the current sample has: its subsamples, or 1 for whole-sample encryption.
    func rangeCount(of sample: FragmentSample) -> Int { max(fragment?.subsamples(of: sample).count ?? 0, 1) }

    /// The current subsample's clear and protected byte counts (the whole sample protected without subsamples).
    func range(of sample: FragmentSample) -> Subsample {
        guard let subsamples = fragment?.subsamples(of: sample), !subsamples.isEmpty else {
            return Subsample(clearBytes: 0, protectedBytes: sample.size)
        }
        return subsamples[subsamples.startIndex + subsampleIndex]
    }

    /// Moves to the next subsample of the sample, which starts at `position`.
    mutating func nextSubsample(at position: Int) {
        subsampleStart = position
        subsampleIndex += 1
        progress = 0
    }

    /// Moves to the next protected sample; its chain starts again from its IV.
    mutating func nextSample() {
        sampleIndex += 1
        subsampleIndex = 0
        progress = 0
        chainStarted = false
        if let fragment, sampleIndex < order.count { subsampleStart = fragment.samples[order[sampleIndex]].offset }
    }

    /// Re-arms a cipher with the 16-byte IV of `sample` from the fragment's IV table.
    func resetIV(of sample: FragmentSample, _ reset: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        guard let fragment else { return }
        let start = Int(sample.ivIndex) * 16
        try fragment.ivTable.withUnsafeBytes { try reset(UnsafeRawBufferPointer(rebasing: $0[start..<(start + 16)])) }
    }
}
