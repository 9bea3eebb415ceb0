import AssetDownload
import Foundation
import StowageCore
import StowageLibrary
import StowageService

/// The commands' side of the download service: hand work to it when it runs, show what it does.
enum ServiceDriver {
    /// Runs `remote` against the running service, else `local` on the library in this process.
    static func either<T>(
        _ remote: (ServiceClient) async throws -> T,
        local: (OfflineLibrary) async throws -> T
    ) async throws -> T {
        guard let service = await ServiceClient.connect() else { return try await Library.with(local) }
        do {
            let result = try await remote(service)
            await service.close()
            return result
        } catch {
            await service.close()
            throw error
        }
    }

    /// `download --background`: queues the download in the service and returns.
    static func submit(_ request: DownloadRequest, priority: Int, json: Bool) async {
        do {
            let service = try await ServiceClient.require()
            let download: ServiceDownload
            do {
                download = try await service.submit(request, priority: priority)
                await service.close()
            } catch {
                await service.close()
                throw error
            }
            if json {
                print(Library.json(download))
            } else {
                print(download.assetId)
                Terminal.standardError(
                    "queued in the download service: \(ServiceText.line(download))\nprogress: stowage download --attach \(download.assetId)\n"
                )
            }
        } catch {
            CommandOutput.fail(error, json: json)
        }
    }

    /// `download --attach ASSET`: shows the service's updates until the run ends; Ctrl-C detaches. Exit status 0 when
    /// it finished (or paused on request), 1 when it failed.
    static func attach(assetId: String, json: Bool) async -> Never {
        let service: ServiceClient
        let updates: AsyncThrowingStream<DownloadUpdate, any Error>
        do {
            service = try await ServiceClient.require()
            updates = try await service.updates(assetId: assetId)
        } catch {
            CommandOutput.fail(error, json: json)
        }
        let display = ProgressDisplay(json: json, assetId: assetId)
        var status: Int32 = 0
        do {
            for try await update in updates {
                display.show(update)
                if update.event == .failed { status = 1 }
            }
        } catch {
            await service.close()
            CommandOutput.fail(error, json: json)
        }
        await service.close()
        exit(status)
    }

    /// `resume` while the service runs: back into its queue (one asset, or every paused and failed one).
    static func resume(_ assetId: String?, service: ServiceClient, json: Bool) async {
        do {
            var resumed: [ServiceDownload] = []
            if let assetId {
                resumed.append(try await service.resume(assetId: assetId))
            } else {
                for download in try await service.downloads() where !download.running {
                    resumed.append(try await service.resume(assetId: download.assetId))
                }
            }
            await service.close()
            if json {
                print(Library.json(resumed))
                return
            }
            if resumed.isEmpty { print("nothing to resume") }
            for download in resumed { print("resumed in the download service: \(ServiceText.line(download))") }
        } catch {
            await service.close()
            CommandOutput.fail(error, json: json)
        }
    }
}
