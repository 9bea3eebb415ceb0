/// What the origin does to one request: the fault it injects and where in the body.
///
/// A plan is a pure function of the conditions, the seed, the request path, its `Range` header and the attempt
/// number (how many requests for that path came before), so the same inputs always give the same plan.
struct FaultPlan: Sendable, Hashable {
    enum Action: Sendable, Hashable {
        case none
        /// Answer 503, or 429 with `Retry-After: 1` when `tooManyRequests`.
        case error(tooManyRequests: Bool)
        /// Reset the connection once this fraction of the body was sent.
        case reset(atFraction: Double)
        /// Close the connection once this fraction of the body was sent.
        case truncate(atFraction: Double)
        /// Pause once this fraction of the body was sent.
        case stall(atFraction: Double, milliseconds: Int)
    }

    var action: Action

    init(action: Action) {
        self.action = action
    }

    init(conditions: NetworkConditions, seed: UInt64, path: String, range: String?, attempt: Int) {
        var hash = FNV1a64()
        hash.combine(seed)
        hash.combine(path.utf8)
        hash.combine([0])
        if let range {
            hash.combine([1])
            hash.combine(range.utf8)
        } else {
            hash.combine([0])
        }
        hash.combine([0])
        hash.combine(UInt64(max(0, attempt)))
        var random = SplitMix64(seed: hash.value)
        // Every draw happens whatever the rates are, so changing one rate does not reshuffle the others' outcomes.
        let error = random.nextUnit()
        let tooMany = random.nextUnit() < 1.0 / 3.0
        let reset = random.nextUnit()
        let truncate = random.nextUnit()
        let stall = random.nextUnit()
        let fraction = random.nextUnit()
        if error < conditions.errorRate {
            action = .error(tooManyRequests: tooMany)
        } else if reset < conditions.resetRate {
            action = .reset(atFraction: fraction)
        } else if truncate < conditions.truncateRate {
            action = .truncate(atFraction: fraction)
        } else if stall < conditions.stallRate && conditions.stallMilliseconds > 0 {
            action = .stall(atFraction: fraction, milliseconds: conditions.stallMilliseconds)
        } else {
            action = .none
        }
    }

    /// The fault this plan injects, as the request log records it.
    var fault: NetworkFault {
        switch action {
        case .none: .none
        case .error: .error
        case .reset: .reset
        case .truncate: .truncate
        case .stall: .stall
        }
    }

    /// The byte offset in a body of `length` bytes at which a reset, truncation or stall happens: always inside the
    /// body, so a cut body is shorter than declared. `nil` when the plan does nothing to bodies or the body is empty.
    func cutOffset(bodyLength length: Int) -> Int? {
        guard length > 0 else { return nil }
        switch action {
        case .reset(let fraction), .truncate(let fraction), .stall(let fraction, _):
            return min(length - 1, Int(fraction * Double(length)))
        case .none, .error:
            return nil
        }
    }
}
