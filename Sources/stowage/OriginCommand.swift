import ArgumentParser
import Foundation
import OriginServer

/// `stowage origin DIR [--host 127.0.0.1] [--port N]`
struct OriginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "origin",
        abstract: "Serve a directory of HLS files over HTTP on loopback, with Range support.",
        discussion: """
            Prints 'listening on http://HOST:PORT' once ready; stops on Ctrl-C.
            Example:
              stowage origin Fixtures/playlists --port 8080
            """
    )

    @Argument(help: "The directory to serve.")
    var directory: String

    @Option(help: "The address to bind.")
    var host = "127.0.0.1"

    @Option(help: "The port; 0 picks a free one.")
    var port = 0

    func run() async throws {
        let origin = Origin(configuration: .init(root: directory, host: host, port: port))
        let task = Task {
            try await origin.run { address in
                // Unbuffered, so a script reading our output sees the line at once.
                FileHandle.standardOutput.write(Data("listening on \(address.baseURL.absoluteString)\n".utf8))
            }
        }
        let signals = SignalStop()
        await signals.wait()
        task.cancel()
        do {
            try await task.value
        } catch is CancellationError {
        } catch let error as OriginError {
            CommandOutput.fail(code: "origin_not_a_directory", message: error.description, json: false)
        }
    }
}
