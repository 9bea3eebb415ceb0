import Foundation
import Testing

@testable import HLS

/// The parser's own trimming and byte search, which replaced Foundation's: they must agree with
/// `trimmingCharacters(in: .whitespacesAndNewlines)` and `contains(_:)` on what a playlist line can hold.
struct TextScanningTests {
    @Test(arguments: [
        "", "   ", "\t\r\n", "#EXTINF:4,", "  #EXTINF:4,\t", "\u{00A0}seg.ts\u{3000}", "seg\u{0301}.ts ", " e\u{0301}",
        "\u{2028}line\u{2029}", "a b", "\u{FEFF}x", "\u{200B}x\u{200B}",
    ])
    func trimmingAgreesWithFoundation(text: String) {
        #expect(text.trimmedOfWhitespace == text.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(Substring(text).trimmedOfWhitespace == text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Every scalar Foundation trims, and no other: compared over the whole Unicode range.
    @Test func theTrimmedSetIsFoundations() {
        var differences: [String] = []
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let text = "x\(Character(scalar))"
            if (text.trimmedOfWhitespace == "x") != CharacterSet.whitespacesAndNewlines.contains(scalar) {
                differences.append(String(value, radix: 16))
            }
        }
        #expect(differences.isEmpty)
    }

    @Test func findsByteAndPairs() {
        let dollarBrace = (UInt8(ascii: "{"), UInt8(ascii: "$"))
        #expect("a{$name}".containsASCII(dollarBrace))
        #expect(!"a{ $name}".containsASCII(dollarBrace))
        #expect(!"$a{".containsASCII(dollarBrace))
        #expect("é{$x}".containsASCII(dollarBrace))
        #expect("media\\seg.ts".containsASCII(UInt8(ascii: "\\")))
        #expect(!"media/seg.ts".containsASCII(UInt8(ascii: "\\")))
    }
}
