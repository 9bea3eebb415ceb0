public import Foundation
import StowageCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process started by ``ProcessRunner/start(_:_:environment:standardInput:)``: its standard output and error
/// go to temporary files, its exit comes from ``ChildProcess``'s reaper thread, so nothing here blocks a cooperative thread.
///
/// When the last reference goes away a process still running is killed (SIGKILL) and the temporary files removed,
/// so a test that throws early leaves nothing behind.
public final class RunningProcess: Sendable {
    private let child: ChildProcess
    private let directory: URL
    private let standardOutputURL: URL
    private let standardErrorURL: URL

    init(executable: URL, arguments: [String], environment: [String: String]?, standardInput: URL?) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stowage-process-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.directory = directory
        standardOutputURL = directory.appendingPathComponent("stdout")
        standardErrorURL = directory.appendingPathComponent("stderr")
        var opened: [Int32] = []
        // The child has its own copies of the descriptors once it runs.
        defer { for descriptor in opened { close(descriptor) } }
        func open(_ url: URL, _ flags: Int32) throws -> Int32 {
            let descriptor = Glibc.open(url.path, flags | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            opened.append(descriptor)
            return descriptor
        }
        do {
            let input = try standardInput.map { try open($0, O_RDONLY) }
            let output = try open(standardOutputURL, O_WRONLY | O_CREAT | O_TRUNC)
            let errors = try open(standardErrorURL, O_WRONLY | O_CREAT | O_TRUNC)
            child = try ChildProcess.launch(
                executable.path,
                arguments,
                environment: environment,
                standardInput: input.map { .descriptor($0) } ?? .null,
                standardOutput: .descriptor(output),
                standardError: .descriptor(errors)
            )
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
    public var isRunning: Bool { child.isRunning }

    /// The child's process identifier.
    public var processIdentifier: Int32 { child.processIdentifier }

    /// What the process has written to standard output so far.
    public func standardOutput() throws -> Data { try Data(contentsOf: standardOutputURL) }

    /// What the process has written to standard error so far.
    public func standardError() throws -> Data { try Data(contentsOf: standardErrorURL) }

    /// Sends SIGINT, as Control-C in a terminal would, if the process is still running.
    public func interrupt() { child.send(SIGINT) }

    /// Sends SIGKILL if the process is still running.
    public func kill() { child.send(SIGKILL) }

    /// Sends SIGKILL to the child's process group (its own): the child and whatever it started.
    public func killProcessGroup() { child.sendToProcessGroup(SIGKILL) }

    /// Awaits the exit without blocking a thread; after `timeout` the process is killed (SIGKILL) and awaited.
    /// - Returns: the status and everything written to standard output and error.
    /// - Throws: `CancellationError` when the task is cancelled, after killing the process and awaiting its exit.
    public func waitForExit(timeout: Duration = .seconds(120)) async throws -> ProcessRunner.Output {
        enum Event: Sendable {
            case exited
            case deadline
            case cancelled
        }
        let child = self.child
        let timedOut = await withTaskGroup(of: Event.self) { group in
            // Not cancellable: the exit always comes, killed if need be, and is what ends the group.
            group.addTask {
                await child.waitForExit()
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
            status: await child.waitForExit().status,
            standardOutput: try standardOutput(),
            standardError: try standardError(),
            timedOut: timedOut
        )
    }
}
