import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A regular file under the served root, with what the origin needs for its validators.
struct ServedFile: Sendable, Hashable {
    /// The file's resolved path (symbolic links followed), inside the resolved root.
    let path: String
    let size: Int
    /// Modification time, seconds since 1970.
    let modifiedSeconds: Int
    let modifiedNanoseconds: Int

    /// A strong entity tag from the size and modification time: it changes whenever the file is rewritten.
    var entityTag: String {
        "\"\(String(size, radix: 16))-\(String(modifiedSeconds, radix: 16)).\(String(modifiedNanoseconds, radix: 16))\""
    }

    /// `Last-Modified`, an IMF-fixdate.
    var lastModified: String { HTTPDate.format(secondsSince1970: modifiedSeconds) }

    /// Finds the regular file at `path` if, with every symbolic link resolved, it lies inside `resolvedRoot`.
    /// Blocking: call it from a thread pool.
    static func open(path: String, resolvedRoot: String) -> ServedFile? {
        guard let resolved = realPath(path) else { return nil }
        let prefix = resolvedRoot.hasSuffix("/") ? resolvedRoot : resolvedRoot + "/"
        guard resolved.hasPrefix(prefix) else { return nil }
        // Foundation rather than stat(2): in optimised builds the importer may attribute `struct stat` to another
        // module that re-exports it, which MemberImportVisibility then rejects.
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: resolved),
            attributes[.type] as? FileAttributeType == .typeRegular,
            let size = (attributes[.size] as? NSNumber)?.intValue,
            let modified = attributes[.modificationDate] as? Date
        else { return nil }
        let since1970 = modified.timeIntervalSince1970
        let seconds = since1970.rounded(.down)
        return ServedFile(
            path: resolved,
            size: size,
            modifiedSeconds: Int(seconds),
            modifiedNanoseconds: Int(((since1970 - seconds) * 1e9).rounded())
        )
    }

    /// The canonical absolute path, or `nil` when it does not exist.
    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
