import Foundation
import Testing

@testable import StowageService

/// `--token-command`: its first line is the token; a command that hangs, or leaves something running that holds its
/// output open, never holds up lease upkeep.
struct TokenSourceTests {
    static let environment = ProcessInfo.processInfo.environment

    /// `firstLine`, recording an issue if it has not answered after 20 s (a hang: the timeouts under test are 1 s).
    static func firstLine(_ command: String, timeout: Duration = .seconds(1)) async -> String? {
        let watchdog = Task {
            try await Task.sleep(for: .seconds(20))
            Issue.record("the token command \(command) held up its caller")
        }
        defer { watchdog.cancel() }
        return await TokenSource.firstLine(of: command, environment: environment, timeout: timeout)
    }

    @Test("the first line is the token; a failing command, or one that prints nothing, gives none")
    func firstLineIsTheToken() async {
        #expect(await Self.firstLine("printf 'eyJ.token.sig\\nmore\\n'") == "eyJ.token.sig")
        #expect(await Self.firstLine("echo eyJ.token.sig; exit 3") == nil)
        #expect(await Self.firstLine("true") == nil)
    }

    @Test("a token printed by a line that leaves a process in the background holding the pipe comes back at once")
    func backgroundProcessDoesNotHoldTheToken() async {
        #expect(await Self.firstLine("echo eyJ.token.sig; sleep 300 &", timeout: .seconds(60)) == "eyJ.token.sig")
    }

    @Test("a command past its timeout is killed with everything it started, and gives no token")
    func hangingCommandIsKilledWithItsChildren() async throws {
        let marker = FileManager.default.temporaryDirectory.appendingPathComponent("token-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: marker) }
        #expect(await Self.firstLine("sleep 300 & echo $! > '\(marker.path)'; wait; echo late") == nil)
        let pid = try #require(Int32(try String(contentsOf: marker, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        var gone = false
        for _ in 0..<100 {
            let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
            if stat.isEmpty || stat.split(separator: ")").last?.trimmingCharacters(in: .whitespaces).hasPrefix("Z") == true {
                gone = true
                break
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(gone, "the command's child \(pid) outlived the timeout")
    }
}
