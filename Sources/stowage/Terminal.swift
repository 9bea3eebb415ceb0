import Foundation
import StowageCore

/// What the command prints for a person: text from playlists, key servers and origins may carry control characters
/// (escape sequences that retitle the terminal, clear it, hide what follows or fake a message), so every control
/// character but the line feed and the tab is shown as a `\uXXXX` escape instead (``StowageCore/ControlCharacters``).
enum Terminal {
    static func safe(_ text: String) -> String { ControlCharacters.shown(text) }

    /// `error: MESSAGE [CODE]` and a line feed, on one line whatever the message holds: a line feed or tab in it (from a
    /// value the user typed, or a server's words) is shown as `\u000a` or `\u0009`, so it cannot print a second line
    /// that reads as another error.
    static func errorLine(_ message: String, code: String) -> String {
        "error: \(ControlCharacters.shown(message, keepingLineBreaks: false)) [\(code)]\n"
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
