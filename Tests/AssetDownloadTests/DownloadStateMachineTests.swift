import AssetDownload
import DownloadTestSupport
import Foundation
import OfflinePackage
import StowageCore
import Testing

/// Every (state, action) pair of a download task, against a table written out by hand.
struct DownloadStateMachineTests {
    /// Rows: from-state; columns in `DownloadAction.allCases` order: run, enqueue, pause, wait, fail, complete, addMedia,
    /// remove. "-" is refused.
    static let table: [DownloadState: [String]] = [
        .queued: ["downloading", "queued", "paused", "paused", "-", "-", "downloading", "removing"],
        .downloading: ["downloading", "queued", "paused", "paused", "failed", "completed", "downloading", "removing"],
        .paused: ["downloading", "queued", "paused", "paused", "-", "-", "downloading", "removing"],
        .failed: ["downloading", "queued", "-", "-", "-", "-", "downloading", "removing"],
        .completed: ["-", "-", "-", "-", "-", "-", "downloading", "-"],
        .removing: ["-", "-", "-", "-", "-", "-", "-", "removing"],
    ]

    @Test func everyPairFollowsTheTable() {
        #expect(DownloadAction.allCases.map(\.rawValue) == ["run", "enqueue", "pause", "wait", "fail", "complete", "addMedia", "remove"])
        #expect(Set(Self.table.keys) == Set(DownloadState.allCases))
        for state in DownloadState.allCases {
            for (index, action) in DownloadAction.allCases.enumerated() {
                let expected = Self.table[state]![index]
                let actual = DownloadStateMachine.transition(from: state, on: action)?.rawValue ?? "-"
                #expect(actual == expected, "\(state) --\(action)--> \(actual), expected \(expected)")
            }
        }
    }

    @Test func aRefusalSaysWhatToDoInstead() {
        do {
            _ = try DownloadStateMachine.next(from: .completed, on: .remove, assetId: "movie-1")
            Issue.record("a completed task was cancelled")
        } catch {
            #expect(error.code == "download_invalid_state")
            #expect(error.message.contains("cannot cancel asset movie-1: it is completed"))
            #expect(error.message.contains("`stowage delete movie-1`"))
        }
    }

    /// The stored state changes only through the machine: a task being removed cannot be resumed or paused, and an
    /// unknown asset is not found.
    @Test func theStoreAppliesTheMachine() throws {
        let fixtureRoot = FileManager.default.temporaryDirectory.appendingPathComponent("state-machine-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: fixtureRoot) }
        let store = try DownloadStore(databaseURL: fixtureRoot.appendingPathComponent("stowage.sqlite"))
        let session = try DownloadSession(dataDirectory: .init(url: fixtureRoot))
        defer { Task { try? await session.shutdown() } }
        try session.enqueue(DownloadRequest(url: "https://cdn.example/a.m3u8", assetId: "a"), priority: 3)
        #expect(try store.task("a")?.state == .queued)
        #expect(try store.task("a")?.priority == 3)
        #expect(try store.transition("a", .pause, at: 1) == .paused)
        #expect(try store.transition("a", .remove, at: 2) == .removing)
        #expect(throws: DownloadError.invalidState(assetId: "a", state: "removing", action: "resume")) {
            try store.transition("a", .run, at: 3)
        }
        #expect(try store.task("a")?.state == .removing)
        #expect(throws: DownloadError.notFound(assetId: "b")) { try store.transition("b", .run, at: 3) }
    }
}
