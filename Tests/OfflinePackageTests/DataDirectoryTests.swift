import Foundation
import OfflinePackage
import Testing

struct DataDirectoryTests {
    @Test func environmentPrecedence() {
        #expect(DataDirectory.fromEnvironment(["STOWAGE_HOME": "/a", "XDG_DATA_HOME": "/b", "HOME": "/c"]).url.path == "/a")
        #expect(DataDirectory.fromEnvironment(["XDG_DATA_HOME": "/b", "HOME": "/c"]).url.path == "/b/stowage")
        #expect(DataDirectory.fromEnvironment(["HOME": "/c"]).url.path == "/c/.local/share/stowage")
        #expect(DataDirectory.fromEnvironment(["STOWAGE_HOME": "", "HOME": "/c"]).url.path == "/c/.local/share/stowage")
    }

    @Test func prepareCreatesAnOwnerOnlyDirectory() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-dd-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = DataDirectory(url: root.appendingPathComponent("nested/home"))
        try directory.prepare()
        let mode = try FileManager.default.attributesOfItem(atPath: directory.url.path)[.posixPermissions] as? Int
        #expect(mode == 0o700)
        // An existing, too-open directory is tightened.
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.url.path)
        try directory.prepare()
        #expect(try FileManager.default.attributesOfItem(atPath: directory.url.path)[.posixPermissions] as? Int == 0o700)
        #expect(directory.databaseURL.lastPathComponent == "stowage.sqlite")
    }
}
