public import Foundation

/// Runs subprocesses (ffmpeg, openssl, python3, the built `stowage`) for the tests without blocking a thread.
///
/// Swift Testing runs tests on the cooperative pool, which has as many threads as cores; the in-process servers
/// (key server, origin, playback server) need the same threads. A test that blocked a thread on `waitUntilExit()`
/// or `readDataToEndOfFile()` could stall every server in the test process, so the output goes to temporary files
/// (no pipes, no reader threads) and the exit arrives from ``ChildProcess``'s reaper thread. (Not Foundation's
/// `Process`, whose `run()` on Linux crashes now and then; see ``ChildProcess``.)
public enum ProcessRunner {
    /// What a finished process left behind.
    public struct Output: Sendable {
        /// The exit status, or the signal that ended the process.
        public let status: Int32
        public let standardOutput: Data
        public let standardError: Data
        /// The process outlived its timeout and was killed with SIGKILL.
        public let timedOut: Bool
    }

    /// Runs `executable` to completion and awaits it without blocking a thread.
    /// - Parameters:
    ///   - environment: the child's whole environment; `nil` inherits the test process's.
    ///   - standardInput: a file to read as standard input; `nil` gives `/dev/null`.
    ///   - timeout: after this the process is killed (SIGKILL) and ``Output/timedOut`` set.
    /// - Throws: when the process cannot be started, or `CancellationError` (after killing it) when the task is cancelled.
    public static func run(
        _ executable: URL,
        _ arguments: [String],
        environment: [String: String]? = nil,
        standardInput: URL? = nil,
        timeout: Duration = .seconds(120)
    ) async throws -> Output {
        let process = try start(executable, arguments, environment: environment, standardInput: standardInput)
        return try await process.waitForExit(timeout: timeout)
    }

    /// Runs `program`, looked up on PATH through `/usr/bin/env`, like ``run(_:_:environment:standardInput:timeout:)``.
    public static func run(
        program: String,
        _ arguments: [String],
        environment: [String: String]? = nil,
        standardInput: URL? = nil,
        timeout: Duration = .seconds(120)
    ) async throws -> Output {
        try await run(
            URL(fileURLWithPath: "/usr/bin/env"),
            [program] + arguments,
            environment: environment,
            standardInput: standardInput,
            timeout: timeout
        )
    }

    /// Starts `executable` and returns at once, for a process that runs beside the test (a server) until told to stop.
    /// - Throws: when the process cannot be started.
    public static func start(
        _ executable: URL,
        _ arguments: [String],
        environment: [String: String]? = nil,
        standardInput: URL? = nil
    ) throws -> RunningProcess {
        try RunningProcess(executable: executable, arguments: arguments, environment: environment, standardInput: standardInput)
    }
}

extension ProcessRunner {
    /// A process ID no process has now (the highest free one below 4,000,000): what a writer killed earlier leaves in
    /// the names of its temporary files.
    public static func unusedProcessID() -> Int32 {
        (2...4_000_000).reversed().lazy.map { Int32($0) }.first { kill($0, 0) != 0 && errno == ESRCH } ?? 4_000_000
    }
}
