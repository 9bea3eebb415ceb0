import AsyncHTTPClient
import Foundation
import MediaCrypto
import NIOCore
import NIOHTTP1
import OfflinePackage
import PackageTestSupport
import Packaging
import StowageCrypto
import StowageTestSupport
import Testing

@testable import Playback

/// What a seeking player asks of the server: HEAD with the exact length, single byte ranges (206, 416, If-Range) of
/// every decrypted segment and init section, each equal to the same bytes of the whole response.
@Suite(.timeLimit(.minutes(5)))
struct PlaybackRangeTests {
    static let cases: [PackageCase] = [
        PackageCase(fixture: "ts-clear/index.m3u8", method: .sampleAES),
        PackageCase(fixture: "fmp4-clear/index.m3u8", method: .sampleAES),
        PackageCase(fixture: "ts-clear/index.m3u8", method: .aes128, rotationPeriod: 2),
        PackageCase(fixture: "fmp4-clear/index.m3u8", method: .aes128),
    ]

    @Test(arguments: cases)
    func everyRangeEqualsTheSameBytesOfTheWholeResponse(_ testCase: PackageCase) async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let clear = testCase.clear
        let package = try await testCase.make(in: root)
        let rendition = try #require(package.manifest.renditions.first)
        let files = rendition.initSections + rendition.segments.compactMap(\.file)
        #expect(files.count >= 3)
        // The clear twins of the segments, in order (made by ffmpeg, Fixtures/media/README.md).
        let twinNames = try String(contentsOf: clear, encoding: .utf8).split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
        let twins = Dictionary(
            uniqueKeysWithValues: zip(
                rendition.segments.compactMap(\.file?.path),
                twinNames.map { clear.deletingLastPathComponent().appendingPathComponent(String($0)) }
            )
        )
        if testCase.rotationPeriod != nil { #expect(Set(files.compactMap(\.key?.keyId)).count > 1) }

        // Small chunks, so that a range starts and ends inside chunks and cipher blocks alike.
        let configuration = PlaybackServer.Configuration(chunkSize: 4096)
        let (checked, _) = try await PlaybackHarness.withSession(package, configuration: configuration) { address in
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            var generator = SeededGenerator(seed: 0x5EED)
            var checked = 0
            do {
                for file in files {
                    let url = address.sessionURL.appendingPathComponent(file.path).absoluteString
                    let whole = try await Self.fetch(http, url)
                    #expect(whole.status == 200, "\(file.path)")
                    #expect(whole.headers["accept-ranges"] == ["bytes"])
                    let tag = try #require(whole.headers["etag"]?.first, "\(file.path) has no ETag")
                    let body = whole.body
                    #expect(whole.headers["content-length"] == ["\(body.count)"])
                    if testCase.method == .aes128, let twin = twins[file.path] {
                        // AES-128 decrypts whole segments: the served bytes are the clear twin's, made by ffmpeg.
                        #expect(body == Array(try Data(contentsOf: twin)), "\(file.path) differs from its clear twin")
                    }

                    let head = try await Self.fetch(http, url, method: .HEAD)
                    #expect(head.status == 200 && head.body.isEmpty)
                    #expect(head.headers["content-length"] == ["\(body.count)"], "HEAD of \(file.path)")

                    // Ten random ranges, plus the edges: the first byte, the last 17 (padding) and an open end.
                    var ranges: [(header: String, bytes: ClosedRange<Int>)] = (0..<10).map { _ in
                        let start = Int.random(in: 0..<body.count, using: &generator)
                        let end = Int.random(in: start..<min(body.count, start + 70_000), using: &generator)
                        return ("bytes=\(start)-\(end)", start...end)
                    }
                    ranges.append(("bytes=0-0", 0...0))
                    ranges.append(("bytes=-17", (body.count - 17)...(body.count - 1)))
                    ranges.append(("bytes=\(body.count / 2)-", (body.count / 2)...(body.count - 1)))
                    ranges.append(("bytes=\(body.count - 5)-\(body.count + 1_000)", (body.count - 5)...(body.count - 1)))
                    for (header, bytes) in ranges {
                        let part = try await Self.fetch(http, url, headers: [("Range", header)])
                        #expect(part.status == 206, "\(file.path) \(header)")
                        #expect(part.headers["content-range"] == ["bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(body.count)"])
                        #expect(part.headers["content-length"] == ["\(bytes.count)"])
                        #expect(part.body == Array(body[bytes]), "\(file.path) \(header)")
                        checked += 1
                    }

                    let beyond = try await Self.fetch(http, url, headers: [("Range", "bytes=\(body.count)-")])
                    #expect(beyond.status == 416)
                    #expect(beyond.headers["content-range"] == ["bytes */\(body.count)"])
                    // If-Range: the current tag honours the range; another one gets the whole file.
                    let current = try await Self.fetch(http, url, headers: [("Range", "bytes=10-19"), ("If-Range", tag)])
                    #expect(current.status == 206 && current.body == Array(body[10...19]))
                    let stale = try await Self.fetch(http, url, headers: [("Range", "bytes=10-19"), ("If-Range", "\"stale\"")])
                    #expect(stale.status == 200 && stale.body == body)
                }
            } catch {
                try await http.shutdown()
                throw error
            }
            try await http.shutdown()
            return checked
        }
        #expect(checked == files.count * 14)
        #expect(PlaybackHarness.logLines(package.package.errorLogURL).isEmpty)
        let access = PlaybackHarness.logLines(package.package.accessLogURL)
        #expect(access.contains { $0.contains(" 206 ") } && access.contains { $0.contains(" 416 ") })
    }

    @Test func aRangeOfAModifiedSegmentIsRefused() async throws {
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let package = try await TestPackages.make(
            clearPlaylist: TestPackages.mediaFixture("ts-clear/index.m3u8"),
            method: .aes128,
            assetId: "movie",
            in: root
        )
        let segment = try #require(package.manifest.renditions.first?.segments.first?.file)
        let (statuses, _) = try await PlaybackHarness.withSession(package) { address in
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            let url = address.sessionURL.appendingPathComponent(segment.path).absoluteString
            var statuses: [Int] = []
            do {
                // Served (and so hashed) once; then the file changes in place, same size: the next range is refused.
                statuses.append(try await Self.fetch(http, url, headers: [("Range", "bytes=100-199")]).status)
                try package.damage(segment.path, at: 1_000)
                // Long enough for the whole-file hash on a loaded machine: a client that gives up first would see a cut
                // response before the server has found (and logged) the mismatch.
                let after = try? await Self.fetch(http, url, headers: [("Range", "bytes=100-199")], timeout: 90)
                statuses.append(after.map { $0.body.count == 100 ? $0.status : -1 } ?? -1)
            } catch {
                try await http.shutdown()
                throw error
            }
            try await http.shutdown()
            return statuses
        }
        #expect(statuses == [206, -1])
        let errors = PlaybackHarness.logLines(package.package.errorLogURL)
        #expect(errors.contains { $0.contains("segment_checksum_mismatch") })
    }

    @Test func theCounterOfAnAESCTRRangeCarriesAcrossBytes() {
        let iv: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFE]
        #expect(SegmentStream.counter(iv, advancedBy: 0) == iv)
        #expect(SegmentStream.counter(iv, advancedBy: 1).suffix(2) == [0xFF, 0xFF])
        #expect(SegmentStream.counter(iv, advancedBy: 2).suffix(3) == [1, 0, 0])
        let top = [UInt8](repeating: 0xFF, count: 16)
        #expect(SegmentStream.counter(top, advancedBy: 1) == [UInt8](repeating: 0, count: 16))
        #expect(SegmentStream.counter([UInt8](repeating: 0, count: 16), advancedBy: 0x0102).suffix(2) == [1, 2])
    }

    @Test func aCTRRangeDecryptedFromItsBlockEqualsOpenSSL() async throws {
        // `openssl enc -aes-256-ctr` encrypts 4 KiB with a counter two blocks short of a carry into the next byte; a
        // range decrypted from block k with the counter advanced by k equals the plaintext there.
        let root = try PlaybackHarness.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let plain = (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let key = (0..<32).map { UInt8($0) }
        let iv: [UInt8] = [0x10, 0x20, 0x30, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFE]
        let input = root.appendingPathComponent("plain.bin")
        let output = root.appendingPathComponent("cipher.bin")
        try Data(plain).write(to: input)
        let hex = { (bytes: [UInt8]) in bytes.map { String(format: "%02x", $0) }.joined() }
        let result = try await ProcessRunner.run(
            program: "openssl",
            ["enc", "-aes-256-ctr", "-K", hex(key), "-iv", hex(iv), "-in", input.path, "-out", output.path]
        )
        #expect(result.status == 0)
        let cipher = Array(try Data(contentsOf: output))
        for block in [0, 1, 2, 3, 100, 255] {
            let decryptor = try WholeSegmentCipher(
                method: .aes256CTR,
                key: SecretBytes(key),
                iv: SegmentStream.counter(iv, advancedBy: Int64(block)),
                direction: .decrypt,
                segment: "range"
            )
            var decrypted: [UInt8] = []
            try decryptor.process(Array(cipher[(block * 16)...])) { decrypted += $0 }
            #expect(decrypted == Array(plain[(block * 16)...]), "from block \(block)")
        }
    }

    struct Fetched {
        var status: Int
        var headers: [String: [String]]
        var body: [UInt8]
    }

    static func fetch(
        _ http: HTTPClient,
        _ url: String,
        method: HTTPMethod = .GET,
        headers: [(String, String)] = [],
        timeout: Int64 = 20
    ) async throws -> Fetched {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await http.execute(request, timeout: .seconds(timeout))
        var fields: [String: [String]] = [:]
        for (name, value) in response.headers { fields[name.lowercased(), default: []].append(value) }
        let body = try await response.body.collect(upTo: 64 << 20)
        return Fetched(status: Int(response.status.code), headers: fields, body: Array(body.readableBytesView))
    }
}

/// A small deterministic generator (SplitMix64), so a failing range can be reproduced.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
