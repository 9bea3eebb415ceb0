import Foundation
import StowageCore
import StowageTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("ChildProcess: players and tools started without Foundation's Process")
struct ChildProcessTests {
    /// The descriptors `ls` (the child) has open, read from its `/proc/self/fd`.
    static func childDescriptors() async throws -> Set<Int32> {
        let listed = try await ProcessRunner.run(URL(fileURLWithPath: "/bin/ls"), ["/proc/self/fd"])
        #expect(listed.status == 0)
        return Set(String(decoding: listed.standardOutput, as: UTF8.self).split(whereSeparator: \.isNewline).compactMap { Int32($0) })
    }

    @Test("with 1,000 descriptors open and more opening and closing, children start and inherit none of them")
    func manyOpenDescriptors() async throws {
        // Foundation's run() crashed reading /proc/self/fd in this state (the CI failure of stop 21).
        var held: [Int32] = []
        defer { for descriptor in held { close(descriptor) } }
        for _ in 0..<1000 {
            let descriptor = open("/dev/null", O_RDONLY)
            try #require(descriptor >= 0)
            held.append(descriptor)
        }
        let churn = Task.detached {
            for _ in 0..<20_000 where !Task.isCancelled {
                let descriptor = open("/dev/null", O_RDONLY)
                if descriptor >= 0 { close(descriptor) }
            }
        }
        defer { churn.cancel() }
        try await withThrowingTaskGroup(of: Set<Int32>.self) { group in
            for _ in 0..<24 { group.addTask { try await Self.childDescriptors() } }
            for try await descriptors in group {
                // Standard streams, and the directory `ls` itself opened.
                #expect(descriptors.isSubset(of: [0, 1, 2, 3]), "inherited: \(descriptors.sorted())")
                #expect(descriptors.isSuperset(of: [0, 1, 2]))
            }
        }
    }

    @Test("a signal ignored by the server is back to its default in the child, and the mask is empty")
    func signalsReset() async throws {
        // As a server does (left so: the test process never needs SIGPIPE's default).
        _ = signal(SIGPIPE, SIG_IGN)
        let status = try await ProcessRunner.run(URL(fileURLWithPath: "/bin/cat"), ["/proc/self/status"])
        let lines = String(decoding: status.standardOutput, as: UTF8.self).split(whereSeparator: \.isNewline)
        let ignored = try #require(lines.first { $0.hasPrefix("SigIgn:") })
        let blocked = try #require(lines.first { $0.hasPrefix("SigBlk:") })
        // glibc's own real-time signals (32, 33) cannot be reset and may be inherited ignored; SIGPIPE must not be.
        let mask = try #require(UInt64(ignored.split(separator: "\t").last ?? "", radix: 16))
        #expect(mask & (1 << UInt64(SIGPIPE - 1)) == 0, "\(ignored)")
        #expect(blocked.hasSuffix("0000000000000000"), "\(blocked)")
    }

    @Test("exit status, signal, the environment given, and a missing program")
    func endsAndErrors() async throws {
        let exited = try ChildProcess.launch("/bin/sh", ["-c", "exit 3"])
        #expect(await exited.waitForExit() == .exited(3))
        #expect(!exited.isRunning)

        let sleeper = try ChildProcess.launch("/bin/sleep", ["30"])
        #expect(sleeper.isRunning)
        sleeper.send(SIGKILL)
        #expect(await sleeper.waitForExit() == .signalled(SIGKILL))
        #expect(sleeper.termination?.status == SIGKILL)
        // After the reap the identifier may belong to another process: sending again must do nothing.
        sleeper.send(SIGKILL)

        let environment = try await ProcessRunner.run(URL(fileURLWithPath: "/usr/bin/env"), [], environment: ["ONLY": "this"])
        #expect(String(decoding: environment.standardOutput, as: UTF8.self) == "ONLY=this\n")

        do {
            _ = try ChildProcess.launch("/nonexistent/player", [])
            Issue.record("a missing program started")
        } catch {
            #expect(error.code == "program_not_started")
            #expect(error.message.contains("/nonexistent/player") && error.message.contains("No such file"))
        }
    }

    /// Whether `pid` is alive: present and not a zombie (a killed orphan may stay a zombie where PID 1 does not reap).
    static func isAlive(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return !stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    /// Polls (up to 5 s) until `pid` is gone.
    static func waitUntilGone(_ pid: Int32) async throws -> Bool {
        for _ in 0..<100 {
            if !isAlive(pid) { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    @Test("endsProcessGroupOnExit kills what a shell line left in the background; sendToProcessGroup reaches the shell's children")
    func processGroups() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func pid(in name: String) async throws -> Int32 {
            for _ in 0..<100 {
                if let text = try? String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8),
                    let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
                {
                    return pid
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            throw POSIXError(.ENOENT)
        }

        // The shell exits at once, leaving `sleep` behind: killed with the group.
        let leaving = try ChildProcess.launch(
            "/bin/sh",
            ["-c", "sleep 300 & echo $! > '\(directory.path)/left'"],
            standardOutput: .null,
            endsProcessGroupOnExit: true
        )
        #expect(await leaving.waitForExit() == .exited(0))
        let left = try await pid(in: "left")
        #expect(try await Self.waitUntilGone(left), "the background sleep \(left) outlived its shell")

        // Without the option the background process is left alone (as a shell would leave it).
        let kept = try ChildProcess.launch("/bin/sh", ["-c", "sleep 300 & echo $! > '\(directory.path)/kept'"], standardOutput: .null)
        #expect(await kept.waitForExit() == .exited(0))
        let keptPID = try await pid(in: "kept")
        #expect(Self.isAlive(keptPID))
        kill(keptPID, SIGKILL)

        // A shell waiting on its child: signalling the group ends both.
        let waiting = try ChildProcess.launch("/bin/sh", ["-c", "sleep 300 & echo $! > '\(directory.path)/waited'; wait"], standardOutput: .null)
        let waited = try await pid(in: "waited")
        waiting.sendToProcessGroup(SIGKILL)
        #expect(await waiting.waitForExit() == .signalled(SIGKILL))
        #expect(try await Self.waitUntilGone(waited))
    }
}
