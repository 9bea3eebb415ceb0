import Foundation
import StowageCore
import Testing

/// The catalogue of error codes (`ErrorCode`) is the one place a code exists: every error's `code` is one of its cases,
/// so the compiler keeps codes out of everywhere else. These tests keep the catalogue honest: snake_case, each case
/// documented, each raised somewhere in Sources, each met by a test, and docs/errors.md written from it.
struct ErrorCatalogueTests {
    /// Codes no test meets without a seam in production code, each with why. One that leaves the catalogue must leave
    /// this list too (checked), so the list cannot rot.
    static let unreachable: [ErrorCode: String] = [
        .cryptoFailure: "OpenSSL refusing a key or IV of a length already checked, or an update of whole blocks",
        .randomFailed: "RAND_bytes failing (SecureRandom)",
        .keysUnavailable: "a recording joining eight in-flight key acquisitions in a row (a loop bound)",
        .renewalFailed: "KeySession.renew throwing something that is not a StowageError (it throws only those)",
        .demoVerificationFailed: "the demo's fresh package failing verify --deep: only a broken build",
        .demoNoLease: "the demo's self-check after play: no lease stored although play succeeded",
        .demoGateOpen: "the demo's self-check: the gate still open past the playback window",
        .keyServerNotStarted: "the embedded key server's run() returning without an error before it listened",
        .originNotStarted: "the embedded origin's run() returning without an error before it listened",
        .rotationIncomplete: "five re-seal passes each losing a row to a concurrent writer",
        .recordingKeyLimit: "a key server that takes fewer than 32 keys in one request (Stowage's takes 64)",
        .cancelled: "a CancellationError reaching the command line: commands with signal handling end gracefully instead",
        .internalError: "an error that is not a StowageError reaching the command line: a bug by definition",
        .serviceError: "the same catch-all in the service's HTTP answers",
        .failed: "a failed download record with no failure code: every path that fails a task stores one",
        .demoPlayerFailed: "ffmpeg failing on the demo's own package after verify --deep passed it",
        .tokenUnavailable: "lease upkeep's code for a token source throwing something that is not a StowageError",
        .leasesChanged: "another process changing an asset's leases between the two reads of one play authorization",
    ]

    /// The Swift spelling of each case by its code, as ErrorCode.swift declares it (`invalidIV`, `internal`).
    static let caseNames: [String: String] = {
        var names: [String: String] = [:]
        for match in catalogueSource.matches(of: #/case `?(\w+)`? = "([a-z0-9_]+)"/#) { names[String(match.2)] = String(match.1) }
        return names
    }()

    static func caseName(_ code: ErrorCode) -> String { caseNames[code.rawValue] ?? code.rawValue }

    static let catalogueSource: String = {
        let url = TestSupport.repositoryRoot.appendingPathComponent("Sources/StowageCore/ErrorCode.swift")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }()

    /// The Swift files under `folder`, comments and string literals blanked when `codeOnly`.
    static func swiftFiles(_ folder: String, codeOnly: Bool) throws -> [(path: String, text: String)] {
        let root = TestSupport.repositoryRoot.appendingPathComponent(folder)
        let walk = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil))
        var files: [(path: String, text: String)] = []
        for case let url as URL in walk where url.pathExtension == "swift" {
            let text = try String(contentsOf: url, encoding: .utf8)
            files.append((url.path, codeOnly ? String(decoding: FunctionLengthTests.code(of: text), as: UTF8.self) : text))
        }
        return files
    }

    @Test func everyCodeIsSnakeCaseAndDocumented() {
        #expect(ErrorCode.allCases.count > 200)
        #expect(Self.caseNames.count == ErrorCode.allCases.count, "the catalogue's declarations were not all read")
        let lines = Self.catalogueSource.split(separator: "\n", omittingEmptySubsequences: false)
        for code in ErrorCode.allCases {
            #expect(code.rawValue.wholeMatch(of: #/[a-z][a-z0-9]*(_[a-z0-9]+)*/#) != nil, "\(code.rawValue) is not snake_case")
            let declaration = lines.firstIndex { $0.hasSuffix("= \"\(code.rawValue)\"") }
            let doc = declaration.flatMap { $0 > 0 ? lines[$0 - 1] : nil } ?? ""
            #expect(doc.trimmingCharacters(in: .whitespaces).hasPrefix("/// "), "\(code.rawValue) has no doc comment in ErrorCode.swift")
        }
    }

    /// A code no source raises is a code no user can meet: it goes, or the source that should raise it is missing.
    @Test func everyCodeIsRaisedBySomeSource() throws {
        let sources = try Self.swiftFiles("Sources", codeOnly: false).filter { !$0.path.hasSuffix("/ErrorCode.swift") }
        let text = sources.map(\.text).joined(separator: "\n")
        for code in ErrorCode.allCases {
            let name = Self.caseName(code)
            // Not `\b`: Unicode word boundaries run on across a dot (`.manifestMissing.rawValue`).
            let raised = text.contains(try Regex(#"\.`?\#(name)`?(?![A-Za-z0-9_])"#))
            #expect(raised, "no source raises \(code.rawValue) (.\(name)); remove it from ErrorCode or raise it")
        }
    }

    /// Every code is met by a test: its snake_case text in a test's string (an expected `[code]` line, JSON, a
    /// comparison), or its case named in a test (`.leaseExpired`); single-word codes (`released`, `failed`...), which are
    /// also ordinary words and states, count only as `[word]`, as JSON `"code":"word"`, as the whole literal on a line
    /// that says `code`, or compared as a code or reason (`code == .word`, `reason == .word`).
    @Test func everyCodeIsMetByATest() throws {
        let tests = try Self.swiftFiles("Tests", codeOnly: false).filter { !$0.path.hasSuffix("/ErrorCatalogueTests.swift") }
        let code = try Self.swiftFiles("Tests", codeOnly: true).filter { !$0.path.hasSuffix("/ErrorCatalogueTests.swift") }
        let text = tests.map(\.text).joined(separator: "\n")
        let codeText = code.map(\.text).joined(separator: "\n")
        let codeLines = text.split(separator: "\n").filter { $0.contains("code") }.joined(separator: "\n")
        var unmet: [String] = []
        for entry in ErrorCode.allCases where Self.unreachable[entry] == nil {
            let raw = entry.rawValue
            let met: Bool
            if raw.contains("_") {
                let literal = try Regex(#"(^|[^A-Za-z0-9_])\#(raw)($|[^A-Za-z0-9_])"#)
                let member = try Regex(#"\.\#(Self.caseName(entry))(?![A-Za-z0-9_])"#)
                met = text.contains(literal) || codeText.contains(member)
            } else {
                met =
                    text.contains("[\(raw)]") || text.contains(#""code":"\#(raw)""#) || text.contains(#"\"code\":\"\#(raw)\""#)
                    || codeLines.contains("\"\(raw)\"") || codeLines.contains("code == .\(raw)") || text.contains("reason == .\(raw)")
            }
            if !met { unmet.append(raw) }
        }
        #expect(
            unmet.isEmpty,
            "no test meets \(unmet.joined(separator: ", ")); add a test that triggers it (or, if only a seam could, list it in `unreachable` with why)"
        )
        for (entry, why) in Self.unreachable {
            #expect(!why.isEmpty, "\(entry.rawValue) is listed as unreachable without a reason")
        }
    }

    /// docs/errors.md is the catalogue as a page: regenerated, not edited (`STOWAGE_WRITE_ERRORS_PAGE=1 swift test
    /// --filter ErrorCatalogueTests` writes it).
    @Test func theErrorPageIsTheCatalogue() throws {
        var page = [
            "# Error codes",
            "",
            "Every failure Stowage reports has one of these codes, in `error: MESSAGE [CODE]` on standard error, in `--json` as",
            "`{\"error\": {\"code\": ..., \"message\": ...}}`, and in the download service's answers. The codes are stable; the",
            "message says what happened, to what, and what to do. This page is written from the catalogue in",
            "[Sources/StowageCore/ErrorCode.swift](../Sources/StowageCore/ErrorCode.swift) by `ErrorCatalogueTests`.",
        ]
        var pendingDoc: [String] = []
        for line in Self.catalogueSource.split(separator: "\n", omittingEmptySubsequences: false).map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line.hasPrefix("// MARK: ") {
                page += ["", "## " + line.dropFirst("// MARK: ".count), "", "| code | meaning |", "|---|---|"]
            } else if line.hasPrefix("/// "), !page.isEmpty, page.last?.hasPrefix("|") == true || page.last == "|---|---|" {
                pendingDoc.append(String(line.dropFirst(4)))
            } else if let match = line.firstMatch(of: #/^case `?\w+`? = "([a-z0-9_]+)"$/#) {
                page.append("| `\(match.1)` | \(pendingDoc.joined(separator: " ").replacingOccurrences(of: "|", with: "\\|")) |")
                pendingDoc = []
            } else {
                pendingDoc = []
            }
        }
        let expected = page.joined(separator: "\n") + "\n"
        let url = TestSupport.repositoryRoot.appendingPathComponent("docs/errors.md")
        if ProcessInfo.processInfo.environment["STOWAGE_WRITE_ERRORS_PAGE"] == "1" { try Data(expected.utf8).write(to: url) }
        let actual = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
        let isCatalogue = actual == expected
        #expect(
            isCatalogue,
            "docs/errors.md is not the catalogue; rewrite it with STOWAGE_WRITE_ERRORS_PAGE=1 swift test --filter ErrorCatalogueTests"
        )
        #expect(ErrorCode.allCases.allSatisfy { actual.contains("| `\($0.rawValue)` |") })
    }
}
