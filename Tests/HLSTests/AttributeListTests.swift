import Foundation
import StowageCore
import Testing

@testable import HLS

/// The attribute-list reader (RFC 8216bis 4.2) and its typed accessors.
@Suite("Attribute lists")
struct AttributeListTests {
    func list(_ text: String) throws(PlaylistError) -> AttributeList {
        try AttributeList(parsing: Substring(text), line: 7, text: "#EXT-X-TEST:" + text)
    }

    func expectError(
        _ code: String,
        _ comment: Comment? = nil,
        sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () throws -> Void
    ) {
        let error = #expect(throws: PlaylistError.self, comment, sourceLocation: sourceLocation) { try body() }
        #expect(error?.code == code, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(error?.line == 7, sourceLocation: sourceLocation)
    }

    @Test("pairs in order, quoted or not")
    func pairs() throws {
        let attributes = try list(#"A=1,B-2="x,y=z",C_3=0x1F,lower=ok,EMPTY="""#).attributes
        #expect(
            attributes == [
                Attribute(name: "A", value: "1", isQuoted: false), Attribute(name: "B-2", value: "x,y=z", isQuoted: true),
                Attribute(name: "C_3", value: "0x1F", isQuoted: false), Attribute(name: "lower", value: "ok", isQuoted: false),
                Attribute(name: "EMPTY", value: "", isQuoted: true),
            ]
        )
        #expect(try list("").attributes == [])
        #expect(try list("  ").attributes == [])
        #expect(try list("A=1,").attributes.count == 1)
    }

    @Test("unquoted values lose surrounding blanks, and trailing Unicode whitespace, which line ends would lose")
    func unquotedWhitespace() throws {
        #expect(try list("A= 1 \t,B=x\u{A0},C=\u{A0}y").attributes.map(\.value) == ["1", "x", "\u{A0}y"])
        #expect(try list(#"A=" 1 ""#).attributes.map(\.value) == [" 1 "])
    }

    @Test("rendered attributes read back the same")
    func rendered() throws {
        let attributes = [
            Attribute(name: "A", value: "x,y", isQuoted: true), Attribute(name: "B", value: "2", isQuoted: false),
            Attribute(name: "C", value: "", isQuoted: true),
        ]
        #expect(attributes.map(\.rendered) == [#"A="x,y""#, "B=2", #"C="""#])
        #expect(try list(attributes.map(\.rendered).joined(separator: ",")).attributes == attributes)
    }

    @Test("malformed lists", arguments: ["A", "=1", "A=1,B", #"A="x"#, #"A="x"B=1"#, "A B=1", "A=1,,B=2", "É=1", "A.B=1"])
    func malformed(text: String) {
        expectError("malformed_tag") { _ = try list(text) }
    }

    @Test("typed accessors")
    func typed() throws {
        var attributes = try list(
            #"I=42,D=2.5,N=-1.5,E=1e3,B=YES,F=NO,R=1280x720,H=0xA0b1,Q="quoted",U=PQ,UQ="PQ",X-KEEP=1,X-KEEP2="2""#
        )
        #expect(try attributes.integer("I") == 42)
        #expect(try attributes.decimal("D") == 2.5)
        #expect(try attributes.decimal("N", allowNegative: true) == -1.5)
        #expect(try attributes.decimal("E") == 1000)
        #expect(try attributes.boolean("B") == true)
        #expect(try attributes.boolean("F") == false)
        #expect(try attributes.resolution("R") == Resolution(width: 1280, height: 720))
        #expect(try attributes.hexadecimal("H") == "A0b1")
        #expect(try attributes.quotedString("Q") == "quoted")
        #expect(try attributes.enumeratedString("U") == "PQ")
        #expect(try attributes.enumeratedString("UQ") == "PQ")
        #expect(try attributes.integer("MISSING") == nil)
        #expect(try attributes.quotedString("MISSING2") == nil)
        #expect(
            attributes.unconsumed == [
                Attribute(name: "X-KEEP", value: "1", isQuoted: false), Attribute(name: "X-KEEP2", value: "2", isQuoted: true),
            ]
        )
    }

    @Test("typed accessors refuse values of the wrong form")
    func invalidValues() throws {
        let cases: [(String, (inout AttributeList) throws -> Void)] = [
            ("V=-1", { _ = try $0.integer("V") }),
            ("V=1.0", { _ = try $0.integer("V") }),
            ("V=12345678901234567890", { _ = try $0.integer("V") }),
            ("V=-1.5", { _ = try $0.decimal("V") }),
            ("V=nan", { _ = try $0.decimal("V") }),
            ("V=1e999", { _ = try $0.decimal("V") }),
            ("V=0x10", { _ = try $0.decimal("V") }),
            ("V=yes", { _ = try $0.boolean("V") }),
            ("V=1920X1080", { _ = try $0.resolution("V") }),
            ("V=1920x1080x3", { _ = try $0.resolution("V") }),
            ("V=-1x5", { _ = try $0.resolution("V") }),
            ("V=x", { _ = try $0.resolution("V") }),
            ("V=ABCD", { _ = try $0.hexadecimal("V") }),
            ("V=0x", { _ = try $0.hexadecimal("V") }),
            ("V=0xAG", { _ = try $0.hexadecimal("V") }),
            ("V=0x１２", { _ = try $0.hexadecimal("V") }),
            ("V=unquoted", { _ = try $0.quotedString("V") }),
            (#"V="""#, { _ = try $0.enumeratedString("V") }),
        ]
        for (text, read) in cases {
            var attributes = try list(text)
            expectError("invalid_attribute_value", "\(text)") { try read(&attributes) }
        }
    }

    @Test("required accessors report the missing attribute")
    func required() throws {
        var attributes = try list("A=1")
        expectError("missing_attribute") { _ = try attributes.requiredInteger("B") }
        expectError("missing_attribute") { _ = try attributes.requiredQuotedString("C") }
        expectError("missing_attribute") { _ = try attributes.requiredEnumeratedString("D") }
        #expect(try attributes.requiredInteger("A") == 1)
    }

    @Test("the first of two attributes with one name wins, and neither is kept as unknown")
    func duplicates() throws {
        var attributes = try list("A=1,A=2,B=3")
        #expect(try attributes.integer("A") == 1)
        #expect(attributes.unconsumed.map(\.name) == ["B"])
    }
}
