import Foundation
import StowageCore
import StowageTestSupport
import Testing

/// ``AtomicFile``: the old file or the new one, never a mix, and no temporary file left behind whatever happens.
@Suite("AtomicFile")
struct AtomicFileTests {
    /// A fresh folder, removed by the caller.
    static func folder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("atomic-file-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    static func names(in folder: URL) throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() }

    @Test("written in pieces and committed: the new contents replace the old, and only the file is left")
    func replaces() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("manifest.json").path
        try Data("old".utf8).write(to: URL(fileURLWithPath: path))
        let file = try AtomicFile(replacing: path)
        try file.write(Array("new ".utf8))
        // Until the commit, readers see the old file.
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "old")
        try file.write(Array("contents".utf8))
        try file.commit()
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "new contents")
        #expect(try Self.names(in: folder) == ["manifest.json"])
    }

    @Test("never committed (discarded, or simply let go): the old file stays and the temporary file is removed")
    func uncommitted() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("index.m3u8").path
        try Data("old".utf8).write(to: URL(fileURLWithPath: path))
        let discarded = try AtomicFile(replacing: path)
        try discarded.write(Array("half".utf8))
        #expect(try Self.names(in: folder).count == 2)
        discarded.discard()
        do {
            let dropped = try AtomicFile(replacing: path)
            try dropped.write(Array("half".utf8))
        }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "old")
        #expect(try Self.names(in: folder) == ["index.m3u8"])
    }

    @Test("commitIfAbsent creates a file once; the second is refused and changes nothing")
    func ifAbsent() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("secret").path
        let first = try AtomicFile(replacing: path, permissions: 0o600, exactly: true)
        try first.write([1, 2, 3])
        #expect(try first.commitIfAbsent())
        let second = try AtomicFile(replacing: path, permissions: 0o600, exactly: true)
        try second.write([9])
        #expect(try !second.commitIfAbsent())
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data([1, 2, 3]))
        #expect(try Self.names(in: folder) == ["secret"])
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test("a failing system call is told with its operation and errno, and leaves the old file and no temporary file")
    func failures() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // No folder to create the temporary file in.
        let missing = folder.appendingPathComponent("no-such-folder/file").path
        let create = #expect(throws: AtomicFile.Failure.self) { try AtomicFile(replacing: missing) }
        #expect(create?.operation == "create" && create?.errorNumber == ENOENT && create?.reason == "No such file or directory")
        // The path is a folder that is not empty: the rename fails.
        let busy = folder.appendingPathComponent("busy")
        try FileManager.default.createDirectory(at: busy, withIntermediateDirectories: true)
        try Data("kept".utf8).write(to: busy.appendingPathComponent("inside"))
        let rename = #expect(throws: AtomicFile.Failure.self) {
            try Array("new".utf8).withUnsafeBytes { bytes in
                try Result { () throws(AtomicFile.Failure) in try AtomicFile.replace(busy.path, with: bytes) }.get()
            }
        }
        #expect(rename?.operation == "rename" && rename?.path == busy.path, "\(String(describing: rename))")
        #expect(try Self.names(in: folder) == ["busy"])
        #expect(try Self.names(in: busy) == ["inside"])
    }

    @Test("leftovers of writers killed before their commit are removed; a live writer's and every other file are kept")
    func leftovers() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let dead = ProcessRunner.unusedProcessID()
        let names = [
            ".key-store.anchor.\(dead).12345.tmp",  // a writer killed mid-write
            ".manifest.json.\(dead).99.tmp",
            ".device.key.\(getpid()).7.tmp",  // this process: a writer still at work
            ".hidden.tmp", "x.\(dead).1.tmp", ".a.\(dead).notanumber.tmp", "manifest.json",
        ]
        for name in names { try Data("k".utf8).write(to: folder.appendingPathComponent(name)) }
        #expect(AtomicFile.removeLeftovers(in: folder.path) == 2)
        #expect(try Self.names(in: folder) == names.dropFirst(2).sorted())
    }
}
