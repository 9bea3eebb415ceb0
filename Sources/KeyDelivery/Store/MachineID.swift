#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The machine's ID, one of the two inputs of the key store's key-encryption key (docs/design.md, "State on disk"), so
/// that a data directory copied to another machine does not open there.
///
/// ``system()`` reads systemd's `/etc/machine-id` (falling back to D-Bus's `/var/lib/dbus/machine-id`); tests pass
/// their own with ``init(_:)``.
public struct MachineID: Sendable, Hashable {
    /// The ID as text (for `/etc/machine-id`: 32 lowercase hex digits).
    public let value: String

    /// An explicit machine ID (tests, or a deployment that pins its own).
    public init(_ value: String) {
        self.value = value
    }

    /// The files read by ``system()``, in order.
    public static let systemPaths = ["/etc/machine-id", "/var/lib/dbus/machine-id"]

    /// This machine's ID.
    ///
    /// - Throws: ``KeyStoreError`` with code `machine_id_unavailable` if no file holds one.
    public static func system() throws(KeyStoreError) -> MachineID {
        try system(paths: systemPaths)
    }

    /// The ID in the first of `paths` that holds one (``system()`` reads ``systemPaths``).
    static func system(paths: [String]) throws(KeyStoreError) -> MachineID {
        for path in paths {
            guard let text = readSmallTextFile(path) else { continue }
            let trimmed = text.filter { !$0.isWhitespace }
            if !trimmed.isEmpty { return MachineID(trimmed) }
        }
        throw .machineIDUnavailable(paths: paths)
    }

    private static func readSmallTextFile(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 256)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: bytes.prefix(count), as: UTF8.self)
    }
}
