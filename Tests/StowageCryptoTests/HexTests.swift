import StowageCrypto
import Testing

@Suite("Hex")
struct HexTests {
    @Test("Encodes lowercase, two digits per byte")
    func encodes() {
        #expect(Hex.encode([0x00, 0x0f, 0xa0, 0xde, 0xad, 0xbe, 0xef, 0xff]) == "000fa0deadbeefff")
        #expect(Hex.encode([UInt8]()) == "")
    }

    @Test("Decodes upper and lower case", arguments: ["deadBEEF", "DEADBEEF", "deadbeef"])
    func decodes(_ text: String) {
        #expect(Hex.decode(text) == [0xde, 0xad, 0xbe, 0xef])
        #expect(Hex.decode(text[...]) == [0xde, 0xad, 0xbe, 0xef])
    }

    @Test("Rejects odd length, non-digits, prefixes and spaces", arguments: ["abc", "0x00", "zz", "de ad", "-1", "é0"])
    func rejects(_ text: String) {
        #expect(Hex.decode(text) == nil)
    }

    @Test("Round trips every byte value")
    func roundTrips() {
        let all = (0...255).map { UInt8($0) }
        #expect(Hex.decode(Hex.encode(all)) == all)
        #expect(Hex.decode("") == [])
    }
}
