public import Foundation

/// The executables that `swift build --build-tests` puts beside the test bundle, shared by the test targets.
public enum StowageExecutable {
    /// `$STOWAGE_BIN`, else the `stowage` found next to (or a few folders above) the running test binary.
    /// - Throws: when there is none: the tests that run it fail rather than skip.
    public static func url() throws -> URL {
        if let path = ProcessInfo.processInfo.environment["STOWAGE_BIN"] { return URL(fileURLWithPath: path) }
        return try product(named: "stowage")
    }

    /// The executable product `name` found next to (or a few folders above) the running test binary.
    /// - Throws: when there is none: the tests that run it fail rather than skip.
    public static func product(named name: String) throws -> URL {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        throw FrameHashes.Failure(description: "the \(name) executable is not built beside the tests (swift build --build-tests builds it)")
    }
}
