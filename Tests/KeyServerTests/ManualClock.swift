import KeyServer
import Synchronization

/// A clock the test moves by hand; the server reads it through ``keyServerClock``.
final class ManualClock: Sendable {
    private let time: Mutex<Double>

    init(_ start: Int64 = 1_763_700_000) {
        time = Mutex(Double(start))
    }

    var now: Int64 { time.withLock { Int64($0) } }

    func advance(by seconds: Int64) {
        time.withLock { $0 += Double(seconds) }
    }

    var keyServerClock: KeyServerClock {
        KeyServerClock { [self] in time.withLock { $0 } }
    }
}
