import Foundation
import KeyDelivery
import StowageLibrary

/// Where lease upkeep gets the entitlement token for a renewal: the user's `--token-command` (run with the lease's
/// asset, lease ID and key server in its environment; its first line of output is the token), else the token the
/// asset was downloaded with.
struct TokenSource: Sendable {
    let library: OfflineLibrary
    let command: String?

    func token(for lease: StoredLease) async -> String? {
        if let command { return await run(command, lease) }
        return (try? library.downloadRecord(assetId: lease.assetId))?.request.token
    }

    private func run(_ command: String, _ lease: StoredLease) async -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        var environment = ProcessInfo.processInfo.environment
        environment["STOWAGE_ASSET_ID"] = lease.assetId
        environment["STOWAGE_LEASE_ID"] = lease.leaseId
        environment["STOWAGE_KEY_SERVER"] = lease.keyServer
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        let (ended, continuation) = AsyncStream.makeStream(of: Int32.self)
        process.terminationHandler = { continuation.yield($0.terminationStatus) }
        do {
            try process.run()
        } catch {
            return nil
        }
        // A token is a line; a command that writes more than 64 KiB or runs past 30 s is not giving one.
        let reader = Task.detached { output.fileHandleForReading.readData(ofLength: 64 << 10) }
        let watchdog = Task {
            try await Task.sleep(for: .seconds(30))
            process.terminate()
        }
        var status: Int32 = -1
        for await code in ended {
            status = code
            break
        }
        watchdog.cancel()
        let data = await reader.value
        guard status == 0 else { return nil }
        let line = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init)
        return line?.trimmingCharacters(in: .whitespaces).isEmpty == false ? line?.trimmingCharacters(in: .whitespaces) : nil
    }
}
