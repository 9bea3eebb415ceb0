import AsyncHTTPClient
import Foundation
import KeyDelivery
import KeyServer
import StowageCore
import StowageCrypto
import StowageTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// KeySession against the real KeyServerApplication on 127.0.0.1.
struct KeySessionTests {
    private func movieKeys() -> [String: SecretBytes] {
        Dictionary(uniqueKeysWithValues: zip(KeySessionFixture.movieKeyIDs, KeySessionFixture.movieKeys.map { SecretBytes(Hex.decode($0)!) }))
    }

    @Test func acquireRestartPlayRenewReturnAndRelease() async throws {
        let fixture = try await KeySessionFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        let start = fixture.clock.now
        let leaseId = try await fixture.withLiveServer { url in
            try await withHTTPClient { http in
                let session = try fixture.session(http, url: url, token: token)
                let acquired = try await session.acquire(assetId: "movie-1", keyIds: KeySessionFixture.movieKeyIDs, lease: .persistent)
                #expect(acquired.keys.isEmpty)
                #expect(acquired.record?.state == .persisted)
                #expect(acquired.terms.storageExpiresAt == start + 30 * 86_400)
                // The server key is pinned for this key server's URL, and the lease records that URL.
                #expect(try session.store.pinnedServerKey(for: session.keyServer) == fixture.server.serverPublicKey)
                #expect(try session.store.lease(id: acquired.terms.leaseId)?.keyServer == session.keyServer)
                return acquired.terms.leaseId
            }
        }

        // Restart: reopen everything from the same directory, offline.
        fixture.clock.advance(by: 3_600)
        // A key server URL that refuses connections (a port held bound, not listening): nothing below may need one.
        let nowhere = try HeldPort()
        defer { nowhere.release() }
        try await withHTTPClient { http in
            let offline = try fixture.session(http, url: URL(string: "http://127.0.0.1:\(nowhere.port)")!, token: token)
            let evaluation = try offline.store.authorizePlayback(assetId: "movie-1", at: fixture.clock.now)
            #expect(evaluation.isValid)
            #expect(try offline.contentKeys(leaseId: leaseId) == movieKeys())
        }

        // Renew a day later (inside the 48-hour playback window: a lease whose window closed is erased when the store
        // opens, before anything could renew it), then return; the release reaches the server.
        fixture.clock.advance(by: 86_400)
        try await fixture.withLiveServer { url in
            try await withHTTPClient { http in
                let session = try fixture.session(http, url: url, token: token)
                let renewed = try await session.renew(leaseId: leaseId)
                #expect(renewed.leaseId == leaseId)
                #expect(renewed.terms.storageExpiresAt == fixture.clock.now + 30 * 86_400)
                #expect(renewed.firstPlayedAt == start + 3_600)
                #expect(try session.store.timeHighWaterMark().mark == fixture.clock.now)
                #expect(try session.contentKeys(leaseId: leaseId) == movieKeys())

                let (returned, sync) = try await session.returnAsset(assetId: "movie-1")
                #expect(returned.map(\.leaseId) == [leaseId])
                #expect(sync.released == [leaseId])
                #expect(sync.isComplete)
                #expect(try session.store.pendingReleases().isEmpty)
                #expect(try session.store.lease(id: leaseId)?.state == .released)
                #expect(try session.store.lease(id: leaseId)?.hasKeyMaterial == false)
                #expect(throws: KeySessionError.self) { try session.contentKeys(leaseId: leaseId) }

                // Idempotent: nothing left to send, and the server refuses to renew a released lease.
                #expect(try await session.sync() == KeySession.SyncReport())
                let error = await #expect(throws: KeySessionError.self) { try await session.renew(leaseId: leaseId) }
                #expect(error?.protocolCode == .leaseExpired)
            }
        }
        #expect(try fixture.openClient().0.verifyAuditJournal().isIntact)
    }

    /// The key server saves a lease and the answer never arrives (a proxy closes the connection once the server has
    /// answered): the session asks again with a fresh request, stores the second lease, and the server has released the
    /// first as superseded, so the device holds one lease and one slot.
    @Test func aKeyAnswerLostAfterTheServerSavedItIsAskedForAgain() async throws {
        let fixture = try await KeySessionFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        try await fixture.withLiveServer { url in
            let proxy = try await AnswerDroppingProxy.start(upstream: url, dropPrefix: "POST /v1/keys ", drop: 1)
            do {
                try await withHTTPClient { http in
                    let session = try fixture.session(http, url: proxy.url, token: token)
                    let acquired = try await session.acquire(assetId: "movie-1", keyIds: KeySessionFixture.movieKeyIDs, lease: .persistent)
                    #expect(proxy.dropped == 1)
                    #expect(try session.store.leases().map(\.leaseId) == [acquired.terms.leaseId])

                    let audit = try await fixture.directory.openStore().auditRecords(limit: 50)
                    let issued = audit.filter { $0.event == .issued && $0.operation == "keys" }.compactMap(\.leaseID)
                    #expect(issued.count == 2 && issued.contains(acquired.terms.leaseId), "\(issued)")
                    let lost = try #require(issued.first { $0 != acquired.terms.leaseId })
                    let superseded = audit.first { $0.event == .released && $0.leaseID == lost }
                    #expect(superseded?.detail?.contains("superseded by lease \(acquired.terms.leaseId)") == true, "\(audit)")
                }
            } catch {
                await proxy.stop()
                throw error
            }
            await proxy.stop()
        }
    }

    /// A key server that cannot be reached at all is told apart from an answer lost after the request went out: only
    /// the latter is marked `answerMayBeLost`, which is what `acquire` asks again for (nothing was sent, so nothing can
    /// have been saved).
    @Test func aRefusedConnectionIsNotTakenForALostAnswer() async throws {
        let fixture = try await KeySessionFixture.make()
        defer { fixture.remove() }
        let held = try HeldPort()
        defer { held.release() }
        try await withHTTPClient { http in
            let session = try fixture.session(http, url: URL(string: "http://127.0.0.1:\(held.port)")!, token: try await fixture.token())
            let error = await #expect(throws: KeySessionError.self) {
                try await session.acquire(assetId: "movie-1", keyIds: KeySessionFixture.movieKeyIDs, lease: .persistent)
            }
            #expect(error?.code == "key_server_unreachable" && error?.answerMayBeLost == false)
        }
    }

    /// The key server's SQLite database held locked (another process in an exclusive transaction) past the server's 5 s
    /// busy timeout: the request that waits is answered `500 internal`, marked as an answer that may be lost (which
    /// `acquire` asks again for); once the lock is gone, the same device is served.
    @Test func aKeyServerDatabaseLockedPastItsBusyTimeoutIsAnsweredAndThenServed() async throws {
        let fixture = try await KeySessionFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        try await fixture.withLiveServer { url in
            try await withHTTPClient { http in
                let session = try fixture.session(http, url: url, token: token)
                try await session.checkServerKey()  // pinned before the lock: the lock is what the key request meets
                let database = fixture.directory.path(of: KeyServerDataDirectory.databaseFile)
                let release = fixture.root.appendingPathComponent("release-lock")
                // Held until the test says so (a file appears), at most 120 s.
                let holder = try ProcessRunner.start(
                    URL(fileURLWithPath: "/usr/bin/env"),
                    [
                        "python3", "-c",
                        """
                        import os, sqlite3, sys, time
                        connection = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
                        connection.execute("BEGIN EXCLUSIVE")
                        print("locked", flush=True)
                        for _ in range(2400):
                            if os.path.exists(sys.argv[2]):
                                break
                            time.sleep(0.05)
                        connection.execute("COMMIT")
                        print("released", flush=True)
                        """,
                        database, release.path,
                    ]
                )
                for _ in 0..<400 where !String(decoding: (try? holder.standardOutput()) ?? Data(), as: UTF8.self).contains("locked") {
                    try await Task.sleep(for: .milliseconds(25))
                }
                let refused = await #expect(throws: KeySessionError.self) {
                    _ = try await session.requestKeys(assetId: "movie-1", keyIds: KeySessionFixture.movieKeyIDs, lease: .persistent)
                }
                #expect(refused?.code == "internal" && refused?.httpStatus == 500 && refused?.answerMayBeLost == true)
                try Data().write(to: release)
                let output = try await holder.waitForExit(timeout: .seconds(60))
                #expect(String(decoding: output.standardOutput, as: UTF8.self).contains("released"))
                let acquired = try await session.acquire(assetId: "movie-1", keyIds: KeySessionFixture.movieKeyIDs, lease: .persistent)
                #expect(acquired.record?.state == .persisted)
            }
        }
    }

    /// Runs `body` against a key server that allows `maxClockSkew`, with sessions whose device clock is the given number
    /// of seconds off the server's, all on one key store.
    static func withSkewedClocks(
        maxClockSkew: Int64,
        _ body: (_ session: (Int64) -> KeySession, _ store: KeyStore) async throws -> Void
    ) async throws {
        let fixture = try await KeySessionFixture.make(maxClockSkew: maxClockSkew)
        defer { fixture.remove() }
        let token = try await fixture.token()
        try await fixture.withLiveServer { url in
            try await withHTTPClient { http in
                let (store, device) = try fixture.openClient()
                try await body(
                    { offset in
                        KeySession(
                            clock: TestClock(now: fixture.clock.now + offset),
                            http: http,
                            store: store,
                            device: device,
                            serverURL: url,
                            token: token
                        )
                    },
                    store
                )
            }
        }
    }

    /// What acquiring the movie's keys throws, if anything.
    static func acquisitionError(_ session: KeySession) async -> KeySessionError? {
        await #expect(throws: KeySessionError.self) {
            try await session.acquire(assetId: "movie-1", keyIds: KeySessionFixture.movieKeyIDs, lease: .persistent)
        }
    }

    /// A device whose clock is hours off the key server's is refused by the server (`clock_skew`, a request that far
    /// from the server's time could be a replay) before anything is stored, and told by how much.
    @Test func aClockHoursBehindTheServersIsToldBeforeAnythingIsStored() async throws {
        try await Self.withSkewedClocks(maxClockSkew: 300) { session, store async throws in
            let behind = await Self.acquisitionError(session(-3 * 3_600))
            #expect(behind?.code == "clock_skew" && behind?.message.contains("3 h behind") == true, "\(behind?.message ?? "")")
            let ahead = await Self.acquisitionError(session(3 * 3_600))
            #expect(ahead?.code == "clock_skew" && ahead?.message.contains("3 h ahead") == true, "\(ahead?.message ?? "")")
            #expect(try store.leases().isEmpty)
        }
    }

    /// A device whose clock is hours behind the key server's, against a server that allows that much skew, is told so
    /// before anything is stored: a stored lease would be judged against its payload's serverTime and refused at once as
    /// a rolled-back clock. Hours ahead is no such trap.
    @Test func aClockHoursBehindALenientServersIsToldBeforeAnythingIsStored() async throws {
        try await Self.withSkewedClocks(maxClockSkew: 43_200) { session, store in
            // A key server that allows 12 hours of skew answers; the payload's serverTime gives the device's clock away.
            let behind = await Self.acquisitionError(session(-3 * 3_600))
            #expect(behind?.code == "clock_behind" && behind?.message.contains("3 h") == true, "\(behind?.message ?? "")")
            #expect(try store.leases().isEmpty)
            let ahead = session(3 * 3_600)
            _ = try await ahead.acquire(assetId: "movie-1", keyIds: KeySessionFixture.movieKeyIDs, lease: .persistent)
            #expect(try store.authorizePlayback(assetId: "movie-1", at: ahead.clock.now).isValid)
        }
    }

    @Test func streamingKeysStayInMemory() async throws {
        let fixture = try await KeySessionFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        try await fixture.withLiveServer { url in
            try await withHTTPClient { http in
                let session = try fixture.session(http, url: url, token: token)
                let acquired = try await session.acquire(assetId: "live", keyIds: [KeySessionFixture.liveKeyID], lease: .streaming)
                #expect(acquired.record == nil)
                #expect(acquired.keys == [KeySessionFixture.liveKeyID: SecretBytes(Hex.decode(KeySessionFixture.liveKey)!)])
                #expect(!acquired.description.contains(KeySessionFixture.liveKey))
                #expect(try session.store.leases().isEmpty)
            }
        }
    }

    @Test func aTamperedPayloadIsRefusedBeforeStorage() async throws {
        let fixture = try await KeySessionFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        try await fixture.withLiveServer { url in
            try await withHTTPClient { http in
                let session = try fixture.session(http, url: url, token: token)
                let (request, signed) = try await session.requestKeys(assetId: "movie-1", keyIds: KeySessionFixture.movieKeyIDs, lease: .persistent)
                // Extend the storage window in the payload; the signature no longer matches.
                let bytes = StrictBase64.decode(signed.payload)!
                let text = String(decoding: bytes, as: UTF8.self)
                let tampered = text.replacingOccurrences(of: #""storageExpiresAt":"#, with: #""storageExpiresAt":9"#)
                #expect(tampered != text)
                let forged = SignedPayload(payload: StrictBase64.encode(Array(tampered.utf8)), signature: signed.signature)
                let error = await #expect(throws: KeySessionError.self) { try await session.accept(forged, for: request) }
                #expect(error?.code == "invalid_payload")
                #expect(try session.store.leases().isEmpty)

                // A genuine payload for another request (nonce echo) is refused too.
                let (_, other) = try await session.requestKeys(assetId: "movie-1", keyIds: KeySessionFixture.movieKeyIDs, lease: .persistent)
                let mismatch = await #expect(throws: KeySessionError.self) { try await session.accept(other, for: request) }
                #expect(mismatch?.code == "payload_mismatch")
                #expect(try session.store.leases().isEmpty)

                // The genuine answer is accepted.
                _ = try await session.accept(signed, for: request)
                #expect(try session.store.leases().count == 1)
            }
        }
    }

    @Test func aServerPresentingAnotherSigningKeyThanItsPinIsRefused() async throws {
        let fixture = try await KeySessionFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        try await fixture.withLiveServer { url in
            try await withHTTPClient { http in
                _ = try await fixture.session(http, url: url, token: token)
                    .acquire(assetId: "movie-1", keyIds: KeySessionFixture.movieKeyIDs, lease: .persistent)
            }
        }
        // Another server (another signing key) with the same asset, at a URL for which the first server's key is pinned:
        // the position a DNS or network attacker is in.
        let impostor = try await KeySessionFixture.make()
        defer { impostor.remove() }
        let impostorToken = try await impostor.token()
        try await impostor.withLiveServer { url in
            try await withHTTPClient { http in
                let session = try fixture.session(http, url: url, token: impostorToken)
                try session.store.pin(fixture.server.serverPublicKey, for: session.keyServer, at: fixture.clock.now)
                let error = await #expect(throws: KeyStoreError.self) {
                    try await session.acquire(assetId: "movie-1", keyIds: KeySessionFixture.movieKeyIDs, lease: .persistent)
                }
                #expect(error?.code == "server_key_mismatch")
                #expect(error?.message.contains(session.keyServer) == true)
                let check = await #expect(throws: KeyStoreError.self) { try await session.checkServerKey() }
                #expect(check?.code == "server_key_mismatch")
                #expect(try session.store.leases().count == 1)
                #expect(try session.store.pinnedServerKey(for: session.keyServer) == fixture.server.serverPublicKey)
            }
        }
    }

    @Test func aQueuedReleaseSurvivesARestartWhileTheServerIsDown() async throws {
        let fixture = try await KeySessionFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        // Releases go to the key server the lease came from, so the server goes down and comes back on its own port.
        // While it is down the port is held bound but not listening, so no other test's server can take it over.
        let (leaseId, url) = try await fixture.withLiveServer { url in
            try await withHTTPClient { http in
                let acquired = try await fixture.session(http, url: url, token: token)
                    .acquire(assetId: "movie-1", keyIds: KeySessionFixture.movieKeyIDs, lease: .persistent)
                return (acquired.terms.leaseId, url)
            }
        }
        let closed = try HeldPort(port: fixture.port)
        try await withHTTPClient { http in
            let session = try fixture.session(http, url: url, token: token, timeoutSeconds: 2)
            let (returned, sync) = try await session.returnAsset(assetId: "movie-1")
            #expect(returned.count == 1)
            #expect(sync.released.isEmpty)
            #expect(sync.failed[leaseId]?.hasPrefix("key_server_unreachable") == true)
            #expect(try await session.sync().failed.count == 1)
        }
        closed.release()
        // Restart the client: still queued, with its attempts recorded.
        let pending = try fixture.openClient().0.pendingReleases()
        #expect(pending.map(\.leaseId) == [leaseId])
        #expect(pending.first?.attempts == 2)
        #expect(pending.first?.lastError?.hasPrefix("key_server_unreachable") == true)
        // The server is up again: the release goes out once.
        try await fixture.withLiveServer { url in
            try await withHTTPClient { http in
                let session = try fixture.session(http, url: url, token: token)
                #expect(try await session.sync().released == [leaseId])
                #expect(try await session.sync().released.isEmpty)
                #expect(try session.store.lease(id: leaseId)?.state == .released)
            }
        }
    }

    /// A key server that sends its answer's head and then trickles the body, a byte every 50 ms, never finishing: the
    /// whole exchange is bounded by the session's timeout (the client's read timeout alone restarts with every byte).
    @Test func anAnswerTrickledInIsCutOffAtTheSessionTimeout() async throws {
        let fixture = try await KeySessionFixture.make()
        defer { fixture.remove() }
        let server = try RawHTTPResponder(
            head: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000",
            budget: 400,
            pace: .milliseconds(50)
        )
        defer { server.stop() }
        try await withHTTPClient { http in
            let session = try fixture.session(http, url: URL(string: "http://127.0.0.1:\(server.port)")!, token: nil, timeoutSeconds: 2)
            let error = await #expect(throws: KeySessionError.self) { try await session.checkServerKey() }
            #expect(error?.code == "key_server_unreachable")
            #expect(error?.message.contains("no complete answer within 2 s") == true, "\(error?.message ?? "")")
        }
    }

    /// A hostile key server answers 403 with a body larger than any key server sends (red team, round 5): it is
    /// refused after the limit, and the error says the status the server gave, not another.
    @Test func anOversizedAnswerKeepsItsStatus() async throws {
        let fixture = try await KeySessionFixture.make()
        defer { fixture.remove() }
        let server = try RawHTTPResponder(
            head: "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: 3000000",
            budget: 3_000_000
        )
        defer { server.stop() }
        try await withHTTPClient { http in
            let session = try fixture.session(http, url: URL(string: "http://127.0.0.1:\(server.port)")!, token: nil, timeoutSeconds: 10)
            let error = await #expect(throws: KeySessionError.self) { try await session.checkServerKey() }
            #expect(error?.code == "unexpected_response")
            #expect(error?.httpStatus == 403)
            #expect(error?.message.contains("HTTP 403") == true, "\(error?.message ?? "")")
        }
    }

    @Test func protocolErrorsAreSurfacedWithTheirCodes() async throws {
        let fixture = try await KeySessionFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        let movieOnly = try await fixture.token(assets: ["movie-1"])
        try await fixture.withLiveServer { url in
            try await withHTTPClient { http in
                let cases: [(String, String?, String, KeyProtocolErrorCode, Int)] = [
                    ("unknown asset", token, "nope", .unknownAsset, 404),
                    ("not entitled", movieOnly, "live", .notEntitled, 403),
                    ("no token", nil, "movie-1", .invalidToken, 401),
                    ("bad token", "x.y.z", "movie-1", .invalidToken, 401),
                ]
                for (name, bearer, asset, code, status) in cases {
                    let session = try fixture.session(http, url: url, token: bearer)
                    let keyIds = asset == "live" ? [KeySessionFixture.liveKeyID] : KeySessionFixture.movieKeyIDs
                    let error = await #expect(throws: KeySessionError.self, "\(name)") {
                        try await session.acquire(assetId: asset, keyIds: keyIds, lease: asset == "live" ? .streaming : .persistent)
                    }
                    #expect(error?.protocolCode == code, "\(name)")
                    #expect(error?.httpStatus == status, "\(name)")
                    #expect(error?.message.isEmpty == false, "\(name)")
                }
                let session = try fixture.session(http, url: url, token: token)
                let unknown = await #expect(throws: KeySessionError.self) {
                    try await session.acquire(assetId: "movie-1", keyIds: ["ffffffffffffffffffffffffffffffff"], lease: .persistent)
                }
                #expect(unknown?.protocolCode == .unknownKey)
            }
        }
    }

    @Test func noContentKeyBytesOnDisk() async throws {
        let fixture = try await KeySessionFixture.make()
        defer { fixture.remove() }
        let token = try await fixture.token()
        try await fixture.withLiveServer { url in
            try await withHTTPClient { http in
                let session = try fixture.session(http, url: url, token: token)
                let acquired = try await session.acquire(assetId: "movie-1", keyIds: KeySessionFixture.movieKeyIDs, lease: .persistent)
                _ = try await session.acquire(assetId: "live", keyIds: [KeySessionFixture.liveKeyID], lease: .streaming)
                _ = try session.store.authorizePlayback(assetId: "movie-1", at: fixture.clock.now)
                #expect(try session.contentKeys(leaseId: acquired.terms.leaseId) == movieKeys())
                _ = try await session.renew(leaseId: acquired.terms.leaseId)
            }
        }
        let enumerator = FileManager.default.enumerator(at: fixture.clientDirectory, includingPropertiesForKeys: nil)
        let files = (enumerator?.allObjects as? [URL] ?? []).filter { !$0.hasDirectoryPath }
        #expect(files.contains { $0.lastPathComponent == KeyStore.databaseFileName })
        for file in files {
            let bytes = try Data(contentsOf: file)
            for key in KeySessionFixture.allContentKeys {
                for needle in [key, Array(Hex.encode(key).utf8), Array(Hex.encode(key).uppercased().utf8), Array(StrictBase64.encode(key).utf8)] {
                    #expect(bytes.range(of: Data(needle)) == nil, "content key found in \(file.lastPathComponent)")
                }
            }
        }
    }
}
