import Foundation
public import Hummingbird
public import KeyDelivery
public import StowageCore

/// A protocol error as the key server sends it: the status the protocol pairs with the code and the body
/// `{"error": {"code": "...", "message": "..."}}`.
public struct KeyServerError: HTTPResponseError, StowageError {
    /// The protocol's code, which decides the HTTP status.
    public let protocolCode: KeyProtocolErrorCode
    public let message: String

    public init(_ code: KeyProtocolErrorCode, _ message: String) {
        self.protocolCode = code
        self.message = message
    }

    /// The protocol's snake_case code, e.g. `device_limit_reached`.
    public var code: ErrorCode { protocolCode.code }

    public var description: String { "\(code): \(message)" }

    public var status: HTTPResponse.Status { .init(code: protocolCode.httpStatus) }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let body = try JSONEncoder().encode(KeyProtocolErrorBody(code: protocolCode, message: message))
        return Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: body))
        )
    }
}
