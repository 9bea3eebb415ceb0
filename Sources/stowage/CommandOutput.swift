import ArgumentParser
import Foundation
import KeyDelivery
import Logging
import ServiceLifecycle
import StowageCore
import UnixSignals

/// An error the command line raises itself: an argument it cannot use.
struct CommandLineError: StowageError {
    let code: ErrorCode
    let message: String

    var description: String { "\(code): \(message)" }
}

extension CommandOutput {
    /// Runs `services` in one swift-service-lifecycle `ServiceGroup` that turns SIGTERM and SIGINT into a graceful
    /// shutdown; returns when they have ended (a service that ends by itself ends the group).
    static func runUntilSignalled(_ services: [any Service]) async throws {
        var logger = Logger(label: "stowage")
        logger.logLevel = .error
        let group = ServiceGroup(
            configuration: .init(
                services: services.map { .init(service: $0, successTerminationBehavior: .gracefullyShutdownGroup) },
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        try await group.run()
    }
}

/// `--json` for commands that print a short report: the report, or the error, as JSON on standard output.
/// `--ca-file`: the commands that reach HTTPS origins or key servers.
struct TLSOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "A PEM file of CA certificates to trust besides the system's, for https origins and key servers.",
            discussion: "Defaults to STOWAGE_CA_FILE (which every command and the download service honour).",
            valueName: "file"
        )
    )
    var caFile: String?

    var trust: TLSTrust { caFile.map { TLSTrust(caFile: $0) } ?? .fromEnvironment() }
}

/// `--proxy`: for every command that reaches origins or key servers.
struct ProxyOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The proxy every request goes through: http://HOST:PORT, socks5://HOST:PORT, or '' for none (a password goes in HTTPS_PROXY).",
            discussion: "Defaults to HTTPS_PROXY (https URLs), HTTP_PROXY (http URLs) or ALL_PROXY; NO_PROXY names hosts reached directly.",
            valueName: "url"
        )
    )
    var proxy: String?

    /// The proxies these options and the environment give. A password is never taken from the command line, where
    /// every user can read it: it belongs in HTTPS_PROXY (the environment is the user's alone).
    func settings() throws -> ProxySettings {
        let environment = ProcessInfo.processInfo.environment
        guard let proxy else { return try .fromEnvironment(environment) }
        if let components = URLComponents(string: proxy), components.password != nil {
            throw SecretInputError.proxyPasswordOnCommandLine
        }
        return try ProxySettings(proxy: proxy, noProxy: environment["no_proxy"] ?? environment["NO_PROXY"])
    }
}

/// `--user-agent`, `--referer`, `--cookies`: what a user brings from a browser session.
struct BrowserOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The User-Agent header of every request.", valueName: "text"))
    var userAgent: String?

    @Option(help: ArgumentHelp("The Referer header of every request (the page the stream plays on).", valueName: "url"))
    var referer: String?

    @Option(
        help: ArgumentHelp(
            "A Netscape cookie file (as curl, yt-dlp and browsers' export extensions write it).",
            discussion: "Each cookie goes only to the hosts its line names, under its path, secure ones over https only.",
            valueName: "file"
        )
    )
    var cookies: String?

    func validate() throws {
        for (name, value) in [("--user-agent", userAgent), ("--referer", referer)] {
            if let value, value.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) {
                throw ValidationError("\(name) cannot hold a line break")
            }
        }
    }

    /// The headers these options give, the cookie file read now.
    func headers() throws -> BrowserHeaders {
        BrowserHeaders(userAgent: userAgent, referer: referer, cookies: try cookies.map { try BrowserHeaders.cookies(inFile: $0, at: Date()) } ?? [])
    }
}

struct OutputOptions: ParsableArguments {
    @Flag(help: "Print the result, or the error, as JSON on standard output.")
    var json = false
}

/// How every command reports a failure, in one shape: `error: MESSAGE [CODE]` on standard error, or with `--json`
/// `{"error": {"code": ..., "message": ..., "assetId": ...}}` on standard output; then the exit status (1 unless the
/// command says otherwise).
///
/// Errors of Stowage's modules carry their own code and message (``StowageError``); anything else is never printed
/// with its raw description (a Foundation or NIO type dump says nothing to a user).
enum CommandOutput {
    static func fail(_ error: any Error, json: Bool, status: Int32 = 1) -> Never {
        let error = presentable(error)
        if json {
            print(encodedJSON(error))
        } else {
            Terminal.standardError(Terminal.errorLine(error.message, code: error.code.rawValue))
        }
        exit(status)
    }

    /// A failure that does not end the command (`download --play` whose playback is refused while the download goes
    /// on): `error: MESSAGE [CODE]` on standard error, or with `--json` the event line
    /// `{"event": EVENT, "error": {...}}` on standard output, so that a last `{"error": ...}` line still means the
    /// command failed.
    static func warn(_ error: any Error, event: String, json: Bool) {
        let error = presentable(error)
        if json {
            struct Line: Encodable {
                var event: String
                var error: ErrorDocument.Body
            }
            print(Library.line(Line(event: event, error: ErrorDocument(error).error)))
        } else {
            Terminal.standardError(Terminal.errorLine(error.message, code: error.code.rawValue))
        }
    }

    /// What `body` returns; an error it throws ends the command, printed as by ``fail(_:json:status:)``.
    static func succeeding<Value>(json: Bool, _ body: () throws -> Value) -> Value {
        do {
            return try body()
        } catch {
            fail(error, json: json)
        }
    }

    static func fail(code: ErrorCode, message: String, json: Bool) -> Never {
        fail(CommandLineError(code: code, message: message), json: json)
    }

    /// The error as a ``StowageError``: itself when it is one, else a message that names what kind of failure it was.
    static func presentable(_ error: any Error) -> any StowageError {
        switch error {
        case let error as any StowageError: return error
        case let error as ValidationError: return CommandLineError(code: .invalidArguments, message: error.message)
        case is CancellationError: return CommandLineError(code: .cancelled, message: "Stopped before it finished; run the command again.")
        default:
            return CommandLineError(
                code: .internalError,
                message: "Stowage failed in a way it does not describe yet (\(type(of: error))). Run the command again; if it "
                    + "fails the same way, report it with the command line."
            )
        }
    }

    /// `{"error": {"code", "message", and the subject's members}}`, keys sorted.
    static func encodedJSON(_ error: any StowageError) -> String { ErrorDocument(error).json() }
}
