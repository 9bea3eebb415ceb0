/// What a `Range` request header asks of a representation of a known size (RFC 9110 section 14.2): one parser for
/// the test origin and the playback server.
///
/// ```swift
/// switch ByteRangeRequest(header: request.headers[.range], size: length) {
/// case .whole: // 200 with everything
/// case .partial(let bytes): // 206, Content-Range: bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(length)
/// case .unsatisfiable: // 416, Content-Range: bytes */\(length)
/// }
/// ```
public enum ByteRangeRequest: Sendable, Hashable {
    /// Send the whole representation: no `Range`, one this origin ignores (another unit, a malformed or a
    /// multi-range header), or an `If-Range` that no longer matches.
    case whole
    /// Send these bytes with 206 Partial Content.
    case partial(ClosedRange<Int>)
    /// 416 Range Not Satisfiable, with `Content-Range: bytes */SIZE`.
    case unsatisfiable

    /// - Parameters:
    ///   - header: the `Range` header value, if any.
    ///   - size: the representation's size in bytes.
    public init(header: String?, size: Int) {
        guard let header else {
            self = .whole
            return
        }
        let trimmed = header.trimmingSpaces
        guard trimmed.lowercased().hasPrefix("bytes=") else {
            // RFC 9110 14.2: a recipient ignores a Range with a unit it does not support.
            self = .whole
            return
        }
        let spec = trimmed.dropFirst("bytes=".count).trimmingSpaces
        // Multiple ranges would need multipart/byteranges; RFC 9110 lets a server answer 200 with the whole instead.
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else {
            self = .whole
            return
        }
        let first = spec[..<dash].trimmingSpaces
        let last = spec[spec.index(after: dash)...].trimmingSpaces
        switch (Int(decimal: first), Int(decimal: last)) {
        case (nil, let suffix?) where first.isEmpty:
            // bytes=-N: the last N bytes.
            guard suffix > 0, size > 0 else {
                self = .unsatisfiable
                return
            }
            self = .partial(max(0, size - suffix)...(size - 1))
        case (let start?, nil) where last.isEmpty:
            // bytes=A-: from A to the end.
            self = start < size ? .partial(start...(size - 1)) : .unsatisfiable
        case (let start?, let end?):
            guard start <= end else {
                // An invalid range-spec makes the whole header invalid, and an invalid Range is ignored.
                self = .whole
                return
            }
            self = start < size ? .partial(start...min(end, size - 1)) : .unsatisfiable
        default:
            self = .whole
        }
    }
}

extension ByteRangeRequest {
    /// RFC 9110 section 13.1.5: a Range is honoured only if `If-Range`, when present, matches the current
    /// representation; entity tags compare strongly, so a weak tag never matches. A date matches only the exact
    /// `Last-Modified` value sent.
    public static func ifRange(_ value: String?, entityTag: String, lastModified: String?) -> Bool {
        guard let value = value?.trimmingSpaces else { return true }
        if value.hasPrefix("\"") || value.hasPrefix("W/") { return value == entityTag }
        return lastModified.map { value == $0 } ?? false
    }
}

extension Int {
    /// Parses only ASCII digits (no sign, no spaces), as HTTP's 1*DIGIT; `nil` when empty or too large.
    fileprivate init?(decimal text: Substring) {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int(text) else { return nil }
        self = value
    }
}

extension StringProtocol {
    fileprivate var trimmingSpaces: Substring {
        let view = Substring(self)
        let start = view.firstIndex { $0 != " " && $0 != "\t" } ?? view.endIndex
        let end = view[start...].lastIndex { $0 != " " && $0 != "\t" }.map { view.index(after: $0) } ?? start
        return view[start..<end]
    }
}
