import Foundation
import Testing

/// Error codes are stable snake_case strings (brief: "one shape"): programs and scripts switch on them. This reads the
/// `code` properties of every module's errors from source, so a new case cannot slip in as camelCase or prose.
struct ErrorCodeTests {
    static func isSnakeCase(_ code: String) -> Bool {
        code.wholeMatch(of: #/[a-z][a-z0-9]*(_[a-z0-9]+)*/#) != nil
    }

    /// The plain string literals (no interpolation) of each `var code: String { ... }` body in `text`.
    static func codeLiterals(in text: String) -> [String] {
        var literals: [String] = []
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        var index = 0
        while index < lines.count {
            let line = lines[index]
            guard line.contains("var code: String {"), let indent = line.firstIndex(where: { $0 != " " }) else {
                index += 1
                continue
            }
            index += 1
            let body = line[line.range(of: "var code: String {")!.upperBound...]
            if body.contains("}") {  // one line: `var code: String { "x" }` or `{ reason.rawValue }`
                for match in body.matches(of: #/"([^"\\]*)"/#) { literals.append(String(match.1)) }
                continue
            }
            let closing = String(repeating: " ", count: line.distance(from: line.startIndex, to: indent)) + "}"
            while index < lines.count, lines[index] != closing {
                for match in lines[index].matches(of: #/"([^"\\]*)"/#) { literals.append(String(match.1)) }
                index += 1
            }
        }
        return literals + rawValueCodes(in: text)
    }

    /// The raw values of the `enum Code: String`, `enum Reason: String` and `enum ...ErrorCode: String` types in `text`,
    /// explicit (`case a = "a_b"`) or implicit (`case aB` has the raw value "aB").
    static func rawValueCodes(in text: String) -> [String] {
        var codes: [String] = []
        var closing: Substring?  // the line that ends the enum being read: its indentation and "}"
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.contains("enum "), line.contains(#/enum (Code|Reason|\w*ErrorCode): String\b/#) {
                closing = line.prefix { $0 == " " } + "}"
                continue
            }
            guard let end = closing else { continue }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if line == end {
                closing = nil
                continue
            }
            guard trimmed.hasPrefix("case "), !trimmed.hasPrefix("case .") else { continue }  // not a switch's cases
            if let explicit = trimmed.firstMatch(of: #/= "([^"\\]*)"/#) {
                codes.append(String(explicit.1))
            } else {
                let names = trimmed.dropFirst(5).split(separator: "//").first ?? ""
                codes += names.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            }
        }
        return codes
    }

    @Test func theReaderFindsTheLiteralsOfACodeProperty() {
        let sample = """
                public var code: String {
                    switch self {
                    case .a: "first_code"
                    case .b: "secondCode"
                    }
                }
                var other: String { "not a code" }
                var code: String { "one_line" }
                var message: String { "not a code either" }
                enum Reason: String {
                    case leaseExpired = "lease_expired"
                    case released, notYet
                }
            """
        #expect(Self.codeLiterals(in: sample) == ["first_code", "secondCode", "one_line", "lease_expired", "released", "notYet"])
        #expect(Self.codeLiterals(in: sample).filter { !Self.isSnakeCase($0) } == ["secondCode", "notYet"])
    }

    @Test func everyErrorCodeInTheSourcesIsSnakeCase() throws {
        let sources = TestSupport.repositoryRoot.appendingPathComponent("Sources")
        let files =
            FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" } ?? []
        var checked = 0
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            for literal in Self.codeLiterals(in: text) {
                checked += 1
                if !Self.isSnakeCase(literal) {
                    Issue.record(
                        "\(file.path.replacingOccurrences(of: TestSupport.repositoryRoot.path + "/", with: "")): code \"\(literal)\" is not snake_case"
                    )
                }
            }
        }
        #expect(checked > 80, "only \(checked) codes found: has the `var code: String` convention changed?")
    }
}
