public import Foundation
public import StowageCore

#if canImport(Glibc)
import Glibc
#endif

extension ChunkedFile {
    /// The size and lowercase hex SHA-256 of the whole file.
    /// - Throws: ``FileReadError``.
    public static func sha256(of url: URL) throws(FileReadError) -> (size: Int64, sha256: String) {
        let file = try ChunkedFile(url)
        var hasher = SHA256Hasher()
        let size: Int64
        do {
            size = try file.forEachChunk { hasher.update($0) }
        } catch let error as FileReadError {
            throw error
        } catch {
            throw FileReadError(path: url.path, code: EIO)  // the body does not throw
        }
        return (size, Hex.encode(hasher.finalize()))
    }
}
