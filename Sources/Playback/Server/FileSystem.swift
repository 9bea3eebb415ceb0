import Foundation
import OfflinePackage

#if canImport(Glibc)
import Glibc
import StowageCore
import StowageCrypto
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

    /// The lowercase hex SHA-256 of a file, read a chunk at a time (``ChunkedFile``); nil when it cannot be read.
    static func sha256(of url: URL) -> String? {
        (try? ChunkedFile.sha256(of: url))?.sha256
    }
}
