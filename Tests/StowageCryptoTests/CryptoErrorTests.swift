import StowageCore
import StowageCrypto
import Testing

@Suite("CryptoError")
struct CryptoErrorTests {
    static let all: [(CryptoError, String)] = [
        (.invalidKeyLength, "invalid_key_length"),
        (.invalidIVLength, "invalid_iv_length"),
        (.invalidNonceLength, "invalid_nonce_length"),
        (.badPadding, "bad_padding"),
        (.truncatedInput, "truncated_input"),
        (.authenticationFailed, "authentication_failed"),
        (.invalidPublicKey, "invalid_public_key"),
        (.invalidPrivateKey, "invalid_private_key"),
        (.signatureInvalid, "signature_invalid"),
        (.randomFailure, "random_failure"),
        (.openSSLFailure, "openssl_failure"),
    ]

    @Test("Codes are the stable snake_case strings")
    func hasStableCodes() {
        for (error, code) in Self.all {
            #expect(error.code == code)
        }
    }

    @Test("Each error has its own description and equals only itself")
    func isDistinct() {
        let errors = Self.all.map(\.0)
        #expect(Set(errors).count == errors.count)
        #expect(Set(errors.map(\.description)).count == errors.count)
        #expect(CryptoError.badPadding == .badPadding)
        #expect(CryptoError.badPadding != .truncatedInput)
    }
}
