/// Text from playlists, key servers and origins may carry control characters (escape sequences that retitle a
/// terminal, clear it, hide what follows or fake a message; line feeds that forge another line of a log). Before such
/// text is printed or logged, each control character is shown as a `\uXXXX` escape instead, which reads the same
/// inside JSON.
public enum ControlCharacters {
    /// `text` with every control character but the line feed and the tab shown as an escape (`keepingLineBreaks`), or
    /// with those two escaped as well: one line whatever `text` holds.
    public static func shown(_ text: String, keepingLineBreaks: Bool = true) -> String {
        let isShown = { (scalar: Unicode.Scalar) in isControl(scalar) || (!keepingLineBreaks && (scalar == "\n" || scalar == "\t")) }
        guard text.unicodeScalars.contains(where: isShown) else { return text }
        var shown = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if isShown(scalar) {
                let hex = String(scalar.value, radix: 16)
                shown.append(contentsOf: ("\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex).unicodeScalars)
            } else {
                shown.append(scalar)
            }
        }
        return String(shown)
    }

    /// C0 controls but line feed and tab, DEL, C1 controls, and the bidirectional overrides that reorder what follows.
    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: false
        case 0x00...0x1F, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}
