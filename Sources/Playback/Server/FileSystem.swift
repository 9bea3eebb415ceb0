import Foundation
import OfflinePackage

#if canImport(Glibc)
import Glibc
#endif

/// The few file operations playback needs, on plain descriptors: bounded reads, never a whole segment in memory.
enum FileSystem {
    /// The read size when streaming or hashing a file.
    static let chunkSize = 256 * 1024

    static func exists(_ url: URL) -> Bool {
        var info = stat()
        return stat(url.path, &info) == 0
    }

    /// The size of a regular file, nil when there is none.
    static func size(of url: URL) -> Int64? {
        var info = stat()
        guard stat(url.path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    /// What identifies a file's content without reading it: device, inode, size and change time. A write to the file
    /// changes `st_ctime`, which no user can set back, so an unchanged identity means unchanged bytes.
    struct Identity: Hashable, Sendable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var changedSeconds: Int64
        var changedNanoseconds: Int64
    }

    /// The identity of the open file `descriptor`, nil when it cannot be told.
    static func identity(of descriptor: Int32) -> Identity? {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        return Identity(
            device: UInt64(info.st_dev),
            inode: UInt64(info.st_ino),
            size: Int64(info.st_size),
            changedSeconds: Int64(info.st_ctim.tv_sec),
            changedNanoseconds: Int64(info.st_ctim.tv_nsec)
        )
    }

    /// The lowercase hex SHA-256 of a file, read a chunk at a time (``ChunkedFile``); nil when it cannot be read.
    static func sha256(of url: URL) -> String? {
        (try? ChunkedFile.sha256(of: url))?.sha256
    }
}
