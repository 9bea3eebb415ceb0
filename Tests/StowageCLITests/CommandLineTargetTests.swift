import Foundation
import Testing

/// The command-line target is a face of the library (docs/design.md; issue 12): it parses arguments, calls
/// `StowageLibrary` (and the servers), and renders. Storage, file loops and networking live in the modules, where a
/// Swift program reaches them too.
struct CommandLineTargetTests {
    /// What may not appear in `Sources/stowage`, with why.
    static let forbidden: [(pattern: String, why: String)] = [
        (#"import GRDB"#, "SQL belongs to the module that owns the tables"),
        (#"import NIO"#, "networking belongs to the library"),
        (#"import AsyncHTTPClient"#, "HTTP clients belong to the library"),
        (#"(?<![\w.])(read|write|pread|pwrite|open|unlink|fsync|ftruncate)\("#, "POSIX file I/O belongs to the modules"),
        (#"Glibc\.open"#, "POSIX file I/O belongs to the modules"),
        (#"\b(SELECT|INSERT INTO|UPDATE \w+ SET|DELETE FROM)\b"#, "SQL belongs to the module that owns the tables"),
        (#"contentsOfDirectory|enumerator\(at"#, "walking the data directory belongs to the library"),
    ]

    static func violations(in text: String) -> [String] {
        forbidden.compactMap { rule in
            text.range(of: rule.pattern, options: .regularExpression).map { "\(text[$0]) (\(rule.why))" }
        }
    }

    @Test func theMatcherFindsWhatItLooksFor() {
        #expect(Self.violations(in: "let n = read(fd, buffer, 4)").count == 1)
        #expect(Self.violations(in: "import GRDB").count == 1)
        #expect(Self.violations(in: #"db.execute(sql: "SELECT * FROM key_leases")"#).count == 1)
        #expect(Self.violations(in: "handle.write(data); await library.close()").isEmpty)
    }

    @Test func theCommandLineOnlyParsesCallsAndRenders() throws {
        let folder = TestSupport.repositoryRoot.appendingPathComponent("Sources/stowage")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".swift") }
        #expect(files.count > 5)
        for file in files {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
                for violation in Self.violations(in: code) {
                    Issue.record("Sources/stowage/\(file):\(number + 1): \(violation)")
                }
            }
        }
    }
}
