import Foundation
import Hummingbird
import HummingbirdTesting
import KeyDelivery
import KeyServer
import NIOCore
import Testing

struct KeyServerErrorTests {
    @Test(arguments: KeyProtocolErrorCode.allCases)
    func errorsUseTheProtocolStatusAndBody(code: KeyProtocolErrorCode) async throws {
        let router = Router()
        router.get("fail") { _, _ -> String in throw KeyServerError(code, "because") }
        let app = Application(router: router)
        try await app.test(.router) { client in
            try await client.execute(uri: "/fail", method: .get) { response in
                #expect(response.status.code == code.httpStatus)
                #expect(response.headers[.contentType] == "application/json")
                let body = try JSONDecoder().decode(KeyProtocolErrorBody.self, from: Data(String(buffer: response.body).utf8))
                #expect(body.error.code == code.rawValue)
                #expect(body.error.message == "because")
            }
        }
    }
}
