public import Foundation
public import StowageCore

#if canImport(Glibc)
import Glibc
#endif

/// The folder of one offline package, `packages/ASSET_ID/` in the data directory (docs/design.md, "State on disk").
///
/// Every path inside it is relative and made by Stowage; ``url(forRelativePath:)`` refuses any that would leave the
/// folder, so a hostile manifest cannot make Stowage read or write elsewhere.
public struct PackageDirectory: Sendable, Hashable {
    public let assetId: String
    public let url: URL

    /// The package of `assetId` in `dataDirectory`.
    /// - Throws: ``PackageError/invalidAssetID(_:)`` when the ID is not a safe folder name.
    public init(assetId: String, in dataDirectory: DataDirectory) throws(PackageError) {
        guard Self.isValidAssetID(assetId) else { throw .invalidAssetID(assetId) }
        self.assetId = assetId
        self.url = dataDirectory.packagesURL.appendingPathComponent(assetId, isDirectory: true)
    }

    /// Asset IDs are 1-128 characters of `A-Z a-z 0-9 . _ -`, not starting with a dot (docs/key-protocol.md's alphabet).
    public static func isValidAssetID(_ id: String) -> Bool {
        guard (1...128).contains(id.utf8.count), id.first != "." else { return false }
        return id.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                true
            case UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"): true
            default: false
            }
        }
    }

    public var manifestURL: URL { url.appendingPathComponent(PackageManifest.fileName) }
    public var logsURL: URL { url.appendingPathComponent("logs", isDirectory: true) }
    public var accessLogURL: URL { logsURL.appendingPathComponent("access.log") }
    public var errorLogURL: URL { logsURL.appendingPathComponent("error.log") }

    /// Whether the package folder exists.
    public var exists: Bool { FileManager.default.fileExists(atPath: url.path) }

    /// The absolute URL of a relative path inside the package.
    /// - Throws: ``PackageError/unsafePath(_:)`` for absolute paths, `..`, `.`, empty components, backslashes or NUL.
    public func url(forRelativePath path: String) throws(PackageError) -> URL {
        guard Self.isSafeRelativePath(path) else { throw .unsafePath(path) }
        return url.appendingPathComponent(path)
    }

    /// Relative, `/`-separated, each component non-empty and not `.` or `..`, no NUL or backslash.
    public static func isSafeRelativePath(_ path: String) -> Bool {
        guard !path.isEmpty, !path.hasPrefix("/"), !path.contains("\\"), !path.utf8.contains(0) else { return false }
        return path.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { $0 != "" && $0 != "." && $0 != ".." }
    }

    /// Reads `manifest.json`.
    /// - Throws: ``PackageError/notFound(_:)`` when there is none; ``PackageError/invalidManifest(_:_:)`` when it
    ///   cannot be read, is not the schema or names unsafe paths.
    public func readManifest() throws(PackageError) -> PackageManifest {
        guard FileManager.default.fileExists(atPath: manifestURL.path) else { throw .notFound(assetId) }
        let manifest: PackageManifest
        do {
            let data = try Data(contentsOf: manifestURL)
            manifest = try JSONDecoder().decode(PackageManifest.self, from: data)
        } catch {
            throw .invalidManifest(assetId, Self.describeManifestFailure(error))
        }
        guard manifest.schemaVersion == PackageManifest.currentSchemaVersion else {
            throw .invalidManifest(assetId, "schema version \(manifest.schemaVersion) is not \(PackageManifest.currentSchemaVersion)")
        }
        guard manifest.assetId == assetId else { throw .invalidManifest(assetId, "it describes asset \(manifest.assetId)") }
        let paths = [manifest.multivariantPlaylist] + manifest.renditions.map(\.playlist) + manifest.files.map(\.path)
        if let bad = paths.first(where: { !Self.isSafeRelativePath($0) }) {
            throw .invalidManifest(assetId, "it names the unsafe path \(bad)")
        }
        return manifest
    }

    /// Why a manifest did not read, in words: which field is missing or of the wrong type, or that it is not JSON.
    static func describeManifestFailure(_ error: any Error) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.isEmpty
                ? "(the whole file)" : keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().trimmingPrefix(".").description
        }
        switch error {
        case DecodingError.dataCorrupted(let context): return "it is not valid JSON (\(context.debugDescription))"
        case DecodingError.keyNotFound(let key, let context): return "the field \(path(context.codingPath + [key])) is missing"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "the field \(path(context.codingPath)) is not what a manifest holds there"
        default: return FileErrorText.describe(error)
        }
    }

    /// Writes `manifest.json` whole: a temporary file, flushed, then renamed over the old one.
    public func writeManifest(_ manifest: PackageManifest) throws(PackageError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        do {
            try Self.writeAtomically(try encoder.encode(manifest), to: manifestURL)
        } catch {
            throw .io(manifestURL.path, FileErrorText.describe(error))
        }
    }

    /// Writes `data` to `url` through a synced temporary file and a rename (``AtomicFile``), so readers see the old or
    /// the new file; the folder is created when missing. A failure is thrown as the `POSIXError` of its system call.
    public static func writeAtomically(_ data: Data, to url: URL) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        do {
            try data.withUnsafeBytes { bytes in
                try Result { () throws(AtomicFile.Failure) in try AtomicFile.replace(url.path, with: bytes, permissions: 0o600) }.get()
            }
        } catch let failure as AtomicFile.Failure {
            throw POSIXError(POSIXErrorCode(rawValue: failure.errorNumber) ?? .EIO)
        }
    }

    /// The bytes the package's files take on disk (allocated blocks), all files in the folder counted.
    public func sizeOnDisk() -> Int64 { Self.sizeOnDisk(of: url) }

    /// Allocated bytes of the regular files under `url` (links not followed).
    static func sizeOnDisk(of url: URL) -> Int64 {
        guard let enumerator = FileManager.default.enumerator(at: url, includingPropertiesForKeys: nil) else { return 0 }
        var total: Int64 = 0
        for case let file as URL in enumerator {
            var info = stat()
            if lstat(file.path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG {
                total += Int64(info.st_blocks) * 512
            }
        }
        return total
    }
}

/// Why a package cannot be used.
public enum PackageError: Error, Sendable, Hashable, CustomStringConvertible {
    case invalidAssetID(String)
    case notFound(String)
    case invalidManifest(String, String)
    case unsafePath(String)
    case io(String, String)
    /// Another task (a download, a deletion) holds the asset: `holder` says which process and what it does.
    case busy(assetId: String, holder: String)

    /// A stable snake_case code.
    public var code: ErrorCode {
        switch self {
        case .invalidAssetID: .invalidAssetID
        case .notFound: .packageNotFound
        case .invalidManifest: .invalidManifest
        case .unsafePath: .unsafePath
        case .io: .packageIOError
        case .busy: .assetBusy
        }
    }

    public var description: String {
        switch self {
        case .invalidAssetID(let id):
            "'\(id)' is not a valid asset ID: use 1-128 letters, digits, '.', '_' or '-', not starting with '.'"
        case .notFound(let id): "There is no offline package for asset \(id). `stowage list` shows the assets downloaded."
        case .invalidManifest(let id, let reason):
            "the manifest of asset \(id) cannot be used (\(reason)); delete the asset and download it again"
        case .unsafePath(let path): "refusing the path '\(path)': package paths are relative and stay inside the package"
        case .io(let path, let reason): "cannot write \(path): \(reason)"
        case .busy(let id, let holder):
            "asset \(id) is in use by \(holder); wait for it to finish, or stop it first (`stowage pause \(id)`, or Ctrl-C in the "
                + "terminal running it)"
        }
    }
}

extension PackageError: StowageError {
    public var message: String { description }
    public var subject: ErrorSubject {
        switch self {
        case .invalidAssetID(let id), .notFound(let id), .invalidManifest(let id, _), .busy(let id, _): ErrorSubject(assetId: id)
        case .unsafePath(let path), .io(let path, _): ErrorSubject(path: path)
        }
    }
}
