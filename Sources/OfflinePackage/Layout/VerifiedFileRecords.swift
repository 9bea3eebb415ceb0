import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What identifies a file's content without reading it: device, inode, size and change time.
///
/// Any write to a file, a rename onto its name, a `touch` or a `chmod` gives it a new `st_ctime`, which no user can set
/// back (only the system clock can), and a file put in its place has another inode. So a file whose identity is the
/// one it had when its bytes were checked still has those bytes.
public struct FileIdentity: Codable, Hashable, Sendable {
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64
    public var changedSeconds: Int64
    public var changedNanoseconds: Int64

    public init(device: UInt64, inode: UInt64, size: Int64, changedSeconds: Int64, changedNanoseconds: Int64) {
        self.device = device
        self.inode = inode
        self.size = size
        self.changedSeconds = changedSeconds
        self.changedNanoseconds = changedNanoseconds
    }

    /// The identity of the open file `descriptor`; nil when it cannot be told or it is not a regular file.
    public init?(descriptor: Int32) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        self.init(info)
    }

    /// The identity of the file at `path` (links followed); nil when there is none or it is not a regular file.
    public init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        self.init(info)
    }

    private init?(_ info: stat) {
        guard (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        self.init(
            device: UInt64(info.st_dev),
            inode: UInt64(info.st_ino),
            size: Int64(info.st_size),
            changedSeconds: Int64(info.st_ctim.tv_sec),
            changedNanoseconds: Int64(info.st_ctim.tv_nsec)
        )
    }
}

/// The files of a package whose bytes were checked against the SHA-256 the manifest records, each with the identity it
/// had then (`verified.json` in the package folder).
///
/// The download writes it as it completes a package: it hashed every byte it wrote, and takes each file's identity
/// once the file is flushed and renamed into place. `stowage verify --deep` adds each segment it hashed whole, when its
/// identity was the same before and after the read. `stowage play` then serves a file whose identity still holds
/// without hashing it again (hashing was most of what it spent per byte), and hashes any other file as before.
///
/// It is a cache, never a source of truth: a record for a SHA-256 other than the manifest's, or for a file that has
/// changed, vouches for nothing; a missing, unreadable or damaged `verified.json` reads as empty; a failure to write
/// it costs a hash later, never a refusal. Whoever can edit it can as well edit the manifest's SHA-256 (docs/SECURITY.md).
public struct VerifiedFileRecords: Codable, Sendable, Equatable {
    /// One checked file.
    public struct Entry: Codable, Hashable, Sendable {
        /// The SHA-256 the bytes were checked against (lowercase hex).
        public var sha256: String
        /// The file's identity right after the check.
        public var identity: FileIdentity

        public init(sha256: String, identity: FileIdentity) {
            self.sha256 = sha256.lowercased()
            self.identity = identity
        }
    }

    /// The name of the file in the package folder.
    public static let fileName = "verified.json"
    /// The shape of the file; another reads as empty.
    public static let currentVersion = 1

    public var version = currentVersion
    /// By path relative to the package folder.
    public var files: [String: Entry] = [:]

    public init(files: [String: Entry] = [:]) {
        self.files = files
    }

    /// The records of `package`; empty when there are none or they cannot be read.
    public static func read(in package: PackageDirectory) -> VerifiedFileRecords {
        let url = package.url.appendingPathComponent(fileName)
        // A cache: whatever cannot be read is as good as absent (files are then hashed).
        guard let data = try? Data(contentsOf: url), data.count <= 64 << 20,
            let records = try? JSONDecoder().decode(VerifiedFileRecords.self, from: data),
            records.version == currentVersion
        else { return VerifiedFileRecords() }
        return records
    }

    /// Writes the records into `package` (through a temporary file and a rename).
    public func write(in package: PackageDirectory) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        try PackageDirectory.writeAtomically(try encoder.encode(self), to: package.url.appendingPathComponent(Self.fileName))
    }

    /// Adds `checked` (by path) to the records of `package`, keeps only those with the SHA-256 `manifest` has for their
    /// file now, and writes them. A cache: when it cannot be written, play hashes those files as it would have anyway,
    /// so the failure changes nothing else and is not reported.
    public static func record(_ checked: [String: Entry], manifest: PackageManifest, in package: PackageDirectory) {
        var records = read(in: package)
        records.files.merge(checked) { _, new in new }
        var expected: [String: String] = [:]
        for file in manifest.files { expected[file.path] = file.sha256?.lowercased() }
        records.files = records.files.filter { expected[$0.key] == $0.value.sha256 }
        try? records.write(in: package)
    }

    /// The identities to trust for the files of `manifest`: those recorded for the SHA-256 the manifest has for the
    /// file now.
    public func identities(for manifest: PackageManifest) -> [String: FileIdentity] {
        var trusted: [String: FileIdentity] = [:]
        for file in manifest.files {
            guard let expected = file.sha256?.lowercased(), let entry = files[file.path], entry.sha256 == expected,
                file.size == nil || file.size == entry.identity.size
            else { continue }
            trusted[file.path] = entry.identity
        }
        return trusted
    }
}
