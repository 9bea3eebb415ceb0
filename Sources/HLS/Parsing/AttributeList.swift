import Foundation

/// One `NAME=VALUE` pair of an attribute list (RFC 8216bis 4.2), with the value as written.
public struct Attribute: Hashable, Sendable, Codable {
    /// The attribute name, e.g. `BANDWIDTH` or a client attribute `X-COM-EXAMPLE`.
    public var name: String
    /// The value without its quotes.
    public var value: String
    /// Whether the value was (and will be written as) a quoted string.
    public var isQuoted: Bool

    public init(name: String, value: String, isQuoted: Bool) {
        self.name = name
        self.value = value
        self.isQuoted = isQuoted
    }

    /// The attribute as it appears in a playlist.
    public var rendered: String { isQuoted ? "\(name)=\"\(value)\"" : "\(name)=\(value)" }
}

/// Where a lenient parse collects what it tolerated; shared by the parser and the attribute lists it reads.
final class ToleranceLog {
    /// Nil: strict (every deviation is an error); else lenient, collecting a warning for each deviation accepted (the
    /// first ``maximumWarnings``; the rest are only counted, so a hostile playlist cannot fill memory or a manifest).
    private(set) var warnings: [PlaylistWarning]?
    /// Warnings beyond ``maximumWarnings``, counted.
    private(set) var omitted = 0
    /// The first deviation accepted: what a playlist left with nothing to read is refused with.
    private(set) var firstTolerated: PlaylistError?
    static let maximumWarnings = 100

    init(strict: Bool) {
        warnings = strict ? nil : []
    }

    var isStrict: Bool { warnings == nil }

    /// A deviation from RFC 8216bis that players accept: in strict mode `error` is thrown, else `message` is noted
    /// against `line` and parsing goes on.
    func tolerate(_ error: PlaylistError, line: Int, _ message: String) throws(PlaylistError) {
        guard warnings != nil else { throw error }
        if firstTolerated == nil { firstTolerated = error }
        note(PlaylistWarning(line: line, message: message))
    }

    /// Keeps a warning, or counts it once ``maximumWarnings`` are kept.
    func note(_ warning: PlaylistWarning) {
        if (warnings?.count ?? 0) + keptElsewhere >= Self.maximumWarnings {
            omitted += 1
        } else {
            warnings?.append(warning)
        }
    }

    /// Warnings the parser keeps itself (raised in strict mode too), counted against the limit.
    var keptElsewhere = 0
}

/// An attribute list read from a tag, with typed accessors that report errors against the tag's line.
struct AttributeList {
    private(set) var attributes: [Attribute]
    let line: Int
    let text: String
    /// Where values of the wrong form that players still read are noted (lenient) or refused (strict).
    let tolerance: ToleranceLog

    /// Parses `NAME=VALUE,...`. Quoted strings may contain commas and `=`; whitespace around pairs is
    /// tolerated because real packagers write it.
    init(parsing input: Substring, line: Int, text: String, tolerance: ToleranceLog = ToleranceLog(strict: true)) throws(PlaylistError) {
        self.line = line
        self.text = text
        self.tolerance = tolerance
        // Scanned by Unicode scalar, not by Character: every delimiter is ASCII, and a Character can swallow one
        // (U+0600 followed by "," is a single grapheme cluster), which would move attribute boundaries.
        let scalars = input.unicodeScalars
        var attributes: [Attribute] = []
        var index = scalars.startIndex
        func skipSpaces() {
            while index < scalars.endIndex, scalars[index] == " " || scalars[index] == "\t" { index = scalars.index(after: index) }
        }
        while true {
            skipSpaces()
            if index == scalars.endIndex { break }
            let nameStart = index
            while index < scalars.endIndex, scalars[index] != "=", scalars[index] != "," { index = scalars.index(after: index) }
            let name = String(scalars[nameStart..<index]).trimmingSpaces()
            guard index < scalars.endIndex, scalars[index] == "=", !name.isEmpty else {
                throw .malformedTag(line: line, text: text, reason: "expected NAME=VALUE in the attribute list")
            }
            guard name.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_") })
            else {
                throw .malformedTag(line: line, text: text, reason: "invalid attribute name \(name)")
            }
            index = scalars.index(after: index)
            skipSpaces()
            if index < scalars.endIndex, scalars[index] == "\"" {
                let valueStart = scalars.index(after: index)
                guard let close = scalars[valueStart...].firstIndex(of: "\"") else {
                    throw .malformedTag(line: line, text: text, reason: "unterminated quoted string in attribute \(name)")
                }
                attributes.append(Attribute(name: name, value: String(scalars[valueStart..<close]), isQuoted: true))
                index = scalars.index(after: close)
                skipSpaces()
            } else {
                let valueStart = index
                while index < scalars.endIndex, scalars[index] != "," { index = scalars.index(after: index) }
                // Trailing whitespace of any kind goes too: the writer may put this value last on its line, and line
                // ends lose all Unicode whitespace.
                var value = scalars[valueStart..<index]
                while let first = value.first, first == " " || first == "\t" { value.removeFirst() }
                while let last = value.last, CharacterSet.whitespacesAndNewlines.contains(last) { value.removeLast() }
                attributes.append(Attribute(name: name, value: String(value), isQuoted: false))
            }
            if index == scalars.endIndex { break }
            guard scalars[index] == "," else {
                throw .malformedTag(line: line, text: text, reason: "expected a comma after attribute \(name)")
            }
            index = scalars.index(after: index)
        }
        self.attributes = attributes
    }

    private var consumed: Set<String> = []

    /// Attributes that no typed accessor asked for: client (`X-`) attributes and ones from later drafts.
    var unconsumed: [Attribute] { attributes.filter { !consumed.contains($0.name) } }

    /// The attribute as written, marking it consumed.
    mutating func attribute(_ name: String) -> Attribute? { raw(name) }

    /// The value of an attribute as written, without consuming it or raising a warning.
    func peek(_ name: String) -> String? { attributes.first { $0.name == name }?.value }

    /// Replaces `{$name}` references in quoted-string and hexadecimal values (RFC 8216bis 4.3).
    ///
    /// A hexadecimal value must still be one after substitution (`0x` and hex digits only), or a variable could smuggle
    /// a comma or a second attribute into an unquoted value.
    mutating func substituteVariables(_ substitute: (String) throws(PlaylistError) -> String) throws(PlaylistError) {
        for index in attributes.indices {
            let attribute = attributes[index]
            let isHex = !attribute.isQuoted && (attribute.value.hasPrefix("0x") || attribute.value.hasPrefix("0X"))
            guard attribute.isQuoted || isHex else { continue }
            let substituted = try substitute(attribute.value)
            if isHex, substituted != attribute.value {
                let digits = substituted.unicodeScalars.dropFirst(2)
                guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && Character($0).isHexDigit }) else {
                    throw invalid(attribute.name, "after variable substitution, expected 0x followed by hex digits")
                }
            }
            attributes[index].value = substituted
        }
    }

    private mutating func raw(_ name: String) -> Attribute? {
        consumed.insert(name)
        return attributes.first { $0.name == name }
    }

    private func invalid(_ name: String, _ reason: String) -> PlaylistError {
        .invalidAttributeValue(name, line: line, text: text, reason: reason)
    }

    private func require<T>(_ name: String, _ value: T?) throws(PlaylistError) -> T {
        guard let value else { throw .missingAttribute(name, line: line, text: text) }
        return value
    }

    mutating func quotedString(_ name: String) throws(PlaylistError) -> String? {
        guard let attribute = raw(name) else { return nil }
        if !attribute.isQuoted {
            // A value holding a quote cannot become a quoted string, and one holding a variable reference would escape
            // substitution (which applies to quoted strings): both stay errors.
            guard !attribute.value.containsASCII(UInt8(ascii: "\"")), !attribute.value.containsASCII((UInt8(ascii: "{"), UInt8(ascii: "$"))) else {
                throw invalid(name, "expected a quoted string")
            }
            try tolerance.tolerate(
                invalid(name, "expected a quoted string"),
                line: line,
                "\(name) should be a quoted string; read the unquoted value \(attribute.value) as one"
            )
        }
        return attribute.value
    }

    mutating func requiredQuotedString(_ name: String) throws(PlaylistError) -> String {
        try require(name, try quotedString(name))
    }

    /// An enumerated string; tolerates quotes around it, which some packagers add.
    mutating func enumeratedString(_ name: String) throws(PlaylistError) -> String? {
        guard let attribute = raw(name) else { return nil }
        guard !attribute.value.isEmpty else { throw invalid(name, "empty value") }
        return attribute.value
    }

    mutating func requiredEnumeratedString(_ name: String) throws(PlaylistError) -> String {
        try require(name, try enumeratedString(name))
    }

    mutating func integer(_ name: String) throws(PlaylistError) -> Int? {
        guard let attribute = raw(name) else { return nil }
        if !attribute.isQuoted, let value = Int(attribute.value), value >= 0 { return value }
        let error = invalid(name, "expected a decimal integer, found \(attribute.value)")
        // Players read a quoted number, or a decimal such as BANDWIDTH=1500000.0, as the integer it stands for.
        guard !tolerance.isStrict, let decimal = Double(attribute.value), decimal.isFinite, decimal >= 0, decimal < 1e15,
            attribute.value.allSatisfy(isDecimalCharacter)
        else { throw error }
        let value = Int(decimal.rounded())
        try tolerance.tolerate(error, line: line, "\(name) should be a decimal integer; read \(attribute.rendered) as \(value)")
        return value
    }

    mutating func requiredInteger(_ name: String) throws(PlaylistError) -> Int {
        try require(name, try integer(name))
    }

    mutating func decimal(_ name: String, allowNegative: Bool = false) throws(PlaylistError) -> Double? {
        guard let attribute = raw(name) else { return nil }
        guard let value = Double(attribute.value), value.isFinite, allowNegative || value >= 0,
            attribute.value.allSatisfy(isDecimalCharacter)
        else {
            throw invalid(name, "expected a decimal number, found \(attribute.value)")
        }
        if attribute.isQuoted {
            try tolerance.tolerate(
                invalid(name, "expected a decimal number, found a quoted string"),
                line: line,
                "\(name) should be an unquoted number; read \(attribute.rendered) as \(attribute.value)"
            )
        }
        return value
    }

    mutating func boolean(_ name: String) throws(PlaylistError) -> Bool? {
        guard let attribute = raw(name) else { return nil }
        switch attribute.value {
        case "YES": return true
        case "NO": return false
        default:
            let error = invalid(name, "expected YES or NO, found \(attribute.value)")
            let word = attribute.value.uppercased()
            guard ["YES", "NO", "TRUE", "FALSE"].contains(word) else { throw error }
            let value = word == "YES" || word == "TRUE"
            try tolerance.tolerate(error, line: line, "\(name) should be YES or NO; read \(attribute.value) as \(value ? "YES" : "NO")")
            return value
        }
    }

    mutating func resolution(_ name: String) throws(PlaylistError) -> Resolution? {
        guard let attribute = raw(name) else { return nil }
        let error = invalid(name, "expected WIDTHxHEIGHT, found \(attribute.value)")
        // Lenient: an upper-case X or a multiplication sign between the numbers.
        let separators: Set<Character> = tolerance.isStrict ? ["x"] : ["x", "X", "×"]
        let parts = attribute.value.split(omittingEmptySubsequences: false, whereSeparator: { separators.contains($0) })
        guard parts.count == 2, let width = Int(parts[0]), let height = Int(parts[1]), width >= 0, height >= 0 else { throw error }
        if !attribute.value.containsASCII(UInt8(ascii: "x")) || attribute.isQuoted {
            try tolerance.tolerate(error, line: line, "\(name) should be WIDTHxHEIGHT unquoted; read \(attribute.rendered) as \(width)x\(height)")
        }
        return Resolution(width: width, height: height)
    }

    /// A hexadecimal-sequence (`0x...`), returned as its digits without the prefix.
    mutating func hexadecimal(_ name: String) throws(PlaylistError) -> String? {
        guard let attribute = raw(name) else { return nil }
        let value = attribute.value
        // `isHexDigit` also accepts full-width digits, which `EncryptionKey.ivBytes` cannot read.
        func isHex(_ digits: Substring) -> Bool { !digits.isEmpty && digits.allSatisfy({ $0.isASCII && $0.isHexDigit }) }
        guard value.hasPrefix("0x") || value.hasPrefix("0X") else {
            // Lenient: bare hex digits, which ffmpeg and hls.js read as the same value.
            let error = invalid(name, "expected 0x followed by hex digits")
            guard !tolerance.isStrict, isHex(Substring(value)) else { throw error }
            try tolerance.tolerate(error, line: line, "\(name) should start with 0x; read \(value) as 0x\(value)")
            return value
        }
        let digits = value.dropFirst(2)
        guard isHex(digits) else { throw invalid(name, "invalid hex digits in \(value)") }
        return String(digits)
    }
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice = slice.dropLast() }
        return String(slice)
    }
}

/// Digits, sign, point and exponent: what a decimal-floating-point value may contain. The exponent is beyond
/// RFC 8216bis 4.2 but harmless, and it lets every Double the writer prints read back unchanged.
func isDecimalCharacter(_ character: Character) -> Bool {
    character.isASCII && (character.isNumber || "+-.eE".contains(character))
}
