/// The phases of one download run, in the order the runner takes them, as a value: what comes next is decided here
/// from what is known so far (as `LeaseLifecycle` decides a lease's), so the order is tested without a network, a
/// database or a clock.
///
/// - ``plan(fresh:)``: read the stored plan, or plan afresh (a new task, or more media asked for).
/// - ``keys``: every key of a finite stream before any file, so a key server that refuses costs no bytes.
/// - ``recording``: a live or EVENT stream not yet ended: reconcile what a killed run left, then record beside the
///   transfer (its keys are obtained as they appear: a live window leaves no time to wait for them first).
/// - ``transfer(recording:)``: the workers fetch every pending file, with the recorder when recording.
/// - ``finish``: sizes and checksums into the manifest; the task is complete.
enum DownloadPhase: Hashable, Sendable {
    case plan(fresh: Bool)
    case keys
    case recording
    case transfer(recording: Bool)
    case finish
    case done

    /// What the order depends on, as far as known.
    struct Facts: Hashable, Sendable {
        /// A manifest from an earlier run is on disk.
        var hasStoredPlan = false
        /// More media selections were asked for (`add-media`).
        var addsMedia = false
        /// The plan lists keys.
        var hasKeys = false
        /// The stored task says every key was obtained.
        var keysAcquired = false
        /// The plan is a recording that has not reached its end.
        var isLive = false
    }

    /// The most phases one run goes through (plan, keys or recording, transfer, finish, done): a bound for the runner.
    static let mostSteps = 5

    /// The first phase of a run.
    static func first(_ facts: Facts) -> DownloadPhase {
        .plan(fresh: !facts.hasStoredPlan || facts.addsMedia)
    }

    /// The phase after this one.
    func next(_ facts: Facts) -> DownloadPhase {
        switch self {
        case .plan:
            if facts.isLive { .recording } else if facts.hasKeys && !facts.keysAcquired { .keys } else { .transfer(recording: false) }
        case .keys: .transfer(recording: false)
        case .recording: .transfer(recording: true)
        case .transfer: .finish
        case .finish, .done: .done
        }
    }
}
