import Foundation
import Testing

@testable import OriginServer

/// Requests that try to leave the root, sent byte for byte so no client normalises them first.
struct PathSafetyTests {
    @Test func neverServesAnythingOutsideTheRoot() async throws {
        let parent = try OriginFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: parent) }
        let root = parent.appendingPathComponent("root")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("sub"), withIntermediateDirectories: true)
        try Data("secret".utf8).write(to: parent.appendingPathComponent("secret.txt"))
        try Data("inside".utf8).write(to: root.appendingPathComponent("sub/inside.ts"))
        try Data("top".utf8).write(to: root.appendingPathComponent("top.ts"))
        try FileManager.default.createSymbolicLink(
            at: root.appendingPathComponent("escape.txt"),
            withDestinationURL: parent.appendingPathComponent("secret.txt")
        )
        try FileManager.default.createSymbolicLink(
            at: root.appendingPathComponent("alias.ts"),
            withDestinationURL: root.appendingPathComponent("top.ts")
        )
        let attempts = [
            "/../secret.txt",
            "/sub/../../secret.txt",
            "/%2e%2e/secret.txt",
            "/%2E%2E/secret.txt",
            "/sub/%2e%2e/%2e%2e/secret.txt",
            "/sub/..%2f..%2fsecret.txt",
            "/sub%2f..%2f..%2fsecret.txt",
            "/..%5csecret.txt",
            "/%2e%2e%2fsecret.txt",
            "/sub/../top.ts",
            "/./top.ts",
            "//top.ts",
            "/sub//inside.ts",
            "/top.ts%00",
            "/top.ts%00.m3u8",
            "/%zz",
            "/escape.txt",
            "/sub",
            "/sub/",
            "/",
            "secret.txt",
            "http://example.com/../secret.txt",
        ]
        try await OriginFixture.withOrigin(.init(root: root.path)) { base in
            for target in attempts {
                let status = try await OriginFixture.rawStatus(base: base, requestTarget: target)
                #expect(status == 404 || status == 400, "\(target) answered \(status)")
            }
            // The same server does serve what is inside, including a link that stays inside.
            #expect(try await OriginFixture.rawStatus(base: base, requestTarget: "/sub/inside.ts") == 200)
            #expect(try await OriginFixture.rawStatus(base: base, requestTarget: "/alias.ts") == 200)
            #expect(try await OriginFixture.rawStatus(base: base, requestTarget: "/top.ts?x=/../secret.txt") == 200)
        }
    }

    @Test func decodesComponentsAfterSplitting() throws {
        #expect(try RequestPath(target: "/a%20b/seg%2Ets?q=1").components == ["a b", "seg.ts"])
        #expect(throws: RequestPath.Rejection.outsideRoot) { try RequestPath(target: "/a/%2e%2e/b") }
        #expect(throws: RequestPath.Rejection.outsideRoot) { try RequestPath(target: "/a//b") }
        #expect(throws: RequestPath.Rejection.outsideRoot) { try RequestPath(target: "/a/./b") }
        #expect(throws: RequestPath.Rejection.malformed) { try RequestPath(target: "/a%2fb") }
        #expect(throws: RequestPath.Rejection.malformed) { try RequestPath(target: "/a%00") }
        #expect(throws: RequestPath.Rejection.malformed) { try RequestPath(target: "/a%") }
        #expect(throws: RequestPath.Rejection.malformed) { try RequestPath(target: "a") }
    }
}
