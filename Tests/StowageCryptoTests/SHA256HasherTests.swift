import StowageCrypto
import Testing

/// FIPS 180-2 Appendix B (SHA-256 examples B.1, B.2 and B.3), and the empty message from the NIST
/// CAVP SHA256ShortMsg file (Len = 0).
@Suite("SHA-256")
struct SHA256HasherTests {
    static let abc = hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    static let twoBlock = hex("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    static let millionA = hex("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")

    @Test("B.1: \"abc\"")
    func hashesOneBlock() {
        #expect(SHA256Hasher.hash(Array("abc".utf8)) == Self.abc)
    }

    @Test("B.2: the 448-bit message")
    func hashesTwoBlocks() {
        let message = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        #expect(SHA256Hasher.hash(message) == Self.twoBlock)
    }

    @Test("B.3: one million 'a' streamed in pieces", arguments: [1000, 997, 65536])
    func streamsMillionA(pieceSize: Int) {
        let piece = [UInt8](repeating: UInt8(ascii: "a"), count: pieceSize)
        var hasher = SHA256Hasher()
        var remaining = 1_000_000
        while remaining > 0 {
            let count = min(pieceSize, remaining)
            piece.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            remaining -= count
        }
        #expect(hasher.finalize() == Self.millionA)
    }

    @Test("The empty message (CAVP SHA256ShortMsg, Len = 0)")
    func hashesEmpty() {
        #expect(SHA256Hasher.hash([]) == hex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"))
    }

    @Test("A copy keeps its own state, and finalize starts the hasher over")
    func hasValueSemantics() {
        var hasher = SHA256Hasher()
        hasher.update(Array("ab".utf8))
        var copy = hasher
        copy.update(Array("c".utf8))
        hasher.update(Array("x".utf8))
        #expect(copy.finalize() == Self.abc)
        #expect(hasher.finalize() == SHA256Hasher.hash(Array("abx".utf8)))
        hasher.update(Array("abc".utf8))
        #expect(hasher.finalize() == Self.abc)
    }
}
