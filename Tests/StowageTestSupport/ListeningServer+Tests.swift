public import StowageCore

/// A server that returned before it listened, without an error of its own.
public struct ServerDidNotListen: Error, CustomStringConvertible {
    public var description: String { "the server returned before it listened" }
}

extension ListeningServer {
    /// The address the server reported.
    /// - Throws: ``ServerDidNotListen`` when it returned before it listened.
    public func listeningAddress() throws -> Address {
        guard let address else { throw ServerDidNotListen() }
        return address
    }
}
