import Foundation
import KeyDelivery
import StowageCore
import StowageCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The data directory's secret files (signing key, master key, token secret), kept with KeyDelivery's owner-only file
/// code (`PrivateFile`, the device's keys use it too): owner-only, never overwritten, written whole or not at all, and
/// refused when others could have read them (the way ssh refuses a loose private key). This only maps its errors to the
/// key server's setup errors.
enum SecretFile {
    /// Creates `path` with mode 0600 holding `bytes`, unless it exists (an existing key is never replaced).
    static func create(_ path: String, bytes: SecretBytes) throws {
        do {
            try PrivateFile.createExclusively(path, contents: bytes)
        } catch {
            throw KeyServerSetupError.invalidKeyFile(path, error.message)
        }
    }

    /// Reads a secret file straight into zeroizing memory, refusing it unless it is a regular file of this user that
    /// group and others cannot access.
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - byteCount: The exact length required, or nil for any length up to 4 KiB.
    ///   - directory: The data directory, named in the error when the file is missing.
    /// - Throws: ``KeyServerSetupError`` (`not_initialized` when missing, `insecure_file`, `invalid_key_file`).
    static func read(_ path: String, byteCount: Int? = nil, directory: String) throws -> SecretBytes {
        let secret: SecretBytes?
        do {
            secret =
                if let byteCount {
                    try PrivateFile.readSecret(path, count: byteCount)
                } else {
                    try PrivateFile.readSecret(path, maximumCount: 4_096)
                }
        } catch {
            if error.code == .insecurePermissions {
                // The link itself, as lstat(2) sees it (attributesOfItem does not follow links).
                let mode = ((try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int).map { $0 & 0o777 } ?? 0o777
                throw KeyServerSetupError.insecureFile(path, mode: mode)
            }
            throw KeyServerSetupError.invalidKeyFile(path, error.message)
        }
        guard let secret else { throw KeyServerSetupError.notInitialized(directory) }
        return secret
    }
}
