/// Text helpers for the parser's per-line work, on Unicode scalars and UTF-8 rather than Foundation's `NSString`
/// bridge: `trimmingCharacters(in:)` and `contains(_:)` of a string went through CFString and took most of the time of
/// parsing a playlist (the play server parses each playlist it serves).
extension StringProtocol {
    /// The text without leading and trailing whitespace and line ends, as `trimmingCharacters(in:
    /// .whitespacesAndNewlines)` gives it.
    var trimmedOfWhitespace: String {
        let scalars = unicodeScalars
        // The common case, nothing to trim, is one check at each end.
        guard let head = scalars.first, let tail = scalars.last else { return "" }
        if !Self.isTrimmed(head) && !Self.isTrimmed(tail) { return String(self) }
        guard let first = scalars.firstIndex(where: { !Self.isTrimmed($0) }),
            let last = scalars.lastIndex(where: { !Self.isTrimmed($0) })
        else { return "" }
        return String(self[first..<scalars.index(after: last)])
    }

    /// Unicode White_Space, and U+200B ZERO WIDTH SPACE, which Foundation's set still holds (it was a space separator
    /// before Unicode 4.0.1): exactly `CharacterSet.whitespacesAndNewlines`, checked over every scalar.
    private static func isTrimmed(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isWhitespace || scalar == "\u{200B}"
    }

    /// Whether the text holds the two bytes of `pair` in a row (ASCII only): `{$` starts a variable reference.
    func containsASCII(_ pair: (UInt8, UInt8)) -> Bool {
        var previous: UInt8 = 0
        for byte in utf8 {
            if previous == pair.0 && byte == pair.1 { return true }
            previous = byte
        }
        return false
    }

    /// Whether the text holds the ASCII byte `byte`.
    func containsASCII(_ byte: UInt8) -> Bool {
        utf8.contains(byte)
    }
}
