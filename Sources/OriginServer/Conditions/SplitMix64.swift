/// SplitMix64 (Steele, Lea and Flood, 2014): a tiny, fast generator whose stream is fixed by its seed.
struct SplitMix64: Sendable {
    private(set) var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform value in [0, 1) from the top 53 bits.
    mutating func nextUnit() -> Double {
        Double(next() >> 11) * 0x1p-53
    }

    /// A uniform value in `0..<bound`; `bound` must be positive.
    mutating func next(below bound: Int) -> Int {
        Int(nextUnit() * Double(bound)) % bound
    }
}

/// FNV-1a, 64-bit: folds the parts of a request's identity into one seed for ``SplitMix64``.
struct FNV1a64 {
    private(set) var value: UInt64 = 0xCBF2_9CE4_8422_2325

    mutating func combine(_ bytes: some Sequence<UInt8>) {
        for byte in bytes {
            value = (value ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
    }

    mutating func combine(_ number: UInt64) {
        combine((0..<8).map { UInt8(truncatingIfNeeded: number >> ($0 * 8)) })
    }
}
