import Foundation
import StowageCore
import Testing

/// `DirectoryListing` reads each name through `d_name`'s address. Copying the whole entry instead crashed the play
/// server (`LoopbackPeer`) when `/proc/PID/fd` listed hundreds of sockets: a name's record can end at the end of
/// `readdir`'s buffer, and the copy of the 256-byte field ran past it.
struct DirectoryListingTests {
    @Test("names of every length from 1 to 255 bytes, 1,530 of them, are listed exactly")
    func everyNameLength() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("listing-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        var expected: Set<String> = []
        for copy in 0..<6 {
            for length in 1...255 {
                let prefix = "\(copy)-"
                let name = prefix + String(repeating: "n", count: max(0, length - prefix.count))
                guard !expected.contains(name) else { continue }
                expected.insert(name)
                #expect(FileManager.default.createFile(atPath: root.appendingPathComponent(name).path, contents: nil))
            }
        }
        let listed = try #require(DirectoryListing.names(root.path))
        #expect(listed.count == expected.count && Set(listed) == expected)
        #expect(DirectoryListing.names(root.appendingPathComponent("absent").path) == nil)
    }

    @Test("this process's descriptors, with 600 more open, are listed from /proc/self/fd")
    func manyDescriptors() throws {
        var opened: [Int32] = []
        defer { for descriptor in opened { close(descriptor) } }
        for _ in 0..<600 { opened.append(open("/dev/null", O_RDONLY | O_CLOEXEC)) }
        #expect(opened.allSatisfy { $0 >= 0 })
        let listed = Set(try #require(DirectoryListing.names("/proc/self/fd")).compactMap { Int32($0) })
        #expect(Set(opened).isSubset(of: listed))
    }
}
