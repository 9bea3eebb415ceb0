import Foundation
import StowageTestSupport
import Testing

/// The manual pages and shell completions in the repository (written by scripts/man-pages.sh from the argument
/// parser's description of the commands) say what the commands take today: a page per command, every option of it
/// on its page, `man` finds and renders them, and the completion scripts are what `stowage` prints now.
@Suite("Manual pages and completions match the commands")
struct ManualPageTests {
    static let repository = TestSupport.repositoryRoot
    static let pages = repository.appendingPathComponent("docs/man/man1")

    /// Every command with its long options, from `stowage --experimental-dump-help`.
    static func commands(home: URL) async throws -> [(path: [String], options: [String])] {
        let dump = try await ServiceCommandTests.stowage(["--experimental-dump-help"], home: home)
        let tool = try #require(try JSONSerialization.jsonObject(with: dump.standardOutput) as? [String: Any])
        var found: [(path: [String], options: [String])] = []
        func walk(_ command: [String: Any], _ path: [String]) {
            let arguments = command["arguments"] as? [[String: Any]] ?? []
            let options = arguments.compactMap { argument -> String? in
                guard let names = argument["names"] as? [[String: Any]] else { return nil }
                return names.first { $0["kind"] as? String == "long" }?["name"] as? String
            }
            found.append((path, options.filter { $0 != "help" && $0 != "version" }))
            for subcommand in command["subcommands"] as? [[String: Any]] ?? [] where subcommand["commandName"] as? String != "help" {
                walk(subcommand, path + [subcommand["commandName"] as? String ?? "?"])
            }
        }
        walk(try #require(tool["command"] as? [String: Any]), [])
        return found
    }

    @Test("a page per command, naming each of its options; man finds stowage-download by name")
    func pages() async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("manual-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let commands = try await Self.commands(home: home)
        #expect(commands.count >= 40, "\(commands.map(\.path))")
        for command in commands {
            let name = (["stowage"] + command.path).joined(separator: "-")
            let page = Self.pages.appendingPathComponent("\(name).1")
            guard let text = try? String(contentsOf: page, encoding: .utf8) else {
                Issue.record("no manual page \(page.lastPathComponent) for stowage \(command.path.joined(separator: " ")); run scripts/man-pages.sh")
                continue
            }
            for option in command.options {
                // The whole name (mdoc's `Fl -name`), not a longer option that begins with it.
                let named = try Regex("Fl -\(option)(?![A-Za-z0-9_-])")
                if !text.contains(named) { Issue.record("\(page.lastPathComponent) does not name --\(option); run scripts/man-pages.sh") }
            }
        }
        let man = try await ProcessRunner.run(
            program: "man",
            ["-P", "cat", "stowage-download"],
            environment: ["MANPATH": Self.repository.appendingPathComponent("docs/man").path, "MANWIDTH": "100", "PATH": "/usr/bin:/bin"],
            timeout: .seconds(60)
        )
        let shown = String(decoding: man.standardOutput, as: UTF8.self)
        #expect(man.status == 0, "\(String(decoding: man.standardError, as: UTF8.self))")
        #expect(shown.contains("--background") && shown.contains("stowage download"), "\(shown.prefix(400))")
    }

    @Test(
        "the completion scripts are what stowage prints for bash, zsh and fish",
        arguments: [("bash", "stowage.bash"), ("zsh", "_stowage"), ("fish", "stowage.fish")]
    )
    func completions(shell: String, file: String) async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("completions-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let printed = try await ServiceCommandTests.stowage(["--generate-completion-script", shell], home: home)
        #expect(printed.status == 0)
        let committed = try Data(contentsOf: Self.repository.appendingPathComponent("completions/\(file)"))
        #expect(printed.standardOutput == committed, "completions/\(file) is not what stowage prints; run scripts/man-pages.sh")
    }
}
