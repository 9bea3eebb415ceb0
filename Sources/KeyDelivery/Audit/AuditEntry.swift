/// One entry of the key store's audit journal: what happened to which lease, when, chained to the entry before it by
/// that entry's SHA-256 (see ``AuditChain`` for the exact encoding).
public struct AuditEntry: Codable, Sendable, Hashable {
    /// 1, 2, 3...: the position in the journal.
    public let sequence: Int64
    /// Local time of the event, whole seconds since the Unix epoch.
    public let time: Int64
    /// What happened.
    public let kind: AuditEventKind
    /// The asset concerned, if any.
    public let assetId: String?
    /// The lease concerned, if any.
    public let leaseId: String?
    /// Details as a JSON object in ``AuditDetail``'s canonical form (sorted keys, no whitespace).
    public let detail: String
    /// Lowercase hex SHA-256 of the previous entry (64 zeros for the first).
    public let previousHash: String
    /// Lowercase hex SHA-256 of this entry.
    public let hash: String

    public init(
        sequence: Int64,
        time: Int64,
        kind: AuditEventKind,
        assetId: String?,
        leaseId: String?,
        detail: String,
        previousHash: String,
        hash: String
    ) {
        self.sequence = sequence
        self.time = time
        self.kind = kind
        self.assetId = assetId
        self.leaseId = leaseId
        self.detail = detail
        self.previousHash = previousHash
        self.hash = hash
    }
}

/// What an audit entry records. A string underneath, so entries written by later versions still read back.
public struct AuditEventKind: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    /// The key server granted a lease (verified payload received).
    public static let acquire = Self(rawValue: "acquire")
    /// The lease and its signed payload were stored.
    public static let persist = Self(rawValue: "persist")
    /// Playback was authorized for the first time: the playback window started.
    public static let firstPlay = Self(rawValue: "first_play")
    /// The server renewed the lease; the stored payload was replaced (detail `by`: `service` for automatic upkeep).
    public static let renewal = Self(rawValue: "renewal")
    /// An automatic renewal (lease upkeep) failed; the lease stays as it was (detail `code`).
    public static let renewalFailed = Self(rawValue: "renewal_failed")
    /// A window closed; the key material was erased and a release queued.
    public static let expiry = Self(rawValue: "expiry")
    /// The user returned the lease; the key material was erased and a release queued.
    public static let `return` = Self(rawValue: "return")
    /// The server confirmed a release.
    public static let release = Self(rawValue: "release")
    /// A release request failed and stays queued.
    public static let releaseFailed = Self(rawValue: "release_failed")
    /// The clock was found set back below the time high-water mark.
    public static let rollbackDetected = Self(rawValue: "rollback_detected")
    /// A key server's signing key was pinned for its URL.
    public static let serverKeyPinned = Self(rawValue: "server_key_pinned")
    /// The pin of a key server was removed (`stowage keys unpin`).
    public static let serverKeyUnpinned = Self(rawValue: "server_key_unpinned")
    /// A copy of the client's own state (the time record, a lease row, a queued release) was found deleted or altered.
    public static let stateTampered = Self(rawValue: "state_tampered")
    /// The key server learned when playback started (a report sent at sync or with a renewal).
    public static let firstPlayReported = Self(rawValue: "first_play_reported")
    /// A renewal vouched for its lease again: the lease's latches cleared (the detail says which).
    public static let timeReanchored = Self(rawValue: "time_reanchored")
    /// A key was sealed and stored for a key URI.
    public static let identityKeyStored = Self(rawValue: "identity_key_stored")
    /// Sealed keys were erased.
    public static let identityKeyErased = Self(rawValue: "identity_key_erased")
}

/// The details of an audit entry: a flat JSON object of strings, integers and booleans.
///
/// Canonical form, so the same details always give the same bytes: `{` members `}` with members sorted by the UTF-8
/// bytes of their names, separated by `,`, written `"name":value` without whitespace; strings escape `"` `\\` and
/// the control characters (`\b \f \n \r \t`, others as `\u00XX`) and nothing else; integers in decimal; `true` and
/// `false`. Entries hash the stored text as is, so the form only has to be stable for writing.
public struct AuditDetail: Sendable, Hashable, ExpressibleByDictionaryLiteral {
    /// A member value.
    public enum Value: Sendable, Hashable {
        case string(String)
        case integer(Int64)
        case bool(Bool)
    }

    public var members: [String: Value]

    public init(_ members: [String: Value] = [:]) {
        self.members = members
    }

    public init(dictionaryLiteral elements: (String, Value)...) {
        self.members = Dictionary(elements, uniquingKeysWith: { _, last in last })
    }

    /// The canonical JSON text.
    public var canonicalJSON: String {
        let sorted = members.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }
        let body = sorted.map { name, value in
            let text: String
            switch value {
            case .string(let string): text = Self.quoted(string)
            case .integer(let integer): text = String(integer)
            case .bool(let bool): text = bool ? "true" : "false"
            }
            return "\(Self.quoted(name)):\(text)"
        }
        return "{" + body.joined(separator: ",") + "}"
    }

    private static func quoted(_ string: String) -> String {
        var out = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

extension AuditDetail.Value: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}
