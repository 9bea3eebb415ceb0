import ArgumentParser
import StowageCore
import StowageLibrary

/// The `stowage` command: thin; each subcommand parses its arguments and calls a library module.
@main
struct Stowage: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stowage",
        abstract: "Take protected HLS video offline: inspect, download, keep keys under a lease, verify and play.",
        discussion: """
            Data directory: $STOWAGE_HOME, else $XDG_DATA_HOME/stowage, else ~/.local/share/stowage.
            Documentation: README.md and docs/ in the source tree.
            """,
        subcommands: [
            InspectCommand.self, SegmentCommand.self, DecryptCommand.self, OriginCommand.self, KeyServerCommand.self, KeysCommand.self,
            PackageCommand.self, DownloadCommand.self, ResumeCommand.self, StopCommand.self, PauseCommand.self, CancelCommand.self,
            AddMediaCommand.self,
            ListCommand.self, InfoCommand.self, VerifyCommand.self, PlayCommand.self, ExportCommand.self, DeleteCommand.self, RecoverCommand.self,
            ServiceCommand.self,
            DemoCommand.self,
        ]
    )

    /// Runs the command, after recording the time it sees in the data directory's key store when there is one: every
    /// command moves the clock-rollback mark forward and erases expired keys (docs/SECURITY.md), even one that never
    /// reads a lease. A command run where no data directory exists yet creates none.
    static func main() async {
        // Before any other thread allocates: glibc's limit on heap arenas only binds arenas not yet made.
        if CommandLine.arguments.dropFirst().first == "play" { HeapTuning.keepStreamingBuffersInHeap() }
        OfflineLibrary.recordTime()
        await main(nil)
    }
}
