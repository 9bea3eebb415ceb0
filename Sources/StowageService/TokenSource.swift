import Foundation
import KeyDelivery
import StowageCore
import StowageLibrary

/// Where lease upkeep gets the entitlement token for a renewal: the user's `--token-command` (run with the lease's
/// asset, lease ID and key server in its environment; its first line of output is the token), else the token the
/// asset was downloaded with.
struct TokenSource: Sendable {
    let library: OfflineLibrary
    let command: String?
    /// How long the command may run; then it and everything it started are killed and no token is given.
    var timeout: Duration = .seconds(30)

    /// - Throws: what reading the asset's download record threw (a store that cannot be read is not "no token").
    func token(for lease: StoredLease) async throws -> String? {
        if let command { return await run(command, lease) }
        guard let record = try library.downloadRecord(assetId: lease.assetId) else { return nil }
        if let damage = record.secretsDamage { throw damage }
        return record.request.token
    }

    private func run(_ command: String, _ lease: StoredLease) async -> String? {
        var environment = SecretInput.childEnvironment
        environment["STOWAGE_ASSET_ID"] = lease.assetId
        environment["STOWAGE_LEASE_ID"] = lease.leaseId
        environment["STOWAGE_KEY_SERVER"] = lease.keyServer
        return await Self.firstLine(of: command, environment: environment, timeout: timeout)
    }

    /// The first line `command` (run by `/bin/sh -c`) writes, if it exits 0 within `timeout`; nil otherwise.
    static func firstLine(of command: String, environment: [String: String], timeout: Duration) async -> String? {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { return nil }
        // Children started elsewhere close every inherited descriptor anyway (ChildProcess); this is for exec.
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let child: ChildProcess
        do {
            child = try ChildProcess.launch(
                "/bin/sh",
                ["-c", command],
                environment: environment,
                standardOutput: .descriptor(ends[1]),
                standardError: .null,
                // What the line leaves in the background would hold the pipe open, and the read with it.
                endsProcessGroupOnExit: true
            )
        } catch {
            close(ends[0])
            close(ends[1])
            return nil
        }
        close(ends[1])
        // A token is a line; a command that writes more than 64 KiB or runs past the timeout is not giving one.
        let reader = FileHandle(fileDescriptor: ends[0], closeOnDealloc: true)
        let output = Task.detached { reader.readData(ofLength: 64 << 10) }
        let watchdog = Task { [timeout] in
            try await Task.sleep(for: timeout)
            child.sendToProcessGroup(SIGKILL)  // the shell and what it runs (`sleep 60; echo token`)
        }
        let ended = await child.waitForExit()
        watchdog.cancel()
        let data = await output.value
        guard ended == .exited(0) else { return nil }
        let line = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first?.trimmingCharacters(in: .whitespaces)
        return line?.isEmpty == false ? line : nil
    }
}
