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
        switch SocketDiagnosis.lookUp(client: client, server: server) {
        case .found(let uid, let inode):
            return LoopbackPeer(uid: uid, pid: process(holdingSocket: inode, ownedBy: uid))
        case .absent:
            return nil
        case .unavailable:
            return findInTables(client: client, server: server)
        }
    }

    /// ``find(client:server:)`` by reading the kernel's whole TCP tables, where NETLINK_SOCK_DIAG is not allowed.
    static func findInTables(client: (ip: String, port: Int), server: (ip: String, port: Int)) -> LoopbackPeer? {
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

    /// The processes `pid`'s threads started (`/proc/PID/task/TID/children`).
    private static func children(of pid: Int32) -> [Int32] {
        var found: [Int32] = []
        for thread in DirectoryListing.names("/proc/\(pid)/task") ?? [] where thread.first?.isNumber == true {
            let descriptor = open("/proc/\(pid)/task/\(thread)/children", O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { continue }
            defer { close(descriptor) }
            var bytes = [UInt8](repeating: 0, count: 4096)
            let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { continue }
            found += bytes[0..<count].split(separator: UInt8(ascii: " ")).compactMap { Int32(String(decoding: $0, as: UTF8.self)) }
        }
        return found
    }

    /// When process `pid` started, in clock ticks since boot (`/proc/PID/stat`'s 22nd field); nil when unreadable.
    private static func startTime(of pid: Int32) -> UInt64? {
        let descriptor = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 1024)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        // The command name (field 2) is in parentheses and may hold spaces: fields are counted after its last `)`.
        guard let close = bytes[0..<count].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = bytes[(close + 1)..<count].split(separator: UInt8(ascii: " "))
        // After the name come field 3 (state) onwards: the start time, field 22, is the 20th of them.
        guard fields.count >= 20 else { return nil }
        return UInt64(String(decoding: fields[19], as: UTF8.self))
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
        var buffer = [CChar](repeating: 0, count: 64)
        func holds(_ pid: Int32) -> Bool {
            var owner = stat()
            guard stat("/proc/\(pid)", &owner) == 0, owner.st_uid == uid else { return false }
            let folder = "/proc/\(pid)/fd"
            // Listed through DirectoryListing: a copy of readdir's whole entry crashed here once a process held
            // hundreds of descriptors (the test of 300 idle connections found it).
            for descriptor in DirectoryListing.names(folder) ?? [] {
                guard descriptor.first?.isNumber == true else { continue }
                let length = readlink("\(folder)/\(descriptor)", &buffer, buffer.count - 1)
                guard length > 0 else { continue }
                if String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) == target { return true }
            }
            return false
        }
        // The likeliest first: the process that started this one (a script, or a player that runs `stowage play`),
        // then the players this one started, then this process (the server's warm-up request comes from it); then the
        // user's processes newest first, since the player that just connected is most often the process started last.
        // So the scan usually ends after a few processes instead of reading every descriptor of every process of the
        // user. By start time, not by number: process numbers wrap, and then the oldest processes have the highest
        // numbers.
        let first = [getppid()] + children(of: getpid()) + [getpid()]
        if let found = first.first(where: holds) { return found }
        guard let names = DirectoryListing.names("/proc") else { return nil }
        var others: [(pid: Int32, started: UInt64)] = []
        for pid in names.compactMap({ Int32($0) }) where !first.contains(pid) {
            others.append((pid, startTime(of: pid) ?? 0))
        }
        others.sort { ($0.started, $0.pid) > ($1.started, $1.pid) }
        return others.map(\.pid).first(where: holds)
    }
}

/// One TCP socket asked of the kernel by its two ends, the way `ss` asks (NETLINK_SOCK_DIAG, an exact lookup): its
/// owner's uid and its inode, in one request, instead of reading the whole `/proc/net/tcp`, whose cost grows with every
/// connection on the machine (the kernel's `established_get_first` was a fifth of a first request's time).
enum SocketDiagnosis {
    enum Answer: Equatable {
        case found(uid: UInt32, inode: UInt64)
        /// The kernel has no such connection.
        case absent
        /// The question could not be asked (no netlink here, an address that is not IPv4): read the tables instead.
        case unavailable
    }

    // From <linux/netlink.h>, <linux/sock_diag.h> and <linux/inet_diag.h>.
    private static let netlinkSockDiag: Int32 = 4
    private static let sockDiagByFamily: UInt16 = 20
    private static let netlinkRequest: UInt16 = 1
    private static let netlinkError: UInt16 = 2
    /// nlmsghdr (16 bytes) and inet_diag_req_v2 (8 bytes, then the 48-byte inet_diag_sockid).
    private static let requestLength = 16 + 8 + 48

    static func lookUp(client: (ip: String, port: Int), server: (ip: String, port: Int)) -> Answer {
        guard let source = ipv4(client.ip), let destination = ipv4(server.ip),
            let clientPort = UInt16(exactly: client.port), let serverPort = UInt16(exactly: server.port)
        else { return .unavailable }
        let descriptor = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), netlinkSockDiag)
        guard descriptor >= 0 else { return .unavailable }
        defer { close(descriptor) }
        // The kernel answers at once; a second is a bound on a kernel that never does.
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))

        var request = [UInt8](repeating: 0, count: requestLength)
        put(UInt32(requestLength), at: 0, in: &request)
        put(sockDiagByFamily, at: 4, in: &request)
        put(netlinkRequest, at: 6, in: &request)
        put(UInt32(1), at: 8, in: &request)
        request[16] = UInt8(AF_INET)
        request[17] = UInt8(IPPROTO_TCP)
        put(UInt32.max, at: 20, in: &request)  // every state
        // The socket asked for is the client's: its local end first (ports in network byte order).
        put(clientPort.bigEndian, at: 24, in: &request)
        put(serverPort.bigEndian, at: 26, in: &request)
        request.replaceSubrange(28..<32, with: source)
        request.replaceSubrange(44..<48, with: destination)
        put(UInt32.max, at: 64, in: &request)  // INET_DIAG_NOCOOKIE
        put(UInt32.max, at: 68, in: &request)

        // Unconnected, a netlink socket sends to the kernel (port 0).
        let sent = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) }
        guard sent == requestLength else { return .unavailable }
        var answer = [UInt8](repeating: 0, count: 8192)
        var received: Int
        repeat {
            received = answer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        } while received < 0 && errno == EINTR
        guard received >= 16 else { return .unavailable }
        switch read16(answer, at: 4) {
        case sockDiagByFamily:
            // inet_diag_msg after the header: idiag_uid at 64, idiag_inode at 68.
            guard received >= 16 + 72 else { return .unavailable }
            let inode = UInt64(read32(answer, at: 16 + 68))
            return inode == 0 ? .absent : .found(uid: read32(answer, at: 16 + 64), inode: inode)
        case netlinkError:
            // ENOENT: no such connection. Anything else (EPERM under a sandbox, say): the tables may still tell.
            guard received >= 20 else { return .unavailable }
            return Int32(bitPattern: read32(answer, at: 16)) == -ENOENT ? .absent : .unavailable
        default:
            return .unavailable
        }
    }

    /// `127.0.0.1` as its four bytes in network order; nil for anything else than dotted IPv4.
    private static func ipv4(_ text: String) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        let bytes = parts.compactMap { UInt8($0) }
        return bytes.count == 4 ? bytes : nil
    }

    private static func put<T: FixedWidthInteger>(_ value: T, at offset: Int, in bytes: inout [UInt8]) {
        withUnsafeBytes(of: value) { bytes.replaceSubrange(offset..<offset + MemoryLayout<T>.size, with: $0) }
    }

    /// Netlink's fields are in the host's byte order.
    private static func read16(_ bytes: [UInt8], at offset: Int) -> UInt16 {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt16.self) }
    }

    private static func read32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
    }
}
