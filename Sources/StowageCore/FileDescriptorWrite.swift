#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one loop that writes a buffer whole to a file descriptor (segment jobs, transforms, downloads): `write` until
/// every byte is out, again after `EINTR`.
public enum FileDescriptorWrite {
    /// Writes all of `bytes` to `descriptor`.
    /// - Returns: nil once every byte is written; else the failed write's `errno` and the bytes written before it.
    public static func all(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) -> (errorNumber: Int32, written: Int)? {
        var offset = 0
        while offset < bytes.count {
            let count = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if count < 0 {
                if errno == EINTR { continue }
                return (errno, offset)
            }
            offset += count
        }
        return nil
    }
}
