import OfflinePackage
import StowageCore
import Testing

@testable import AssetDownload

/// An error that passes through the download layer keeps its code, its message and what it concerns.
struct DownloadErrorTests {
    @Test func aPackageErrorPassedOnKeepsItsSubject() {
        let wrapped = DownloadRunner.wrap(PackageError.busy(assetId: "movie-1", holder: "process 42 (a download)"))
        #expect(wrapped.code == .assetBusy)
        #expect(wrapped.subject == ErrorSubject(assetId: "movie-1"))
        #expect(wrapped.message.contains("process 42"))
        let io = DownloadRunner.wrap(PackageError.io("video/00001.ts", "no space left on device"))
        #expect(io.subject.path == "video/00001.ts")
    }

    @Test func aPlaylistErrorRethrownWithMoreWordsKeepsItsSubject() {
        let subject = ErrorSubject(url: "https://example.com/live.m3u8")
        let error = DownloadError.playlist(code: .playlistNetworkError, message: "the server stayed down", subject: subject)
        #expect(error.subject == subject && error.code == .playlistNetworkError)
        #expect(DownloadError.keys(code: .noToken, message: "no token").subject.isEmpty)
    }
}
