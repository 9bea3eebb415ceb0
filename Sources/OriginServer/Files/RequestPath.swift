import Foundation

/// A request path checked for safety and resolved to a file system path under the served root.
///
/// The raw path is split on `/` before percent-decoding, so an encoded slash cannot join components. A component that
/// is empty, `.` or `..` (after decoding) never names a file here, and neither does one with NUL or a backslash.
struct RequestPath: Sendable, Hashable {
    /// Why a request path is refused.
    enum Rejection: Error, Hashable {
        /// Not a path, or not percent-decodable: 400.
        case malformed
        /// A path that cannot name a file under the root: 404, without saying why.
        case outsideRoot
    }

    /// The decoded components, each safe to use as a file name.
    let components: [String]

    /// The decoded path with a leading `/`, as the request log records it.
    var decoded: String { "/" + components.joined(separator: "/") }

    /// - Parameter target: the request target, e.g. `/a%20b/seg.ts?token=1`.
    /// - Throws: ``Rejection``.
    init(target: String) throws(Rejection) {
        let pathPart = target.prefix { $0 != "?" && $0 != "#" }
        guard pathPart.first == "/" else { throw .malformed }
        var components: [String] = []
        for raw in pathPart.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            guard let component = String(raw).removingPercentEncoding else { throw .malformed }
            if component.contains("/") || component.contains("\\") || component.contains("\0") {
                throw .malformed
            }
            if component.isEmpty || component == "." || component == ".." {
                throw .outsideRoot
            }
            components.append(component)
        }
        guard !components.isEmpty else { throw .outsideRoot }
        self.components = components
    }

    /// The path under `root` (which must be absolute and already resolved).
    func fileSystemPath(under root: String) -> String {
        (root.hasSuffix("/") ? root : root + "/") + components.joined(separator: "/")
    }
}
