import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What kind of file a path is, as `lstat(2)` says (a FIFO is not one of FileManager's types).
public enum FileKinds {
    /// Whether `path` is a FIFO itself (not a link to one).
    public static func isFIFO(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFIFO
    }
}
