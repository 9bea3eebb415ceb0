import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A program started with `posix_spawn` (a player, a token command, a tool under test), reaped by a thread of its own.
///
/// Foundation's `Process` is not used anywhere in Stowage: on Linux its `run()` lists `/proc/self/fd` with a
/// `dirent` copy that reads past the end of glibc's buffer and crashes the caller now and then (more often the more
/// descriptors are open, as in a process serving players and downloads), and it adds one close action per open
/// descriptor to every spawn. Here the child closes every descriptor above standard error in one action
/// (`posix_spawn_file_actions_addclosefrom_np`, glibc 2.34), starts with default signal dispositions and an empty
/// signal mask (so a SIGPIPE ignored by the server does not stay ignored in a player), and in its own process group
/// (so Control-C in the terminal reaches Stowage, which stops the player itself).
///
/// ```swift
/// let child = try ChildProcess.launch("/usr/bin/env", ["mpv", url], standardOutput: .null)
/// let status = await child.waitForExit()   // 0, or the signal number when killed
/// ```
public final class ChildProcess: Sendable {
    /// Whether `program` can be started: an executable path, or a name found executable on `PATH`.
    public static func isAvailable(_ program: String) -> Bool {
        if program.contains("/") { return access(program, X_OK) == 0 }
        let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
        return path.split(separator: ":").contains { access("\($0)/\(program)", X_OK) == 0 }
    }

    /// Where one of the child's standard streams goes.
    public enum Stream: Sendable {
        /// The same file as Stowage's.
        case inherit
        /// `/dev/null`.
        case null
        /// A descriptor of this process (a pipe's end, an open file), duplicated into the child; the caller keeps and
        /// closes its own.
        case descriptor(Int32)
    }

    /// How a child ended.
    public enum Termination: Sendable, Hashable {
        /// It called `exit` with this status.
        case exited(Int32)
        /// A signal (this number) ended it.
        case signalled(Int32)

        /// The exit status, or the signal number when a signal ended it (what Foundation's `terminationStatus` gives).
        public var status: Int32 {
            switch self {
            case .exited(let status), .signalled(let status): status
            }
        }
    }

    /// The child's process identifier.
    public let processIdentifier: Int32
    private let state = Mutex(State())

    private struct State {
        var termination: Termination?
        var waiters: [CheckedContinuation<Termination, Never>] = []
    }

    /// Whether the child's whole process group is killed when the child exits (``launch``'s `endsProcessGroupOnExit`).
    private let endsProcessGroupOnExit: Bool

    private init(processIdentifier: Int32, endsProcessGroupOnExit: Bool) {
        self.processIdentifier = processIdentifier
        self.endsProcessGroupOnExit = endsProcessGroupOnExit
    }

    /// Starts `executable` (a path; use `/usr/bin/env` to look a program up on `PATH`) with `arguments`.
    ///
    /// - Parameters:
    ///   - environment: the child's whole environment; nil passes Stowage's own.
    ///   - endsProcessGroupOnExit: when the child exits, SIGKILL what is left of its process group (what a shell line
    ///     left in the background, holding the child's output pipe open).
    /// - Throws: ``ChildProcessError`` when the program cannot be started (missing, not executable).
    public static func launch(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String]? = nil,
        standardInput: Stream = .null,
        standardOutput: Stream = .inherit,
        standardError: Stream = .inherit,
        endsProcessGroupOnExit: Bool = false
    ) throws(ChildProcessError) -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        for (target, stream) in [(STDIN_FILENO, standardInput), (STDOUT_FILENO, standardOutput), (STDERR_FILENO, standardError)] {
            switch stream {
            case .inherit: break
            case .null: posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0)
            case .descriptor(let descriptor): posix_spawn_file_actions_adddup2(&actions, descriptor, target)
            }
        }
        if let closeFrom = Self.closeFrom {
            _ = closeFrom(&actions, STDERR_FILENO + 1)
        } else {
            for descriptor in Self.openDescriptors() where descriptor > STDERR_FILENO {
                posix_spawn_file_actions_addclose(&actions, descriptor)
            }
        }

        var defaults = sigset_t()
        sigfillset(&defaults)
        // SIGKILL and SIGSTOP cannot be reset; glibc refuses a set holding them.
        sigdelset(&defaults, SIGKILL)
        sigdelset(&defaults, SIGSTOP)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))

        let argv = ([executable] + arguments).map { strdup($0) }
        let environmentStrings = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } }
        defer {
            for string in argv + (environmentStrings ?? []) { free(string) }
        }
        var pid: pid_t = 0
        let result = (argv + [nil]).withUnsafeBufferPointer { argumentPointers in
            if let environmentStrings {
                (environmentStrings + [nil]).withUnsafeBufferPointer { environmentPointers in
                    posix_spawn(&pid, executable, &actions, &attributes, argumentPointers.baseAddress!, environmentPointers.baseAddress!)
                }
            } else {
                posix_spawn(&pid, executable, &actions, &attributes, argumentPointers.baseAddress!, environ)
            }
        }
        guard result == 0 else { throw ChildProcessError(executable: executable, errorNumber: result) }
        let child = ChildProcess(processIdentifier: pid, endsProcessGroupOnExit: endsProcessGroupOnExit)
        child.startReaper()
        return child
    }

    /// Whether the child has not been seen to exit yet.
    public var isRunning: Bool { state.withLock { $0.termination == nil } }

    /// How the child ended; nil while it runs.
    public var termination: Termination? { state.withLock { $0.termination } }

    /// Sends `signal` to the child if it has not exited. Never reaches another process: the child stays a zombie,
    /// holding its process identifier, until the reaper records its end under the same lock.
    public func send(_ signal: Int32) {
        state.withLock { state in
            if state.termination == nil { _ = kill(processIdentifier, signal) }
        }
    }

    /// Sends `signal` to the child's process group (its own, made at launch): the child and whatever it started, such as
    /// the commands of a shell line. Only while the child has not exited, so the group is still the child's.
    public func sendToProcessGroup(_ signal: Int32) {
        state.withLock { state in
            if state.termination == nil { _ = kill(-processIdentifier, signal) }
        }
    }

    /// Waits for the child to exit without blocking a thread.
    @discardableResult
    public func waitForExit() async -> Termination {
        await withCheckedContinuation { continuation in
            let ended = state.withLock { state in
                if state.termination == nil { state.waiters.append(continuation) }
                return state.termination
            }
            if let ended { continuation.resume(returning: ended) }
        }
    }

    /// A thread that blocks in `waitid` until the child exits. It looks without reaping first (`WNOWAIT`), records
    /// the end under the lock, and only then reaps, so ``send(_:)`` can never signal a reused identifier.
    private func startReaper() {
        let reaper = Reaper(child: self)
        var thread = pthread_t()
        let context = Unmanaged.passRetained(reaper).toOpaque()
        let started = pthread_create(
            &thread,
            nil,
            { context in
                let reaper = Unmanaged<Reaper>.fromOpaque(context!).takeRetainedValue()
                reaper.child.reap()
                return nil
            },
            context
        )
        if started == 0 {
            pthread_detach(thread)
        } else {
            // No thread to spare: wait on a cooperative one instead (rare; only under thread exhaustion).
            Unmanaged<Reaper>.fromOpaque(context).release()
            Task.detached { self.reap() }
        }
    }

    private func reap() {
        var information = siginfo_t()
        while waitid(P_PID, id_t(processIdentifier), &information, WEXITED | WNOWAIT) != 0 {
            guard errno == EINTR else { break }
        }
        let ended: Termination =
            information.si_code == CLD_EXITED
            ? .exited(information._sifields._sigchld.si_status) : .signalled(information._sifields._sigchld.si_status)
        let waiters = state.withLock { state in
            state.termination = ended
            // The exited child still holds its identifier, and with it the group's: what it left running goes too.
            if endsProcessGroupOnExit { _ = kill(-processIdentifier, SIGKILL) }
            var status: Int32 = 0
            while waitpid(processIdentifier, &status, 0) < 0, errno == EINTR {}
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: ended) }
    }

    private final class Reaper {
        let child: ChildProcess
        init(child: ChildProcess) { self.child = child }
    }

    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// glibc's `posix_spawn_file_actions_addclosefrom_np`, which Swift's Glibc module does not declare.
    private static let closeFrom: CloseFrom? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: CloseFrom.self)
    }()

    /// This process's open descriptors, read from `/proc/self/fd` through `d_name`'s address (never a copy of the
    /// 256-byte field, which is what crashes Foundation).
    private static func openDescriptors() -> [Int32] {
        guard let directory = opendir("/proc/self/fd") else { return Array(3..<1024) }
        defer { closedir(directory) }
        var descriptors: [Int32] = []
        let nameOffset = MemoryLayout<dirent>.offset(of: \.d_name)!
        while let entry = readdir(directory) {
            let name = String(cString: (UnsafeRawPointer(entry) + nameOffset).assumingMemoryBound(to: CChar.self))
            if let descriptor = Int32(name), descriptor != dirfd(directory) { descriptors.append(descriptor) }
        }
        return descriptors
    }
}

/// A program that could not be started.
public struct ChildProcessError: StowageError {
    public let executable: String
    public let errorNumber: Int32

    public var code: ErrorCode { .programNotStarted }
    public var message: String {
        "Could not start \(executable): \(String(cString: strerror(errorNumber))). Check that it is installed and executable."
    }
    public var subject: ErrorSubject { ErrorSubject(path: executable) }
    public var description: String { "\(code): \(message)" }
}
