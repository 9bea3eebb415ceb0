import Foundation
public import Hummingbird
public import KeyDelivery

/// A protocol error as the key server sends it: the status the protocol pairs with the code and the body
/// `{"error": {"code": "...", "message": "..."}}`.
public struct KeyServerError: HTTPResponseError, Sendable {
    public let code: KeyProtocolErrorCode
    public let message: String

    public init(_ code: KeyProtocolErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var status: HTTPResponse.Status { .init(code: code.httpStatus) }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let body = try JSONEncoder().encode(KeyProtocolErrorBody(code: code, message: message))
        return Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: body))
        )
    }
}
