/// What can happen to a download task.
public enum DownloadAction: String, Sendable, Hashable, CaseIterable {
    /// A runner takes the task (a new download, a resume, a service picking it up after a crash).
    case run
    /// Asked to wait its turn (a service's queue).
    case enqueue
    /// Paused on request (Ctrl-C, `stowage pause`): waits for the user.
    case pause
    /// Paused by a condition that may pass (disk full, network down, outside the time window): a service resumes it.
    case wait
    /// Stopped by an error a retry will not fix by itself.
    case fail
    /// Every file is in place.
    case complete
    /// More media selections asked for (`add-media`): a completed task runs again.
    case addMedia
    /// Removed (cancel, delete): partial files and state go.
    case remove
}

/// The rules of a download task's life, as one pure function (the counterpart of the lease rules): which action is
/// allowed in which state, and where it leads. ``DownloadSession`` and the download runner change a task's state only
/// through ``next(from:on:assetId:)``; the tests walk every pair.
///
/// - `run` takes a queued, paused or failed task to `downloading` (and a `downloading` one left by a process that
///   died: its asset lock is free); `addMedia` does the same from any state but `removing`, `completed` included.
/// - `enqueue` puts any task not completed or being removed back in `queued`.
/// - `pause` and `wait` take a queued, downloading or paused task to `paused` (a failed task stays failed).
/// - `fail` and `complete` come only from `downloading`.
/// - `remove` takes any task but a completed one to `removing` (a completed package goes with `delete`).
/// - `removing` accepts only `remove`, which finishes the removal.
public enum DownloadStateMachine {
    /// The state `action` leads to from `state`.
    /// - Throws: ``DownloadError/invalidState(assetId:state:action:)`` when the action is not allowed there.
    public static func next(from state: DownloadState, on action: DownloadAction, assetId: String) throws(DownloadError) -> DownloadState {
        guard let next = transition(from: state, on: action) else {
            throw DownloadError.invalidState(assetId: assetId, state: state.rawValue, action: action.phrase)
        }
        return next
    }

    /// The state `action` leads to from `state`, nil when it is not allowed.
    public static func transition(from state: DownloadState, on action: DownloadAction) -> DownloadState? {
        switch (state, action) {
        // Removal finishes whatever began it; a completed package is removed with delete (the package's own path).
        case (.removing, .remove): .removing
        case (.removing, _): nil
        case (.completed, .remove): nil
        case (_, .remove): .removing

        case (.queued, .run), (.paused, .run), (.failed, .run): .downloading
        // A task found `downloading` was left so by a process that died (its lock is free): it runs again.
        case (.downloading, .run): .downloading
        case (.completed, .addMedia): .downloading
        case (.completed, _): nil
        case (_, .addMedia): .downloading

        case (.queued, .enqueue), (.paused, .enqueue), (.failed, .enqueue), (.downloading, .enqueue): .queued

        case (.downloading, .pause), (.queued, .pause), (.paused, .pause): .paused
        case (.failed, .pause): nil
        case (.downloading, .wait), (.queued, .wait), (.paused, .wait): .paused
        case (.failed, .wait): nil

        case (.downloading, .fail): .failed
        case (_, .fail): nil

        case (.downloading, .complete): .completed
        case (_, .complete): nil

        case (_, .run): nil
        }
    }
}

extension DownloadAction {
    /// The action as the error message names it ("cannot resume").
    var phrase: String {
        switch self {
        case .run: "resume"
        case .enqueue: "queue"
        case .pause: "pause"
        case .wait: "pause"
        case .fail: "fail"
        case .complete: "complete"
        case .addMedia: "add media to"
        case .remove: "cancel"
        }
    }
}
