import AsyncHTTPClient
import Foundation
import HLS
import KeyDelivery
import KeyServer
import StowageCore
import StowageCrypto
import Testing

/// PlaylistKeySelection (pure), and one acquisition for a rotating asset against the real key server.
struct PlaylistKeySelectionTests {
    static let keyA = "000102030405060708090a0b0c0d0e0f"
    static let keyB = "101112131415161718191a1b1c1d1e1f"

    static func skd(_ asset: String, _ keyId: String, method: EncryptionMethod = .sampleAES) -> EncryptionKey {
        EncryptionKey(method: method, uri: "skd://\(asset)/\(keyId)", keyFormat: "com.stowage.skd", keyFormatVersions: "1")
    }

    static func identity(_ uri: String, explicit: Bool = false) -> EncryptionKey {
        EncryptionKey(method: .aes128, uri: uri, keyFormat: explicit ? "identity" : nil)
    }

    @Test func skdOnly() throws {
        let selection = try PlaylistKeySelection.select([Self.skd("movie-1", Self.keyA), Self.skd("movie-1", Self.keyB)])
        #expect(selection.assetId == "movie-1")
        #expect(selection.skdKeyIds == [Self.keyA, Self.keyB])
        #expect(selection.identityKeyURLs.isEmpty)
    }

    @Test func identityOnlyResolvesRelativeURIs() throws {
        let selection = try PlaylistKeySelection.select(
            [Self.identity("https://keys.example.com/k1"), Self.identity("k2.bin", explicit: true), Self.identity("https://keys.example.com/k1")],
            assetId: "movie-1",
            baseURL: URL(string: "https://cdn.example.com/movie/video.m3u8")
        )
        #expect(selection.assetId == "movie-1")
        #expect(selection.skdKeyIds.isEmpty)
        #expect(selection.identityKeyURLs.map(\.absoluteString) == ["https://keys.example.com/k1", "https://cdn.example.com/movie/k2.bin"])
    }

    @Test func bothFormatsOnOneKeyLineSetPickSKD() throws {
        let selection = try PlaylistKeySelection.select([
            Self.skd("movie-1", Self.keyA), Self.identity("https://keys.example.com/v1/identity/movie-1/\(Self.keyA)"),
            Self.skd("movie-1", Self.keyB), Self.identity("https://keys.example.com/v1/identity/movie-1/\(Self.keyB)"),
        ])
        #expect(selection.skdKeyIds == [Self.keyA, Self.keyB])
        #expect(selection.identityKeyURLs.isEmpty)

        // With explicit sets, a set without skd falls back to identity.
        let mixed = try PlaylistKeySelection.select(keySets: [
            [Self.identity("https://k.example.com/a"), Self.skd("movie-1", Self.keyA)],
            [Self.identity("https://k.example.com/b")],
        ])
        #expect(mixed.skdKeyIds == [Self.keyA])
        #expect(mixed.identityKeyURLs.map(\.absoluteString) == ["https://k.example.com/b"])
    }

    @Test func methodNoneIsIgnored() throws {
        let selection = try PlaylistKeySelection.select([
            EncryptionKey(method: .none), Self.skd("movie-1", Self.keyA), EncryptionKey(method: .none),
        ])
        #expect(selection.skdKeyIds == [Self.keyA])
        #expect(try PlaylistKeySelection.select([EncryptionKey(method: .none)]).isEmpty)
    }

    @Test func unsupportedFormatNamesTheFormatsSeen() throws {
        let keys = [
            EncryptionKey(method: .sampleAES, uri: "skd://fairplay", keyFormat: "com.apple.streamingkeydelivery"),
            EncryptionKey(method: .sampleAES, uri: "data:text/plain;base64,AAAA", keyFormat: "urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed"),
        ]
        let error = #expect(throws: KeySessionError.self) { try PlaylistKeySelection.select(keys) }
        #expect(error?.code == "unsupported_key_format")
        #expect(error?.message.contains("com.apple.streamingkeydelivery") == true)
        #expect(error?.message.contains("urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed") == true)
        // An identity URI that is not http(s) is refused too.
        let bad = #expect(throws: KeySessionError.self) {
            try PlaylistKeySelection.select([Self.identity("ftp://keys.example.com/k")], assetId: "movie-1")
        }
        #expect(bad?.code == "malformed_key_uri")
    }

    @Test(arguments: [
        "skd://movie-1", "skd://movie-1/\(keyA)/extra", "skd://movie 1/\(keyA)", "skd://movie-1/000102030405060708090A0B0C0D0E0F",
        "skd://movie-1/0001", "https://movie-1/\(keyA)", "skd:///\(keyA)",
    ])
    func malformedSKDURI(_ uri: String) throws {
        let key = EncryptionKey(method: .sampleAES, uri: uri, keyFormat: "com.stowage.skd")
        let error = #expect(throws: KeySessionError.self) { try PlaylistKeySelection.select([key]) }
        #expect(error?.code == "malformed_key_uri")
    }

    @Test func otherAssetIsRefused() throws {
        let given = #expect(throws: KeySessionError.self) {
            try PlaylistKeySelection.select([Self.skd("movie-2", Self.keyA)], assetId: "movie-1")
        }
        #expect(given?.code == "key_for_other_asset")
        let mixed = #expect(throws: KeySessionError.self) {
            try PlaylistKeySelection.select([Self.skd("movie-1", Self.keyA), Self.skd("movie-2", Self.keyB)])
        }
        #expect(mixed?.code == "key_for_other_asset")
    }

    /// Three rotating skd keys: one POST /v1/keys carrying the three key IDs, one lease holding the three keys.
    @Test func rotationIsOneAcquisition() async throws {
        let fixture = try await KeySessionFixture.make()
        defer { fixture.remove() }
        let thirdKeyID = "202122232425262728292a2b2c2d2e2f"
        let thirdKey = "5f5e5d5c5b5a59585756555453525150"
        try await fixture.directory.addAsset(id: "movie-1", keyID: thirdKeyID, key: SecretBytes(Hex.decode(thirdKey)!), clock: fixture.serverClock)
        let keyIds = KeySessionFixture.movieKeyIDs + [thirdKeyID]
        let token = try await fixture.token()
        try await fixture.withLiveServer { url in
            try await withHTTPClient { http in
                let session = try fixture.session(http, url: url, token: token)
                let result = try await session.acquireKeys(
                    for: keyIds.map { Self.skd("movie-1", $0) } + [EncryptionKey(method: .none)],
                    assetId: nil,
                    lease: .persistent
                )
                #expect(result.selection.skdKeyIds == keyIds)
                #expect(result.terms?.keyIds.sorted() == keyIds.sorted())
                #expect(result.identityKeyURIs.isEmpty)
                let leaseId = try #require(result.leaseId)
                let keys = try session.contentKeys(leaseId: leaseId)
                #expect(keys.count == 3)
                #expect(keys[thirdKeyID] == SecretBytes(Hex.decode(thirdKey)!))
                // One acquisition: one lease on the client.
                #expect(try session.store.leases(assetId: "movie-1").count == 1)
            }
        }
    }
}
