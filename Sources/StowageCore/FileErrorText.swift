import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A file operation's failure in a few plain words ("no such file or directory", "permission denied", "no space
/// left on the device"), for the middle of an error message. Foundation's own descriptions ("The operation could not
/// be completed. The file doesn't exist.") read as a dialog box, not as a reason.
public enum FileErrorText {
    public static func describe(_ error: any Error) -> String {
        if let errno = posixCode(of: error) { return describe(errno: errno) }
        if let error = error as? CocoaError {
            switch error.code {
            case .fileNoSuchFile, .fileReadNoSuchFile: return "no such file or directory"
            case .fileReadNoPermission, .fileWriteNoPermission: return "permission denied"
            case .fileWriteOutOfSpace: return "no space left on the device"
            case .fileWriteVolumeReadOnly: return "the file system is read-only"
            case .fileWriteFileExists: return "a file of that name exists already"
            case .fileReadInapplicableStringEncoding, .fileReadCorruptFile: return "the file is not text in the expected encoding"
            case .fileReadTooLarge: return "the file is too large to read"
            default: return "the file could not be read or written (Foundation error \(error.code.rawValue))"
            }
        }
        return "the file could not be read or written (\(type(of: error)))"
    }

    /// strerror's words, lowercased, with a few rephrased for people.
    public static func describe(errno code: Int32) -> String {
        switch code {
        case ENOENT: return "no such file or directory"
        case EACCES, EPERM: return "permission denied"
        case ENOSPC: return "no space left on the device"
        case EDQUOT: return "the disk quota is used up"
        case EROFS: return "the file system is read-only"
        case EISDIR: return "it is a directory"
        case ENOTDIR: return "a part of the path is not a directory"
        default: return String(cString: strerror(code)).lowercased()
        }
    }

    private static func posixCode(of error: any Error) -> Int32? {
        if let error = error as? POSIXError { return error.code.rawValue }
        let nsError = error as NSError
        if nsError.domain == NSPOSIXErrorDomain { return Int32(nsError.code) }
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return Int32(underlying.code)
        }
        return nil
    }
}
