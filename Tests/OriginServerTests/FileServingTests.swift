import AsyncHTTPClient
import Foundation
import OriginServer
import StowageCore
import Testing

/// The origin as a plain file server: ranges, validators, HEAD and media types, over real loopback HTTP.
struct FileServingTests {
    static let size = 10_000

    /// A root with `seg.ts` (10,000 bytes), `a b/seg.ts`, a subdirectory and an empty file.
    static func withServedFiles(_ body: (String, [UInt8]) async throws -> Void) async throws {
        let root = try OriginFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let content = OriginFixture.bytes(size)
        try Data(content).write(to: root.appendingPathComponent("seg.ts"))
        try FileManager.default.createDirectory(at: root.appendingPathComponent("a b"), withIntermediateDirectories: true)
        try Data(content).write(to: root.appendingPathComponent("a b/seg.ts"))
        try Data().write(to: root.appendingPathComponent("empty.bin"))
        try await OriginFixture.withOrigin(.init(root: root.path)) { base in
            try await body(base, content)
        }
    }

    @Test func servesWholeFilesWithValidators() async throws {
        try await Self.withServedFiles { base, content in
            try await OriginFixture.withClient { client in
                let whole = try await OriginFixture.fetch(client, base + "/seg.ts")
                #expect(whole.status == 200)
                #expect(whole.body == content)
                #expect(whole.bodyError == nil)
                #expect(whole.header("Content-Length") == "\(Self.size)")
                #expect(whole.header("Accept-Ranges") == "bytes")
                #expect(whole.header("Content-Type") == "video/mp2t")
                #expect(whole.header("ETag")?.hasPrefix("\"") == true)
                #expect(whole.header("Last-Modified")?.hasSuffix(" GMT") == true)

                let spaced = try await OriginFixture.fetch(client, base + "/a%20b/seg.ts")
                #expect(spaced.status == 200)
                #expect(spaced.body == content)

                let empty = try await OriginFixture.fetch(client, base + "/empty.bin")
                #expect(empty.status == 200)
                #expect(empty.body.isEmpty)
                #expect(empty.header("Content-Length") == "0")
            }
        }
    }

    @Test(
        arguments: [
            ("bytes=100-199", 100..<200),
            ("bytes=0-0", 0..<1),
            ("bytes=9900-", 9900..<10_000),
            ("bytes=-100", 9900..<10_000),
            ("bytes=-20000", 0..<10_000),
            ("bytes=9990-20000", 9990..<10_000),
            (" bytes=5-9 ", 5..<10),
        ]
    )
    func servesSingleRanges(header: String, expected: Range<Int>) async throws {
        try await Self.withServedFiles { base, content in
            try await OriginFixture.withClient { client in
                let part = try await OriginFixture.fetch(client, base + "/seg.ts", headers: [("Range", header)])
                #expect(part.status == 206)
                #expect(part.body == Array(content[expected]))
                #expect(part.header("Content-Range") == "bytes \(expected.lowerBound)-\(expected.upperBound - 1)/\(Self.size)")
                #expect(part.header("Content-Length") == "\(expected.count)")
            }
        }
    }

    @Test(arguments: ["bytes=10000-", "bytes=20000-30000", "bytes=-0"])
    func refusesUnsatisfiableRanges(header: String) async throws {
        try await Self.withServedFiles { base, _ in
            try await OriginFixture.withClient { client in
                let refused = try await OriginFixture.fetch(client, base + "/seg.ts", headers: [("Range", header)])
                #expect(refused.status == 416)
                #expect(refused.header("Content-Range") == "bytes */\(Self.size)")
                #expect(refused.body.isEmpty)
            }
        }
    }

    @Test(arguments: ["bytes=0-9,20-29", "items=0-9", "bytes=50-40", "bytes=abc-", "bytes=+1-2"])
    func servesTheWholeFileForRangesItIgnores(header: String) async throws {
        try await Self.withServedFiles { base, content in
            try await OriginFixture.withClient { client in
                let whole = try await OriginFixture.fetch(client, base + "/seg.ts", headers: [("Range", header)])
                #expect(whole.status == 200)
                #expect(whole.body == content)
                #expect(whole.header("Content-Range") == nil)
            }
        }
    }

    @Test func honoursIfRangeOnlyWhileTheFileIsUnchanged() async throws {
        try await Self.withServedFiles { base, content in
            try await OriginFixture.withClient { client in
                let head = try await OriginFixture.fetch(client, base + "/seg.ts", method: "HEAD")
                let etag = try #require(head.header("ETag"))
                let lastModified = try #require(head.header("Last-Modified"))

                let matching = try await OriginFixture.fetch(client, base + "/seg.ts", headers: [("Range", "bytes=10-19"), ("If-Range", etag)])
                #expect(matching.status == 206)
                #expect(matching.body == Array(content[10..<20]))

                let byDate = try await OriginFixture.fetch(
                    client,
                    base + "/seg.ts",
                    headers: [("Range", "bytes=10-19"), ("If-Range", lastModified)]
                )
                #expect(byDate.status == 206)

                let stale = try await OriginFixture.fetch(
                    client,
                    base + "/seg.ts",
                    headers: [("Range", "bytes=10-19"), ("If-Range", "\"not-the-etag\"")]
                )
                #expect(stale.status == 200)
                #expect(stale.body == content)

                let weak = try await OriginFixture.fetch(client, base + "/seg.ts", headers: [("Range", "bytes=10-19"), ("If-Range", "W/" + etag)])
                #expect(weak.status == 200)
            }
        }
    }

    @Test func answersHeadWithoutABody() async throws {
        try await Self.withServedFiles { base, _ in
            try await OriginFixture.withClient { client in
                let head = try await OriginFixture.fetch(client, base + "/seg.ts", method: "HEAD")
                #expect(head.status == 200)
                #expect(head.body.isEmpty)
                #expect(head.header("Content-Length") == "\(Self.size)")
                #expect(head.header("Accept-Ranges") == "bytes")

                let ranged = try await OriginFixture.fetch(client, base + "/seg.ts", method: "HEAD", headers: [("Range", "bytes=0-99")])
                #expect(ranged.status == 206)
                #expect(ranged.header("Content-Length") == "100")
                #expect(ranged.body.isEmpty)
            }
        }
    }

    @Test func refusesOtherMethodsAndMissingFiles() async throws {
        try await Self.withServedFiles { base, _ in
            try await OriginFixture.withClient { client in
                let post = try await OriginFixture.fetch(client, base + "/seg.ts", method: "POST")
                #expect(post.status == 405)
                #expect(post.header("Allow") == "GET, HEAD")
                #expect(try await OriginFixture.fetch(client, base + "/nope.ts").status == 404)
                #expect(try await OriginFixture.fetch(client, base + "/a%20b").status == 404)
                #expect(try await OriginFixture.fetch(client, base + "/").status == 404)
            }
        }
    }

    @Test(
        arguments: [
            ("index.m3u8", "application/vnd.apple.mpegurl"),
            ("SEG.TS", "video/mp2t"),
            ("init.mp4", "video/mp4"),
            ("part.m4s", "video/mp4"),
            ("audio.m4a", "video/mp4"),
            ("video.m4v", "video/mp4"),
            ("audio.aac", "audio/aac"),
            ("subs.vtt", "text/vtt"),
            ("content.key", "application/octet-stream"),
            ("content.bin", "application/octet-stream"),
            ("notes.txt", "application/octet-stream"),
            ("noextension", "application/octet-stream"),
        ]
    )
    func sendsContentTypesByExtension(fileName: String, contentType: String) async throws {
        let root = try OriginFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        try Data("x".utf8).write(to: root.appendingPathComponent(fileName))
        try await OriginFixture.withOrigin(.init(root: root.path)) { base in
            try await OriginFixture.withClient { client in
                let response = try await OriginFixture.fetch(client, base + "/" + fileName)
                #expect(response.status == 200)
                #expect(response.header("Content-Type") == contentType)
            }
        }
    }

    @Test func refusesToStartWithoutADirectory() async throws {
        let origin = Origin(configuration: .init(root: "/nonexistent/origin-root"))
        let error = await #expect(throws: OriginError.notADirectory("/nonexistent/origin-root")) {
            try await origin.run { _ in }
        }
        #expect(error?.code == "origin_root_invalid")
    }
}
