import Playback
import Testing

struct PlaybackSessionPathTests {
    @Test func pathsAre128RandomBitsInBase32() throws {
        var seen: Set<String> = []
        for _ in 0..<200 {
            let path = try PlaybackSessionPath()
            #expect(path.token.count == 26)
            #expect(path.token.allSatisfy { "abcdefghijklmnopqrstuvwxyz234567".contains($0) })
            seen.insert(path.token)
        }
        #expect(seen.count == 200)
    }

    @Test func containsOnlyItsOwnRequests() throws {
        let path = try PlaybackSessionPath()
        #expect(path.contains(requestPath: "/\(path.token)/master.m3u8"))
        #expect(!path.contains(requestPath: "/\(path.token)"))
        #expect(!path.contains(requestPath: "/other/master.m3u8"))
        #expect(!path.contains(requestPath: "/\(path.token.dropLast())/master.m3u8"))
    }
}
