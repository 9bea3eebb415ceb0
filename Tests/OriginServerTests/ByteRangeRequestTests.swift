import StowageCore
import Testing

@testable import OriginServer

/// `Range` parsing against RFC 9110 section 14, without a server.
struct ByteRangeRequestTests {
    @Test func parsesTheThreeSingleRangeForms() {
        #expect(ByteRangeRequest(header: "bytes=0-499", size: 1000) == .partial(0...499))
        #expect(ByteRangeRequest(header: "bytes=500-", size: 1000) == .partial(500...999))
        #expect(ByteRangeRequest(header: "bytes=-300", size: 1000) == .partial(700...999))
        #expect(ByteRangeRequest(header: "bytes=900-5000", size: 1000) == .partial(900...999))
        #expect(ByteRangeRequest(header: "BYTES=1-1", size: 1000) == .partial(1...1))
    }

    @Test func refusesRangesPastTheEnd() {
        #expect(ByteRangeRequest(header: "bytes=1000-", size: 1000) == .unsatisfiable)
        #expect(ByteRangeRequest(header: "bytes=-0", size: 1000) == .unsatisfiable)
        #expect(ByteRangeRequest(header: "bytes=0-", size: 0) == .unsatisfiable)
        #expect(ByteRangeRequest(header: "bytes=-5", size: 0) == .unsatisfiable)
    }

    @Test func ignoresWhatItDoesNotServe() {
        #expect(ByteRangeRequest(header: nil, size: 1000) == .whole)
        #expect(ByteRangeRequest(header: "bytes=0-1,5-6", size: 1000) == .whole)
        #expect(ByteRangeRequest(header: "pages=1-2", size: 1000) == .whole)
        #expect(ByteRangeRequest(header: "bytes=5-1", size: 1000) == .whole)
        #expect(ByteRangeRequest(header: "bytes=-", size: 1000) == .whole)
        #expect(ByteRangeRequest(header: "bytes=a-b", size: 1000) == .whole)
        #expect(ByteRangeRequest(header: "bytes=-+5", size: 1000) == .whole)
        #expect(ByteRangeRequest(header: "bytes=99999999999999999999-", size: 1000) == .whole)
    }
}
