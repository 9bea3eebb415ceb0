import Synchronization

/// A record of every request an origin answered, for tests that count what a client fetched.
///
/// An entry is added as soon as the origin has decided how to answer, before any byte of the response is written, so
/// a client that has received a response head always finds its request here. ``Entry/bytesSent`` grows as the body is
/// handed to the connection.
///
/// ```swift
/// let log = OriginRequestLog()
/// let origin = Origin(configuration: .init(root: root, requestLog: log))
/// // ... download ...
/// #expect(log.count(path: "/video/seg3.ts") == 1)
/// ```
public final class OriginRequestLog: Sendable {
    /// One request and how it was answered.
    public struct Entry: Sendable, Hashable, Codable {
        /// The request method, `GET` or `HEAD` (or whatever was rejected with 405).
        public var method: String
        /// The percent-decoded request path without the query, e.g. `/a b/seg.ts`; the raw path when it was rejected.
        public var path: String
        /// The request's `Range` header, verbatim.
        public var range: String?
        /// The response status code.
        public var status: Int
        /// How many body bytes were handed to the connection; a reset or truncated response may deliver fewer.
        public var bytesSent: Int
        /// The fault injected into this response.
        public var fault: NetworkFault
        /// The request's `Host`, `Cookie`, `User-Agent` and `Referer` headers, by lowercase name, where it sent them
        /// (files served only; refusals record none).
        public var headers: [String: String]

        /// - Parameters:
        ///   - method: the request method.
        ///   - path: the percent-decoded request path.
        ///   - range: the `Range` header.
        ///   - status: the response status code.
        ///   - bytesSent: body bytes handed to the connection.
        ///   - fault: the injected fault.
        ///   - headers: the request headers recorded.
        public init(method: String, path: String, range: String?, status: Int, bytesSent: Int, fault: NetworkFault, headers: [String: String] = [:]) {
            self.method = method
            self.path = path
            self.range = range
            self.status = status
            self.bytesSent = bytesSent
            self.fault = fault
            self.headers = headers
        }
    }

    /// Identifies an entry across ``reset()``, which starts a new generation.
    struct Ticket: Sendable {
        var generation: Int
        var index: Int
    }

    private struct State {
        var entries: [Entry] = []
        var generation = 0
    }

    private let state = Mutex(State())

    /// An empty log.
    public init() {}

    /// Every request so far, in the order the origin started answering them.
    public var entries: [Entry] {
        state.withLock { $0.entries }
    }

    /// How many requests, of any method and outcome, were made for `path` (percent-decoded, e.g. `/a b/seg.ts`).
    public func count(path: String) -> Int {
        state.withLock { state in state.entries.count { $0.path == path } }
    }

    /// Forgets every entry.
    public func reset() {
        state.withLock { state in
            state.entries.removeAll()
            state.generation += 1
        }
    }

    /// Appends `entry` and returns where it is, for ``addBytesSent(_:to:)``.
    func append(_ entry: Entry) -> Ticket {
        state.withLock { state in
            state.entries.append(entry)
            return Ticket(generation: state.generation, index: state.entries.count - 1)
        }
    }

    func addBytesSent(_ count: Int, to ticket: Ticket) {
        state.withLock { state in
            // A reset() while the body was being written dropped the entry.
            guard state.generation == ticket.generation, state.entries.indices.contains(ticket.index) else { return }
            state.entries[ticket.index].bytesSent += count
        }
    }
}
