public import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process started by ``ProcessRunner/start(_:_:environment:standardInput:)``: its standard output and error
/// go to temporary files, its exit comes through `terminationHandler`, so nothing here blocks a thread.
///
/// When the last reference goes away a process still running is killed (SIGKILL) and the temporary files removed,
/// so a test that throws early leaves nothing behind.
public final class RunningProcess: Sendable {
    private let process: Process
    private let exit = ExitSignal()
    private let directory: URL
    private let standardOutputURL: URL
    private let standardErrorURL: URL

    init(executable: URL, arguments: [String], environment: [String: String]?, standardInput: URL?) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-process-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.directory = directory
        standardOutputURL = directory.appendingPathComponent("stdout")
        standardErrorURL = directory.appendingPathComponent("stderr")
        process = Process()
        do {
            _ = FileManager.default.createFile(atPath: standardOutputURL.path, contents: nil)
            _ = FileManager.default.createFile(atPath: standardErrorURL.path, contents: nil)
            let input = try standardInput.map { try FileHandle(forReadingFrom: $0) }
            let output = try FileHandle(forWritingTo: standardOutputURL)
            let errors = try FileHandle(forWritingTo: standardErrorURL)
            // The child has its own copies of the descriptors once it runs.
            defer {
                try? input?.close()
                try? output.close()
                try? errors.close()
            }
            process.executableURL = executable
            process.arguments = arguments
            if let environment { process.environment = environment }
            process.standardInput = input ?? FileHandle.nullDevice
            process.standardOutput = output
            process.standardError = errors
            // Set before `run()` so an early exit cannot be missed.
            process.terminationHandler = { [exit] in exit.record($0.terminationStatus) }
            try process.run()
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Whether the process has not exited yet.
    public var isRunning: Bool { exit.status == nil }

    /// The child's process identifier.
    public var processIdentifier: Int32 { process.processIdentifier }

    /// What the process has written to standard output so far.
    public func standardOutput() throws -> Data { try Data(contentsOf: standardOutputURL) }

    /// What the process has written to standard error so far.
    public func standardError() throws -> Data { try Data(contentsOf: standardErrorURL) }

    /// Sends SIGINT, as Control-C in a terminal would, if the process is still running.
    public func interrupt() {
        if exit.status == nil, process.isRunning { process.interrupt() }
    }

    /// Sends SIGKILL if the process is still running.
    public func kill() {
        if exit.status == nil, process.isRunning { send(SIGKILL, to: process.processIdentifier) }
    }

    /// Awaits the exit without blocking a thread; after `timeout` the process is killed (SIGKILL) and awaited.
    /// - Returns: the status and everything written to standard output and error.
    /// - Throws: `CancellationError` when the task is cancelled, after killing the process and awaiting its exit.
    public func waitForExit(timeout: Duration = .seconds(120)) async throws -> ProcessRunner.Output {
        enum Event: Sendable {
            case exited
            case deadline
            case cancelled
        }
        let exit = self.exit
        let timedOut = await withTaskGroup(of: Event.self) { group in
            // Not cancellable: the exit always comes, killed if need be, and is what ends the group.
            group.addTask {
                _ = await exit.wait()
                return .exited
            }
            group.addTask {
                do {
                    try await Task.sleep(for: timeout)
                    return .deadline
                } catch {
                    return .cancelled
                }
            }
            var exited = false
            var timedOut = false
            for await event in group {
                switch event {
                case .exited:
                    exited = true
                    group.cancelAll()
                case .deadline:
                    guard !exited else { break }
                    timedOut = true
                    kill()
                case .cancelled:
                    if !exited { kill() }
                }
            }
            return timedOut
        }
        try Task.checkCancellation()
        return ProcessRunner.Output(
            status: await exit.wait(),
            standardOutput: try standardOutput(),
            standardError: try standardError(),
            timedOut: timedOut
        )
    }
}

/// The exit status, recorded once by the termination handler and awaited by any number of tasks.
private final class ExitSignal: Sendable {
    private struct State {
        var status: Int32?
        var waiters: [CheckedContinuation<Int32, Never>] = []
    }

    private let state = Mutex(State())

    var status: Int32? { state.withLock { $0.status } }

    func record(_ status: Int32) {
        let waiters = state.withLock { state in
            state.status = status
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: status) }
    }

    func wait() async -> Int32 {
        await withCheckedContinuation { continuation in
            let status = state.withLock { state in
                if state.status == nil { state.waiters.append(continuation) }
                return state.status
            }
            if let status { continuation.resume(returning: status) }
        }
    }
}

/// The C `kill`, out of reach of ``RunningProcess/kill()``'s name inside the class.
private func send(_ signal: Int32, to process: Int32) {
    _ = kill(process, signal)
}
