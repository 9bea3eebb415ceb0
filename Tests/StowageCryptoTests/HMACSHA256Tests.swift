import StowageCrypto
import Testing

/// RFC 4231 section 4, test cases 1-7, HMAC-SHA-256 results. Test case 5 gives only the first 128 bits.
struct HMACVector: Sendable, CustomTestStringConvertible {
    let name: String
    let key: [UInt8]
    let data: [UInt8]
    let code: [UInt8]
    var testDescription: String { name }

    static let all = [
        HMACVector(
            name: "4.2 Test Case 1",
            key: [UInt8](repeating: 0x0b, count: 20),
            data: Array("Hi There".utf8),
            code: hex("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        ),
        HMACVector(
            name: "4.3 Test Case 2",
            key: Array("Jefe".utf8),
            data: Array("what do ya want for nothing?".utf8),
            code: hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        ),
        HMACVector(
            name: "4.4 Test Case 3",
            key: [UInt8](repeating: 0xaa, count: 20),
            data: [UInt8](repeating: 0xdd, count: 50),
            code: hex("773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe")
        ),
        HMACVector(
            name: "4.5 Test Case 4",
            key: byteRange(0x01, through: 0x19),
            data: [UInt8](repeating: 0xcd, count: 50),
            code: hex("82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b")
        ),
        HMACVector(
            name: "4.6 Test Case 5 (truncated to 128 bits)",
            key: [UInt8](repeating: 0x0c, count: 20),
            data: Array("Test With Truncation".utf8),
            code: hex("a3b6167473100ee06e0c796c2955552b")
        ),
        HMACVector(
            name: "4.7 Test Case 6",
            key: [UInt8](repeating: 0xaa, count: 131),
            data: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
            code: hex("60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
        ),
        HMACVector(
            name: "4.8 Test Case 7",
            key: [UInt8](repeating: 0xaa, count: 131),
            data: Array(
                "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm."
                    .utf8
            ),
            code: hex("9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2")
        ),
    ]
}

@Suite("HMAC-SHA256")
struct HMACSHA256Tests {
    @Test("RFC 4231 section 4", arguments: HMACVector.all)
    func computesKnownAnswer(_ vector: HMACVector) throws {
        let code = try HMACSHA256.authenticationCode(for: vector.data, key: SecretBytes(vector.key))
        #expect(code.count == 32)
        #expect(Array(code.prefix(vector.code.count)) == vector.code)
    }

    @Test("isValid accepts the full code only, and rejects any flipped bit", arguments: HMACVector.all)
    func validates(_ vector: HMACVector) throws {
        let key = SecretBytes(vector.key)
        let code = try HMACSHA256.authenticationCode(for: vector.data, key: key)
        #expect(try HMACSHA256.isValid(code, for: vector.data, key: key))
        #expect(try !HMACSHA256.isValid(flippingBit(255, of: code), for: vector.data, key: key))
        #expect(try !HMACSHA256.isValid(code, for: vector.data + [0], key: key))
        #expect(try !HMACSHA256.isValid(Array(code.prefix(16)), for: vector.data, key: key))
        #expect(try !HMACSHA256.isValid([], for: vector.data, key: key))
    }

    @Test("Empty key and empty message (the HMAC_SHA256(\"\", \"\") example in Wikipedia's HMAC article)")
    func handlesEmptyInputs() throws {
        let code = try HMACSHA256.authenticationCode(for: [], key: SecretBytes([]))
        #expect(code == hex("b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad"))
    }
}
