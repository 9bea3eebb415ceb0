import StowageCrypto
import Testing

@Suite("SecureRandom")
struct SecureRandomTests {
    @Test("Returns the requested number of bytes", arguments: [0, 1, 12, 16, 4097])
    func returnsCount(count: Int) throws {
        #expect(try SecureRandom.bytes(count: count).count == count)
    }

    @Test("Two draws of 32 bytes differ, and neither is all zeros")
    func drawsFreshBytes() throws {
        let first = try SecureRandom.bytes(count: 32)
        let second = try SecureRandom.bytes(count: 32)
        #expect(first != second)
        #expect(first != [UInt8](repeating: 0, count: 32))
    }

    @Test("A negative count is randomFailure")
    func rejectsNegativeCount() {
        #expect(throws: CryptoError.randomFailure) { try SecureRandom.bytes(count: -1) }
    }
}
