import ArgumentParser

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
            PackageCommand.self, DownloadCommand.self, ResumeCommand.self, CancelCommand.self, AddMediaCommand.self,
            ListCommand.self, InfoCommand.self, VerifyCommand.self, PlayCommand.self, DeleteCommand.self, DemoCommand.self,
        ]
    )
}
