import Foundation

/// What the command prints for a person: text from playlists, key servers and origins may carry control characters
/// (escape sequences that retitle the terminal, clear it, hide what follows or fake a message), so every control
/// character but the line feed and the tab is shown as a `\uXXXX` escape instead, which reads the same inside JSON.
enum Terminal {
    static func safe(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var shown = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if isControl(scalar) {
                let hex = String(scalar.value, radix: 16)
                shown.append(contentsOf: ("\\u" + String(repeating: "0", count: 4 - hex.count) + hex).unicodeScalars)
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

    /// `error: MESSAGE [CODE]` and a line feed, on one line whatever the message holds: a line feed or tab in it (from a
    /// value the user typed, or a server's words) is shown as `\u000a` or `\u0009`, so it cannot print a second line
    /// that reads as another error.
    static func errorLine(_ message: String, code: String) -> String {
        let oneLine = message.replacingOccurrences(of: "\n", with: "\\u000a").replacingOccurrences(of: "\t", with: "\\u0009")
        return "error: \(oneLine) [\(code)]\n"
    }

    /// Writes `text`, made safe, to standard error.
    static func standardError(_ text: String) {
        FileHandle.standardError.write(Data(safe(text).utf8))
    }

    /// Writes `text`, made safe, to standard output.
    static func standardOutput(_ text: String) {
        FileHandle.standardOutput.write(Data(safe(text).utf8))
    }
}

/// The command-line tool's `print`: every line goes through ``Terminal/safe(_:)``.
func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
    Swift.print(Terminal.safe(items.map { "\($0)" }.joined(separator: separator)), terminator: terminator)
}
