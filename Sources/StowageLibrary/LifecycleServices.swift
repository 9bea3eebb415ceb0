public import AssetDownload
public import ServiceLifecycle

/// A foreground download as a swift-service-lifecycle `Service`: it runs until the task ends. A graceful shutdown of
/// its group (SIGTERM, Ctrl-C) pauses the task, which keeps its files for `resume`; a live recording ends instead, and
/// is kept, and cancelling the group pauses it where it is. For an app that runs its downloads in a `ServiceGroup`;
/// `stowage download` traps the signals itself, before the task starts, and calls ``DownloadTask/interrupt()`` for
/// each.
public struct DownloadTaskService: Service {
    public let task: DownloadTask

    public init(_ task: DownloadTask) {
        self.task = task
    }

    public func run() async throws {
        let task = self.task
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                _ = try? await task.result()
            } onGracefulShutdown: {
                // A live recording ends and is kept; a VOD download pauses.
                task.interrupt()
            }
        } onCancel: {
            task.pause()
        }
        // The task is a task of its own: the service ends when it has stopped, so nothing is left writing.
        _ = try? await task.result()
    }
}

/// A playback session as a swift-service-lifecycle `Service`: it runs until the session ends by itself (the player
/// exits, the lease ends, the package is deleted), and a graceful shutdown of its group stops it (the player too).
/// `stowage play` runs one in a `ServiceGroup` with SIGTERM and SIGINT.
public struct PlaybackService: Service {
    public let handle: PlaybackHandle

    public init(_ handle: PlaybackHandle) {
        self.handle = handle
    }

    public func run() async throws {
        let handle = self.handle
        _ = try await withGracefulShutdownHandler {
            try await handle.ended()
        } onGracefulShutdown: {
            Task { await handle.stop() }
        }
    }
}
