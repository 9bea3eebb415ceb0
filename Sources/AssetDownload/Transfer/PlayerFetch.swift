public import Foundation
import KeyDelivery
import NIOCore
import OfflinePackage
import Synchronization

/// The player fetches running in this process, by destination path: every play session of the process (a library may
/// open several, on one data directory or through two `DownloadSession`s) shares one transfer per file, since they
/// would all write the same part file (`NAME.play-PID.part`).
private let playerFetches = Mutex<[String: Task<Result<CompletedFile, DownloadError>, Never>]>([:])

extension DownloadSession {
    /// Fetches one file of a package whose download is not running (paused, or failed part-way) because a player
    /// asked for it, and puts it in the package exactly as the download would have: streamed to a part file, hashed,
    /// flushed, renamed into place, recorded in `stowage.sqlite` and written to the package's access log. A later
    /// `resume` therefore never fetches it again.
    ///
    /// A player is waiting, so this tries three times in all, waits at most `headTimeoutSeconds` for each response
    /// head and does not wait out a network that is down. The part file is this process's own
    /// (`NAME.play-PID.part`, removed when the fetch fails), and within the process one transfer per file runs at a
    /// time, whichever session asks; a download started meanwhile in another process writes its own part file, and
    /// whichever renames last puts the same bytes in place.
    ///
    /// - Returns: the file's size and SHA-256 (the recorded ones when it was already in place).
    /// - Throws: ``DownloadError`` saying what the source did.
    public func fetchForPlayer(path: String, assetId: String, headTimeoutSeconds: Int64 = 5) async throws(DownloadError) -> CompletedFile {
        if let done = try store.completedFile(assetId, path: path) { return done }
        let key = try Self.packageDirectory(assetId, in: dataDirectory).url.appendingPathComponent(path).path
        let (task, owner) = playerFetches.withLock { running in
            if let task = running[key] { return (task, false) }
            let task = Task<Result<CompletedFile, DownloadError>, Never> {
                do throws(DownloadError) {
                    return .success(try await self.transferForPlayer(path: path, assetId: assetId, headTimeoutSeconds: headTimeoutSeconds))
                } catch {
                    return .failure(error)
                }
            }
            running[key] = task
            return (task, true)
        }
        let result = await task.value
        if owner { playerFetches.withLock { _ = $0.removeValue(forKey: key) } }
        return try result.get()
    }

    private func transferForPlayer(path: String, assetId: String, headTimeoutSeconds: Int64) async throws(DownloadError) -> CompletedFile {
        if let done = try store.completedFile(assetId, path: path) { return done }
        let package = try Self.packageDirectory(assetId, in: dataDirectory)
        let manifest: PackageManifest
        do {
            manifest = try package.readManifest()
        } catch {
            throw .package(code: error.code, message: error.description, subject: error.subject)
        }
        guard let rendition = manifest.renditions.first(where: { $0.files.contains { $0.path == path } }),
            let file = rendition.files.first(where: { $0.path == path })
        else {
            throw .segmentFailed(path: path, url: "-", reason: "it is not a file of asset \(assetId)'s package")
        }
        let fetcher = FileFetcher(
            client: http,
            configuration: .init(
                headers: headers(for: assetId),
                headTimeout: .seconds(headTimeoutSeconds),
                transferTimeout: .seconds(configuration.transferTimeout),
                retry: RetryPolicy(maximumAttempts: 3, initialDelay: 0.2, maximumDelay: 1, networkDownGrace: 0),
                link: configuration.bandwidth,
                maximumFileBytes: configuration.maximumFileBytes
            )
        )
        let destination: URL
        do {
            destination = try package.url(forRelativePath: file.path)
        } catch {
            throw .package(code: error.code, message: error.description, subject: error.subject)
        }
        let part = Self.partFile(of: destination, forPlayer: true)
        let accessLog = try? ExtendedLogFile(url: package.accessLogURL, fields: ExtendedLogFile.accessFields)
        let errorLog = try? ExtendedLogFile(url: package.errorLogURL, fields: ExtendedLogFile.errorFields)
        do {
            let staged = try await fetcher.fetch(
                file,
                to: destination,
                part: part,
                estimate: FileFetcher.averageFileBytes(of: rendition),
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

    /// The headers the download of `assetId` was given (each scoped to its hosts); none without a download record.
    func headers(for assetId: String) -> ScopedHeaders {
        (try? store.task(assetId))?.request.scopedHeaders ?? .none
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
            throw .package(code: error.code, message: error.description, subject: error.subject)
        }
    }
}
