import Foundation
public import KeyDelivery
public import OfflinePackage
public import StowageCore

/// What ``OfflineLibrary/recoverDatabase(in:clock:)`` did: where the damaged `stowage.sqlite` went, and the packages
/// found beside it, untouched, that need their keys again.
public struct DatabaseRecovery: Sendable, Hashable, Codable {
    /// The damaged file's new path (`stowage.sqlite.damaged-20261127T053000Z`), kept for whoever wants to salvage it.
    public var setAsideAt: String
    /// SQLite's words for the damage.
    public var damage: String
    /// The packages in the data directory, by asset ID.
    public var assets: [Asset]

    public struct Asset: Sendable, Hashable, Codable {
        public var assetId: String
        /// `complete`, or `incomplete` for a download the damaged file was running (its record is gone: delete it and
        /// download again).
        public var state: String
        /// Whether it uses keys that `stowage keys fetch` obtains again (skd keys, or identity keys from a URL).
        public var needsKeys: Bool
    }
}

/// Why `stowage recover` did nothing.
public struct RecoveryError: StowageError, Hashable {
    public let code: ErrorCode
    public let message: String

    public var description: String { "\(code): \(message)" }

    static func notDamaged(_ path: String) -> Self {
        Self(
            code: .databaseNotDamaged,
            message: "\(path) is whole (SQLite's quick_check finds no damage), so nothing was moved; `stowage recover` is only for a "
                + "state database SQLite reports as damaged"
        )
    }

    static func busy(_ path: String, holder: String) -> Self {
        Self(
            code: .dataDirectoryBusy,
            message: "\(holder) uses the data directory \(path); stop it (Ctrl-C where `stowage service run` runs, or "
                + "`systemctl --user stop stowage`; `stowage pause ASSET` or Ctrl-C for a download) and run `stowage recover` again"
        )
    }
}

extension OfflineLibrary {
    /// Sets a damaged `stowage.sqlite` aside and starts a new one, as `stowage recover` does. Packages, their manifests
    /// and the device's keys and clock anchor stay where they are; the leases, identity keys, download records and audit
    /// journal of the damaged file are lost with it (the file is kept, renamed). Each package then needs its keys again:
    /// ``fetchKeys(assetId:keyServerURL:token:)``. The sealed clock anchor (`key-store.anchor`) stays, so damaging the
    /// file is no way around the clock-rollback defence; whether a lease fetched again starts a new playback window is
    /// the key server's policy (`oncePerAccount` carries the first play, docs/key-protocol-extensions.md), as for a new
    /// download. First plays not yet reported to the key server are lost with the file.
    ///
    /// - Throws: ``RecoveryError`` `database_not_damaged` when SQLite finds the file whole, `data_directory_busy` while a
    ///   download or the service holds the directory; ``OfflinePackage/DataDirectoryError`` for an unusable directory.
    public static func recoverDatabase(
        in dataDirectory: DataDirectory = .fromEnvironment(),
        clock: any KeyDelivery.Clock = SystemClock()
    ) async throws -> DatabaseRecovery {
        try dataDirectory.prepare()
        let path = dataDirectory.databaseURL.path
        let service = dataDirectory.url.appendingPathComponent("service.lock")
        if let holder = AssetLock.currentHolder(of: service, name: "service") { throw RecoveryError.busy(dataDirectory.url.path, holder: holder) }
        let locks = AssetLock.directory(in: dataDirectory)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: locks.path)) ?? [] where name.hasSuffix(".lock") {
            if let holder = AssetLock.currentHolder(of: locks.appendingPathComponent(name), name: String(name.dropLast(5))) {
                throw RecoveryError.busy(dataDirectory.url.path, holder: holder)
            }
        }
        guard let damage = StateDatabase.damage(at: path) else { throw RecoveryError.notDamaged(path) }

        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        let aside = try StateDatabase.setAside(path, stamp: formatter.string(from: Date(timeIntervalSince1970: TimeInterval(clock.now))))

        // Opening the library makes the new, empty state database.
        let library = try OfflineLibrary(dataDirectory: dataDirectory, clock: clock)
        let summaries: [AssetSummary]
        do {
            summaries = try library.assets()
            await library.close()
        } catch {
            await library.close()
            throw error
        }
        var assets: [DatabaseRecovery.Asset] = []
        for summary in summaries {
            // A manifest that does not read is listed as it is; `stowage info` says why.
            let keys = (try? PackageDirectory(assetId: summary.assetId, in: dataDirectory).readManifest())?.keys ?? []
            assets.append(
                .init(
                    assetId: summary.assetId,
                    state: summary.state == "complete" ? "complete" : "incomplete",
                    needsKeys: keys.contains { $0.kind == .skd || !InlineKeyURI.isReference($0.uri) }
                )
            )
        }
        return DatabaseRecovery(setAsideAt: aside, damage: damage, assets: assets)
    }
}
