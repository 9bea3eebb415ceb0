import Dispatch
import Foundation

/// Waits for SIGINT or SIGTERM so a long-running command can stop its servers cleanly.
final class SignalStop {
    private let stream: AsyncStream<Void>
    // Kept so the dispatch sources live as long as the process waits.
    private let sources: [any DispatchSourceSignal]

    init() {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self)
        self.stream = stream
        sources = [SIGINT, SIGTERM].map { signalNumber in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { continuation.yield() }
            source.resume()
            return source
        }
    }

    /// Returns when the first signal arrives.
    func wait() async {
        for await _ in stream { return }
    }
}
