public import Foundation
import KeyDelivery
public import Playback
import StowageCore

/// A running playback session of ``OfflineLibrary/play(assetId:player:port:fileCheck:)``: the URL to give a player
/// and the way to stop it.
///
/// ```swift
/// let playback = try await library.play(assetId: "demo-1")
/// try await runMyPlayer(playback.url)
/// let end = await playback.stop()
/// ```
public final class PlaybackHandle: Sendable {
    /// `http://127.0.0.1:PORT/ENTRY/master.m3u8`: works once, for one player.
    public let url: URL
    /// Where the session listens (its session URL is for in-process callers only).
    public let address: PlaybackServer.Address
    /// The IDs of the renditions offered online beside the stored ones (`online-audio-fr`, ...); empty offline.
    public let onlineRenditions: [String]
    private let session: Task<PlaybackEnd, any Error>

    private init(url: URL, address: PlaybackServer.Address, onlineRenditions: [String], session: Task<PlaybackEnd, any Error>) {
        self.url = url
        self.address = address
        self.onlineRenditions = onlineRenditions
        self.session = session
    }

    /// Starts `server` (and `player` on its URL) and returns once it listens.
    static func start(_ server: PlaybackServer, player: PlaybackPlayer?) async throws -> PlaybackHandle {
        let (addresses, continuation) = AsyncStream.makeStream(of: PlaybackServer.Address.self, bufferingPolicy: .bufferingOldest(1))
        let session = Task {
            defer { continuation.finish() }
            let onListening: @Sendable (PlaybackServer.Address) async -> Void = { continuation.yield($0) }
            if let player { return try await server.run(player: player, onListening: onListening) }
            return try await server.run(onListening: onListening)
        }
        var iterator = addresses.makeAsyncIterator()
        guard let address = await iterator.next() else {
            // The server ended before it listened: its error says why (a port in use, say), in words.
            let assetId = server.authorization.assetId
            do {
                _ = try await session.value
            } catch let error as any StowageError {
                throw error
            } catch {
                throw PlaybackError.serverFailed(
                    assetId: assetId,
                    detail: "it could not listen on 127.0.0.1 (\(NetworkErrorText.describe(error))); choose another --port, or leave "
                        + "it out for a free one"
                )
            }
            throw PlaybackError.serverFailed(assetId: assetId, detail: "it stopped before it listened")
        }
        return PlaybackHandle(
            url: address.multivariantURL,
            address: address,
            onlineRenditions: server.authorization.online?.renditionIds ?? [],
            session: session
        )
    }

    /// Waits until the session ends by itself (the player exits, the package is deleted).
    public func ended() async throws -> PlaybackEnd {
        try await session.value
    }

    /// Stops the session gracefully (the player too, if one was started) and returns how it ended.
    @discardableResult
    public func stop() async -> PlaybackEnd? {
        session.cancel()
        return try? await session.value
    }
}
