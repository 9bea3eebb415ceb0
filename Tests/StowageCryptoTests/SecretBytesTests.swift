import StowageCrypto
import Testing

@Suite("SecretBytes")
struct SecretBytesTests {
    private static let key: [UInt8] = hex("2b7e151628aed2a6abf7158809cf4f3c")

    @Test("Equal bytes are equal; any difference in content or length is not")
    func comparesContents() {
        let secret = SecretBytes(Self.key)
        #expect(secret == SecretBytes(Self.key))
        #expect(secret != SecretBytes(flippingBit(127, of: Self.key)))
        #expect(secret != SecretBytes(flippingBit(0, of: Self.key)))
        #expect(secret != SecretBytes(Self.key.dropLast()))
        #expect(SecretBytes([]) == SecretBytes([UInt8]()))
    }

    @Test("count and withUnsafeBytes give back the bytes")
    func exposesBytes() {
        let secret = SecretBytes(Self.key[...])
        #expect(secret.count == 16)
        #expect(secret.withUnsafeBytes { Array($0) } == Self.key)
    }

    @Test("Printing reveals only the length")
    func hidesBytesWhenPrinted() {
        let secret = SecretBytes(Self.key)
        #expect(secret.description == "SecretBytes(16 bytes)")
        #expect(String(describing: secret) == "SecretBytes(16 bytes)")
        #expect(String(reflecting: secret) == "SecretBytes(16 bytes)")
        var dumped = ""
        dump(secret, to: &dumped)
        let hexKey = Hex.encode(Self.key)
        for text in [secret.description, String(reflecting: secret), dumped, "\(secret)"] {
            #expect(!text.contains(hexKey))
            #expect(!text.contains("2b7e"))
            #expect(!text.contains("43"))  // 0x2b as decimal
        }
    }

    @Test("init(count:initializer:) writes in place, and a throwing initializer rethrows")
    func initializesInPlace() throws {
        let secret = SecretBytes(count: 4) { buffer in
            #expect(Array(buffer) == [0, 0, 0, 0])
            buffer.copyBytes(from: [9, 8, 7, 6])
        }
        #expect(secret.withUnsafeBytes { Array($0) } == [9, 8, 7, 6])
        #expect(throws: CryptoError.openSSLFailure) {
            try SecretBytes(count: 4) { _ in throw CryptoError.openSSLFailure }
        }
    }

    @Test("random(count:) gives the requested length and fresh bytes")
    func generatesRandom() throws {
        let first = try SecretBytes.random(count: 32)
        let second = try SecretBytes.random(count: 32)
        #expect(first.count == 32)
        #expect(first != second)
        #expect(try SecretBytes.random(count: 0).count == 0)
        #expect(throws: CryptoError.randomFailure) { try SecretBytes.random(count: -1) }
    }
}
