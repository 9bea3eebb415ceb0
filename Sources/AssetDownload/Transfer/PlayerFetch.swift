public import Foundation
import KeyDelivery
import NIOCore
import OfflinePackage

extension DownloadSession {
    /// Fetches one file of a package whose download is not running (paused, or failed part-way) because a player
    /// asked for it, and puts it in the package exactly as the download would have: streamed to a part file, hashed,
    /// flushed, renamed into place, recorded in `stowage.sqlite` and written to the package's access log. A later
    /// `resume` therefore never fetches it again.
    ///
    /// A player is waiting, so this tries three times in all, waits at most `headTimeoutSeconds` for each response
    /// head and does not wait out a network that is down. The part file is this process's own
    /// (`NAME.play-PID.part`, removed when the fetch fails): a download started meanwhile in another process writes
    /// its own part file, and whichever renames last puts the same bytes in place.
    ///
    /// - Returns: the file's size and SHA-256 (the recorded ones when it was already in place).
    /// - Throws: ``DownloadError`` saying what the source did.
    public func fetchForPlayer(path: String, assetId: String, headTimeoutSeconds: Int64 = 5) async throws(DownloadError) -> CompletedFile {
        if let done = try store.completedFile(assetId, path: path) { return done }
        let package = try Self.packageDirectory(assetId, in: dataDirectory)
        let manifest: PackageManifest
        do {
            manifest = try package.readManifest()
        } catch {
            throw .package(code: error.code, message: error.description)
        }
        guard let rendition = manifest.renditions.first(where: { $0.files.contains { $0.path == path } }),
            let file = rendition.files.first(where: { $0.path == path })
        else {
            throw .segmentFailed(path: path, url: "-", reason: "it is not a file of asset \(assetId)'s package")
        }
        let headers = try store.task(assetId)?.request.scopedHeaders ?? ScopedHeaders.none
        let fetcher = FileFetcher(
            client: http,
            configuration: .init(
                headers: headers,
                headTimeout: .seconds(headTimeoutSeconds),
                transferTimeout: .seconds(configuration.transferTimeout),
                retry: RetryPolicy(maximumAttempts: 3, initialDelay: 0.2, maximumDelay: 1, networkDownGrace: 0),
                link: configuration.bandwidth
            )
        )
        let destination: URL
        do {
            destination = try package.url(forRelativePath: file.path)
        } catch {
            throw .package(code: error.code, message: error.description)
        }
        let part = Self.partFile(of: destination, forPlayer: true)
        let accessLog = try? ExtendedLogFile(url: package.accessLogURL, fields: ExtendedLogFile.accessFields)
        let errorLog = try? ExtendedLogFile(url: package.errorLogURL, fields: ExtendedLogFile.errorFields)
        do {
            let staged = try await fetcher.fetch(
                file,
                to: destination,
                part: part,
                log: DownloadRunner.attemptLog(file, rendition.id, accessLog, errorLog)
            )
            try await fetcher.place(staged)
            try store.recordFile(assetId, path: file.path, size: staged.done.size, sha256: staged.done.sha256)
            return staged.done
        } catch {
            try? FileManager.default.removeItem(at: part)
            throw DownloadRunner.wrap(error)
        }
    }

    /// The part file a transfer of `destination` writes until the file is whole: the download's (`NAME.part`), or
    /// this process's ``fetchForPlayer(path:assetId:headTimeoutSeconds:)`` (`NAME.play-PID.part`).
    public static func partFile(of destination: URL, forPlayer: Bool) -> URL {
        guard forPlayer else { return destination.appendingPathExtension("part") }
        return destination.deletingLastPathComponent()
            .appendingPathComponent("\(destination.lastPathComponent).play-\(ProcessInfo.processInfo.processIdentifier).part")
    }

    private static func packageDirectory(_ assetId: String, in dataDirectory: DataDirectory) throws(DownloadError) -> PackageDirectory {
        do {
            return try PackageDirectory(assetId: assetId, in: dataDirectory)
        } catch {
            throw .package(code: error.code, message: error.description)
        }
    }
}
