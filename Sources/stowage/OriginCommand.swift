import ArgumentParser
import Foundation
import OriginServer

/// `stowage origin DIR [--host 127.0.0.1] [--port N] [--profile NAME] [--seed N] [...]`
struct OriginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "origin",
        abstract: "Serve a directory of HLS files over HTTP on loopback, with Range support and network conditioning.",
        discussion: """
            Prints 'listening on http://HOST:PORT' once ready; stops on Ctrl-C. Like Network Link Conditioner, it can
            shape the link: a named profile (lan, wifi, 3g, edge, lossy, very-bad) and/or individual settings, which
            override the profile's. Faults are decided by --seed, so a run can be repeated exactly.
            Example:
              stowage origin Fixtures/demo --port 8080
              stowage origin Fixtures/demo --profile lossy --seed 42
              stowage origin Fixtures/demo --bandwidth 200000 --latency 100 --error-rate 0.05
            With --live, every complete media playlist is served as a live stream: a window of --window segments
            whose live edge advances in real time (--speed times faster), with EXT-X-PROGRAM-DATE-TIME on every
            segment and EXT-X-ENDLIST once the source is exhausted (--loop starts it again instead; --event grows an
            EVENT playlist that never slides). Segment files are served as always.
              stowage origin Fixtures/demo --live --window 3 --speed 4
            """
    )

    @Argument(help: "The directory to serve.")
    var directory: String

    @Option(help: "The address to bind.")
    var host = "127.0.0.1"

    @Option(help: "The port; 0 picks a free one.")
    var port = 0

    @Option(help: "A named link profile: \(NetworkConditions.profileNames.joined(separator: ", ")).")
    var profile: String?

    @Option(help: "The seed that decides which requests fault.")
    var seed: UInt64 = 0

    @Option(help: "Bytes per second shared by all connections.")
    var bandwidth: Int?

    @Option(help: "Milliseconds added before each response head.")
    var latency: Int?

    @Option(help: "Fraction of requests answered 503 (a third of them 429 with Retry-After).")
    var errorRate: Double?

    @Option(help: "Fraction of responses reset part way through the body.")
    var resetRate: Double?

    @Option(help: "Fraction of responses whose body ends before its Content-Length.")
    var truncateRate: Double?

    @Option(help: "Fraction of responses whose body pauses once.")
    var stallRate: Double?

    @Option(help: "How long a stalled body pauses, in milliseconds.")
    var stallMs: Int?

    @Flag(help: "Serve each complete media playlist as a live stream that advances in real time.")
    var live = false

    @Option(help: "With --live: segments in the sliding window (and in the stream when the origin starts).")
    var window = 6

    @Option(help: "With --live: media seconds per real second.")
    var speed = 1.0

    @Flag(help: "With --live: grow an EVENT playlist that never slides.")
    var event = false

    @Flag(help: "With --live: start the source again when it is exhausted, forever, instead of ending the stream.")
    var loop = false

    func validate() throws {
        if let profile, NetworkConditions.profile(named: profile) == nil {
            throw ValidationError("unknown profile '\(profile)'; use one of \(NetworkConditions.profileNames.joined(separator: ", "))")
        }
        for (name, rate) in [("error", errorRate), ("reset", resetRate), ("truncate", truncateRate), ("stall", stallRate)] {
            if let rate, !(0...1).contains(rate) { throw ValidationError("--\(name)-rate must be between 0 and 1") }
        }
        if let bandwidth, bandwidth < 1 { throw ValidationError("--bandwidth must be at least 1 byte per second") }
        if window < 1 { throw ValidationError("--window must be at least 1 segment") }
        if !(speed > 0 && speed <= 1000) { throw ValidationError("--speed must be above 0 and at most 1000") }
        if !live, event || loop { throw ValidationError("--event and --loop need --live") }
    }

    var conditions: NetworkConditions {
        var conditions = profile.flatMap(NetworkConditions.profile(named:)) ?? .unconditioned
        if let bandwidth { conditions.bandwidthBytesPerSecond = bandwidth }
        if let latency { conditions.latencyMilliseconds = latency }
        if let errorRate { conditions.errorRate = errorRate }
        if let resetRate { conditions.resetRate = resetRate }
        if let truncateRate { conditions.truncateRate = truncateRate }
        if let stallRate { conditions.stallRate = stallRate }
        if let stallMs { conditions.stallMilliseconds = stallMs }
        return conditions
    }

    func run() async throws {
        let simulation = live ? LiveSimulation(window: window, speed: speed, event: event, loop: loop) : nil
        let origin = Origin(
            configuration: .init(root: directory, host: host, port: port, conditions: conditions, seed: seed, live: simulation)
        )
        let service = OriginService(origin) { address in
            // Unbuffered, so a script reading our output sees the line at once.
            Terminal.standardOutput("listening on \(address.baseURL.absoluteString)\n")
        }
        do {
            try await CommandOutput.runUntilSignalled([service])
        } catch {
            CommandOutput.fail(error, json: false)  // origin_root_invalid, or cannot bind
        }
    }
}
