/// A server started in a task of its own, once it listens: the address it reported and the task that runs it.
///
/// A server reports its address from inside its `run` (an `onListening` callback), so the caller waits for that
/// report. A server that ends before it listens (its port taken, its store unusable) never reports one, and a caller
/// that waited on a stream its task never finished waited forever: that hung a whole test run with no CPU, no socket
/// and no timer left (docs/RELIABILITY.md). ``start(_:)`` ends the wait when the task ends and throws the server's own
/// error.
///
/// ```swift
/// let started = try await ListeningServer.start { onListening in
///     try await server.run(port: 0, onListening: onListening)
/// }
/// guard let address = started.address else { ... }  // ended without an error and without listening
/// defer { started.task.cancel() }
/// ```
public struct ListeningServer<Address: Sendable, End: Sendable>: Sendable {
    /// The address the server reported; nil when it returned before listening without an error.
    public let address: Address?
    /// The task running the server: cancel it to stop the server, await its value for how it ended.
    public let task: Task<End, any Error>

    /// Runs `run` in a new task and returns once it has called its `onListening` with an address, or has ended.
    ///
    /// - Parameter run: runs the server, calling `onListening` once it listens.
    /// - Throws: the server's error when it ended before it listened. When the calling task is cancelled while it
    ///   waits, the server's task is cancelled too.
    public static func start(
        _ run: @escaping @Sendable (_ onListening: @escaping @Sendable (Address) async -> Void) async throws -> End
    ) async throws -> ListeningServer<Address, End> {
        let (addresses, continuation) = AsyncStream.makeStream(of: Address.self, bufferingPolicy: .bufferingOldest(1))
        let task = Task {
            // Finished however the server ends, so the wait below always ends too.
            defer { continuation.finish() }
            return try await run { continuation.yield($0) }
        }
        let address = await withTaskCancellationHandler {
            var iterator = addresses.makeAsyncIterator()
            return await iterator.next()
        } onCancel: {
            task.cancel()
        }
        if address == nil {
            // Ended (or cancelled) before it listened: its own error says why.
            _ = try await task.value
        }
        return ListeningServer(address: address, task: task)
    }
}
