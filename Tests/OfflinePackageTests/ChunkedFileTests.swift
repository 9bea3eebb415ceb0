import Foundation
import OfflinePackage
import StowageCore
import Testing

/// The one chunked reader of package files (verification, `stowage decrypt`, playback).
struct ChunkedFileTests {
    @Test("read(count:at:) gives the bytes at the offset: a whole chunk, a chunk cut short by the end, none past it")
    func reads() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("chunked-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: url) }
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try Data(bytes).write(to: url)
        let file = try ChunkedFile(url)
        #expect(file.size == 100_000)
        #expect(try file.read(count: 65_536, at: 0) == Array(bytes[0..<65_536]))
        #expect(try file.read(count: 65_536, at: 65_536) == Array(bytes[65_536...]))
        #expect(try file.read(count: 10, at: 99_995) == Array(bytes[99_995...]))
        #expect(try file.read(count: 10, at: 100_000).isEmpty)
        #expect(try file.read(count: 0, at: 5).isEmpty)
    }

    @Test("a file that cannot be opened is a FileReadError naming it")
    func missing() {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("absent-\(UUID().uuidString)")
        let error = #expect(throws: FileReadError.self) { try ChunkedFile(url) }
        #expect(error.map { "\($0)".contains(url.lastPathComponent) } == true)
    }
}
