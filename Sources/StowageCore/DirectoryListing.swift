#if canImport(Glibc)
import Glibc
#endif

/// The names in a directory, read with `readdir` through `d_name`'s address: never a copy of the whole `dirent`, whose
/// 256-byte `d_name` may run past the end of the buffer `readdir` filled (a record is only as long as its name), which
/// crashes with a bad pointer when that buffer ends at a page boundary, as `/proc/PID/fd` of a process with hundreds of
/// descriptors does. Foundation's directory listing has the same fault on Linux, hence this (`ChildProcess` lists
/// `/proc/self/fd` the same way, leaving out the listing's own descriptor).
public enum DirectoryListing {
    /// The names in `path`, `.` and `..` left out; nil when it cannot be opened.
    public static func names(_ path: String) -> [String]? {
        guard let directory = opendir(path) else { return nil }
        defer { closedir(directory) }
        let nameOffset = MemoryLayout<dirent>.offset(of: \.d_name)!
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = String(cString: (UnsafeRawPointer(entry) + nameOffset).assumingMemoryBound(to: CChar.self))
            if name != ".", name != ".." { names.append(name) }
        }
        return names
    }
}
