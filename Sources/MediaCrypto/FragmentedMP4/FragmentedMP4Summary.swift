/// What ``FragmentedMP4Validator`` found in a well-formed media segment.
public struct FragmentedMP4Summary: Sendable, Hashable {
    /// How many times each top-level box type occurs (`styp`, `sidx`, `moof`, `mdat`...).
    public internal(set) var topLevelBoxes: [String: Int] = [:]
    /// `moof` + `mdat` pairs.
    public internal(set) var fragmentCount = 0
    /// Samples over all `trun` boxes.
    public internal(set) var sampleCount = 0
    /// Bytes of those samples; equal to ``mediaDataBytes`` in a valid segment.
    public internal(set) var sampleBytes = 0
    /// Bytes of `mdat` payload.
    public internal(set) var mediaDataBytes = 0
    /// The track IDs of the `traf` boxes, ascending.
    public internal(set) var trackIDs: [UInt32] = []
    /// The `mfhd` sequence numbers, in order.
    public internal(set) var sequenceNumbers: [UInt32] = []
    /// Whether a `moof` carries `senc`, `saiz`, `saio`, `seig` sample groups or `pssh`: the fragments are encrypted
    /// (a decrypted segment has them renamed to `free`).
    public internal(set) var isEncrypted = false

    init() {}
}
