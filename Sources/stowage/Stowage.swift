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
            Documentation: man stowage-COMMAND; README.md and docs/ in the source tree (docs/cli.md for every command).
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
        let arguments = Array(CommandLine.arguments.dropFirst())
        let json = arguments.contains("--json")
        var command: any ParsableCommand
        do {
            command = try parseAsRoot(arguments)
        } catch {
            // --help, --version and completion scripts are ArgumentParser's own; every other parse or validation
            // failure is an error like any other: `error: MESSAGE [invalid_arguments]`, or JSON with --json; status 2.
            guard exitCode(for: error) != .success else { exit(withError: error) }
            CommandOutput.fail(ArgumentsError(message: message(for: error), command: Self.commandPath(arguments)), json: json, status: 2)
        }
        do {
            if var asynchronous = command as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch let error as any StowageError {
            CommandOutput.fail(error, json: json)
        } catch let error as ValidationError {
            CommandOutput.fail(ArgumentsError(message: error.message, command: Self.commandPath(arguments)), json: json, status: 2)
        } catch {
            // An exit status a command asks for, and the help a command group prints when run without a subcommand.
            if error is ExitCode || exitCode(for: error) == .success { exit(withError: error) }
            CommandOutput.fail(error, json: json)
        }
    }

    /// The subcommand the arguments name (`stowage keys renew` for `keys renew movie --json`): the words that name
    /// subcommands, from the first argument on.
    static func commandPath(_ arguments: [String]) -> String {
        var path = ["stowage"]
        var commands: [any ParsableCommand.Type] = configuration.subcommands
        for argument in arguments {
            guard let next = commands.first(where: { $0._commandName == argument }) else { break }
            path.append(argument)
            commands = next.configuration.subcommands
        }
        return path.joined(separator: " ")
    }
}

/// Arguments a command cannot take: an unknown option, a missing value, a value out of range.
struct ArgumentsError: StowageError {
    let message: String
    let code = ErrorCode.invalidArguments

    init(message: String, command: String) {
        // One line: the parser's message may add a "Help:" line for the argument it names.
        var sentence = message.split(whereSeparator: \.isNewline).map { $0.split(separator: " ").joined(separator: " ") }.joined(separator: "; ")
        if let last = sentence.last, !".!?".contains(last) { sentence += "." }
        self.message = "\(sentence) Run `\(command) --help` for its options and an example."
    }

    var description: String { "\(code): \(message)" }
}
