import Foundation
import Testing

/// No function in Sources runs over ``limit`` lines, from its `func` or `init` line to its closing brace: a body that
/// long does several jobs, and each job wants a name (a phase, a tag family, a route).
struct FunctionLengthTests {
    static let limit = 120

    /// A function's first line (1-based) and how many lines it spans.
    struct Span: Equatable {
        var name: String
        var line: Int
        var lines: Int
    }

    /// `source` with every comment and string literal blanked (newlines kept), so braces and keywords in them count
    /// for nothing. Knows line and nested block comments, `"..."` with escapes and interpolations, `"""` blocks, and
    /// raw strings (`#"..."#`).
    static func code(of source: String) -> [UInt8] {
        let bytes = Array(source.utf8)
        var out = bytes
        var index = 0
        func blank(_ range: Range<Int>) {
            for i in range where bytes[i] != UInt8(ascii: "\n") { out[i] = UInt8(ascii: " ") }
        }
        func starts(_ text: String, at i: Int) -> Bool {
            let t = Array(text.utf8)
            return i + t.count <= bytes.count && Array(bytes[i..<(i + t.count)]) == t
        }
        while index < bytes.count {
            if starts("//", at: index) {
                let end = bytes[index...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
                blank(index..<end)
                index = end
            } else if starts("/*", at: index) {
                var depth = 0
                var i = index
                repeat {
                    if starts("/*", at: i) {
                        depth += 1
                        i += 2
                    } else if starts("*/", at: i) {
                        depth -= 1
                        i += 2
                    } else {
                        i += 1
                    }
                } while depth > 0 && i < bytes.count
                blank(index..<i)
                index = i
            } else if bytes[index] == UInt8(ascii: "#") || bytes[index] == UInt8(ascii: "\"") {
                var hashes = 0
                while index + hashes < bytes.count, bytes[index + hashes] == UInt8(ascii: "#") { hashes += 1 }
                guard index + hashes < bytes.count, bytes[index + hashes] == UInt8(ascii: "\"") else {
                    index += max(hashes, 1)
                    continue
                }
                let quotes = starts("\"\"\"", at: index + hashes) ? 3 : 1
                let close = Array(String(repeating: "\"", count: quotes).utf8) + [UInt8](repeating: UInt8(ascii: "#"), count: hashes)
                var i = index + hashes + quotes
                while i < bytes.count {
                    if hashes == 0, bytes[i] == UInt8(ascii: "\\") {
                        i += 2
                        continue
                    }
                    if i + close.count <= bytes.count, Array(bytes[i..<(i + close.count)]) == close { break }
                    if quotes == 1, bytes[i] == UInt8(ascii: "\n") { break }
                    i += 1
                }
                let end = min(bytes.count, i + close.count)
                blank(index..<end)
                index = end
            } else {
                index += 1
            }
        }
        return out
    }

    /// Every function and initializer with a body in `source`.
    static func functions(in source: String) -> [Span] {
        let code = code(of: source)
        let text = String(decoding: code, as: UTF8.self)
        let lineStarts = [0] + code.indices.filter { code[$0] == UInt8(ascii: "\n") }.map { $0 + 1 }
        func line(of offset: Int) -> Int { (lineStarts.lastIndex { $0 <= offset } ?? 0) + 1 }
        let declaration = /(?:^|[^A-Za-z0-9_.])(func\s+[^\s(<]+|init[?!]?\s*[(<])/
        var spans: [Span] = []
        for match in text.matches(of: declaration) {
            let start = code.index(code.startIndex, offsetBy: text.utf8.distance(from: text.utf8.startIndex, to: match.output.1.startIndex))
            // The body's brace is the first `{` outside parentheses and brackets; a declaration without one (in a
            // protocol) ends at the next line that starts another declaration or a closing brace.
            var depth = 0
            var body: Int?
            var i = start
            scan: while i < code.count {
                switch code[i] {
                case UInt8(ascii: "("), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: ")"), UInt8(ascii: "]"): depth -= 1
                case UInt8(ascii: "{") where depth == 0:
                    body = i
                    break scan
                case UInt8(ascii: "}") where depth == 0: break scan
                case UInt8(ascii: "\n") where depth == 0:
                    let rest = String(decoding: code[(i + 1)...].prefix(40), as: UTF8.self).drop { $0 == " " }
                    if ["func ", "var ", "let ", "init", "case ", "static ", "public ", "private ", "}", "@", "subscript"]
                        .contains(where: rest.hasPrefix)
                    {
                        break scan
                    }
                default: break
                }
                i += 1
            }
            guard let body else { continue }
            var braces = 0
            var end = body
            while end < code.count {
                if code[end] == UInt8(ascii: "{") { braces += 1 }
                if code[end] == UInt8(ascii: "}") {
                    braces -= 1
                    if braces == 0 { break }
                }
                end += 1
            }
            let name = String(match.output.1).replacingOccurrences(of: "func ", with: "")
            spans.append(Span(name: name, line: line(of: start), lines: line(of: end) - line(of: start) + 1))
        }
        return spans
    }

    @Test func theScannerMeasuresBodiesAndSkipsStringsCommentsAndRequirements() {
        let source = #"""
            protocol P {
                func required() -> Int
                init(x: Int)
            }
            struct S {
                /// func documented() {
                func one(_ a: [Int] = [], b: () -> Void = {}) -> String {
                    let s = "}}} { func fake() {"
                    let r = #"\"}"#
                    let m = """
                        }
                        """
                    /* } /* { */ } */
                    return s + r + m
                }
                init?<T>(t: T) where T: Equatable {
                    if true { print(Self.init(t: 1), S.init(t: 2)) }
                }
            }
            """#
        let spans = Self.functions(in: source)
        #expect(spans == [Span(name: "one", line: 7, lines: 9), Span(name: "init?<", line: 16, lines: 3)])
    }

    @Test func noFunctionInSourcesIsLongerThanTheLimit() throws {
        let sources = TestSupport.repositoryRoot.appendingPathComponent("Sources")
        let walk = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        var measured = 0
        for case let url as URL in walk where url.pathExtension == "swift" {
            let source = try String(contentsOf: url, encoding: .utf8)
            for span in Self.functions(in: source) {
                measured += 1
                let path = url.path.replacingOccurrences(of: TestSupport.repositoryRoot.path + "/", with: "")
                #expect(
                    span.lines <= Self.limit,
                    "\(path):\(span.line): \(span.name) is \(span.lines) lines long; split it into named steps under \(Self.limit) lines"
                )
            }
        }
        #expect(measured > 2_000, "the scanner found only \(measured) functions in Sources")
    }
}
