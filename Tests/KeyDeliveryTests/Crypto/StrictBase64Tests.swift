import KeyDelivery
import Testing

struct StrictBase64Tests {
    // RFC 4648 section 10 test vectors.
    @Test(arguments: [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
    ])
    func rfc4648Vectors(plain: String, encoded: String) {
        #expect(StrictBase64.encode(Array(plain.utf8)) == encoded)
        #expect(StrictBase64.decode(encoded) == Array(plain.utf8))
    }

    @Test func usesTheStandardAlphabet() {
        #expect(StrictBase64.encode([0xfb, 0xff, 0xbf]) == "+/+/")
        #expect(StrictBase64.decode("+/+/") == [0xfb, 0xff, 0xbf])
    }

    @Test(arguments: [
        "Zg", "Zg=", "Zm9",  // missing padding
        "Zh==", "Zm9=",  // non-zero unused bits (non-canonical)
        "-_-_",  // URL-safe alphabet
        "Zm9v\n", " Zm9v", "Zm 9v",  // whitespace
        "Z===", "Zg=a", "=Zg=", "Zg==Zm9v",  // misplaced padding
        "Zm9vé===",
    ])
    func rejectsNonCanonicalText(text: String) {
        #expect(StrictBase64.decode(text) == nil)
    }

    @Test func decodesAnExactLength() {
        let nonce = [UInt8](0..<16)
        let text = StrictBase64.encode(nonce)
        #expect(StrictBase64.decode(text, byteCount: 16) == nonce)
        #expect(StrictBase64.decode(text, byteCount: 15) == nil)
        #expect(StrictBase64.decode(text, byteCount: 17) == nil)
        #expect(StrictBase64.decode(StrictBase64.encode([UInt8](0..<15)), byteCount: 16) == nil)
    }

    @Test func roundTripsEveryLengthAndByte() {
        for length in 0..<70 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ length) }
            #expect(StrictBase64.decode(StrictBase64.encode(bytes)) == bytes)
        }
        let all = [UInt8](0...255)
        #expect(StrictBase64.decode(StrictBase64.encode(all)) == all)
    }
}
