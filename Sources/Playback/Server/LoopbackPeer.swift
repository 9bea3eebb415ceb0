import Foundation
import StowageCore

#if canImport(Glibc)
import Glibc
#endif

/// The local process at the other end of a loopback TCP connection, found the way `ss -p` finds it: the connection's
/// socket in `/proc/net/tcp` (its owner's uid and inode), then the process holding that inode among its descriptors.
///
/// The entry URL of a playback session works for the process that used it first and for no other: mpv, for one, opens
/// the URL twice (once to probe, once in the HLS demuxer), while another process that read the URL from the player's
/// command line must be refused.
struct LoopbackPeer: Hashable, Sendable {
    /// The uid owning the peer's socket.
    var uid: UInt32
    /// The process holding the socket; nil when it cannot be told (its `/proc/PID/fd` is not readable to this process).
    var pid: Int32?

    /// The process on the other end of the connection from `client` to `server` (both `IP:port` on this machine), nil
    /// when the connection is not found (not loopback, or gone).
    static func find(client: (ip: String, port: Int), server: (ip: String, port: Int)) -> LoopbackPeer? {
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = readWhole(table) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count >= 10 else { continue }
                guard let local = endpoint(fields[1]), let remote = endpoint(fields[2]) else { continue }
                guard local.port == client.port, remote.port == server.port else { continue }
                if table.hasSuffix("tcp"), local.ip != client.ip || remote.ip != server.ip { continue }
                guard let uid = UInt32(fields[7]), let inode = UInt64(fields[9]), inode != 0 else { continue }
                return LoopbackPeer(uid: uid, pid: process(holdingSocket: inode, ownedBy: uid))
            }
        }
        return nil
    }

    /// A `/proc` file read to its end (its reported size is 0, so it is read until `read` returns nothing).
    private static func readWhole(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        // Bounded: a table of a million connections is about 150 MB; stop well before.
        while bytes.count < 64 << 20 {
            let got = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { break }
            bytes += chunk[0..<got]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `0100007F:1F90` (IPv4 in host byte order, port in hex) as `("127.0.0.1", 8080)`; IPv6 addresses keep only the port.
    private static func endpoint(_ field: Substring) -> (ip: String, port: Int)? {
        let parts = field.split(separator: ":")
        guard parts.count == 2, let port = Int(parts[1], radix: 16) else { return nil }
        guard parts[0].count == 8, let raw = UInt32(parts[0], radix: 16) else { return ("", port) }
        let bytes = withUnsafeBytes(of: raw.littleEndian) { Array($0) }
        return (bytes.map(String.init).joined(separator: "."), port)
    }

    /// The process with a descriptor on socket `inode`, scanning `/proc/*/fd` of the processes of `uid` (the socket's
    /// owner; only what this process may read).
    private static func process(holdingSocket inode: UInt64, ownedBy uid: UInt32) -> Int32? {
        let target = "socket:[\(inode)]"
        // Listed through DirectoryListing: a copy of readdir's whole entry crashed here once a process held hundreds of
        // descriptors (the test of 300 idle connections found it).
        guard let names = DirectoryListing.names("/proc") else { return nil }
        // Newest first: the player that just connected is most often the process started last, so the scan usually
        // ends after a few processes instead of reading every descriptor of every process of the user.
        let processes = names.compactMap { Int32($0) }.sorted(by: >)
        var buffer = [CChar](repeating: 0, count: 64)
        for pid in processes {
            let name = String(pid)
            var owner = stat()
            guard stat("/proc/\(name)", &owner) == 0, owner.st_uid == uid else { continue }
            let folder = "/proc/\(name)/fd"
            for descriptor in DirectoryListing.names(folder) ?? [] {
                guard descriptor.first?.isNumber == true else { continue }
                let length = readlink("\(folder)/\(descriptor)", &buffer, buffer.count - 1)
                guard length > 0 else { continue }
                let link = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if link == target { return pid }
            }
        }
        return nil
    }
}
