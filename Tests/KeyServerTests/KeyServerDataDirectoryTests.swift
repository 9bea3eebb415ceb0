import Foundation
import KeyDelivery
import KeyServer
import StowageCore
import StowageCrypto
import Testing

struct KeyServerDataDirectoryTests {
    static func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("keyserver-dir-\(UUID().uuidString)").path
    }

    static func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    @Test func initializeCreatesOwnerOnlyKeysAndTheDefaultPolicy() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try KeyServerDataDirectory.initialize(at: path)
        #expect(try Self.mode(path) == 0o700)
        for file in [KeyServerDataDirectory.signingKeyFile, KeyServerDataDirectory.masterKeyFile, KeyServerDataDirectory.tokenSecretFile] {
            #expect(try Self.mode(directory.path(of: file)) == 0o600)
            #expect(FileManager.default.contents(atPath: directory.path(of: file))?.count == 32)
        }
        #expect(FileManager.default.fileExists(atPath: directory.path(of: KeyServerDataDirectory.databaseFile)))
        let configuration = try directory.loadConfiguration()
        #expect(configuration.defaultPolicy == "default")
        let policy = try #require(configuration.policies["default"])
        #expect(policy.storageDuration == 30 * 86_400)
        #expect(policy.playbackDuration == Int64(48 * 3_600))
        #expect(policy.renewable)
        #expect(policy.persistentAllowed)
        #expect(policy.maxDevices == 3)
        #expect(configuration.maxRequestBytes == 65_536)

        // Running it again keeps every key.
        let key = try directory.loadSigningKey().publicKey
        try KeyServerDataDirectory.initialize(at: path)
        #expect(try directory.loadSigningKey().publicKey == key)
    }

    @Test func secretFilesOpenToOthersAreRefused() async throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try KeyServerDataDirectory.initialize(at: path)
        let keyPath = directory.path(of: KeyServerDataDirectory.signingKeyFile)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: keyPath)
        let error = #expect(throws: KeyServerSetupError.self) { try directory.loadSigningKey() }
        #expect(error?.kind == .insecureFile)
        #expect(error?.message.contains("chmod 600") == true)
        await #expect(throws: KeyServerSetupError.self) { try await KeyServerApplication(dataDirectory: directory) }
    }

    @Test func aSigningKeyOfTheWrongLengthIsRefusedByName() async throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try KeyServerDataDirectory.initialize(at: path)
        let keyPath = directory.path(of: KeyServerDataDirectory.signingKeyFile)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: keyPath))
        try handle.truncate(atOffset: 31)
        try handle.close()
        let error = #expect(throws: KeyServerSetupError.self) { try directory.loadSigningKey() }
        #expect(error?.code == "invalid_key_file")
        #expect(error?.message.contains(keyPath) == true, "\(error?.message ?? "")")
    }

    @Test func aMissingDirectoryIsNotInitialized() async throws {
        let directory = KeyServerDataDirectory(path: Self.temporaryPath())
        let error = await #expect(throws: KeyServerSetupError.self) { try await KeyServerApplication(dataDirectory: directory) }
        #expect(error?.kind == .notInitialized)
    }

    @Test func configurationIsValidated() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try KeyServerDataDirectory.initialize(at: path)
        let file = URL(fileURLWithPath: directory.path(of: KeyServerDataDirectory.configurationFile))
        for text in [
            #"{"defaultPolicy": "gone", "policies": {"default": {}}}"#,
            #"{"defaultPolicy": "default", "policies": {"default": {"storageDuration": 0}}}"#,
            #"{"defaultPolicy": "default", "policies": {"default": {"maxDevices": 0}}}"#,
            #"{"defaultPolicy": "default", "policies": {}, "rateLimit": {"requestsPerSecond": 0, "burst": 1}}"#,
            "not json",
        ] {
            try Data(text.utf8).write(to: file)
            let error = #expect(throws: KeyServerSetupError.self) { try directory.loadConfiguration() }
            #expect(error?.kind == .invalidConfiguration)
        }
        // Members left out take the standard values; null means none.
        try Data(
            #"{"defaultPolicy": "open", "tokenAudience": "stowage:test", "policies": {"open": {"playbackDuration": null, "maxDevices": null, "renewable": false}}}"#
                .utf8
        ).write(to: file)
        let configuration = try directory.loadConfiguration()
        let open = try #require(configuration.policies["open"])
        #expect(open.playbackDuration == nil)
        #expect(open.maxDevices == nil)
        #expect(!open.renewable)
        #expect(open.storageDuration == AssetPolicy.standard.storageDuration)
        #expect(configuration.rateLimit == KeyServerConfiguration().rateLimit)
        #expect(!open.identityAllowed && open.maxStreams == nil && !open.oncePerAccount)
        #expect(!configuration.allowWildcardAssets)
        #expect(configuration.tokenAudience == "stowage:test")
        // Without tokenAudience the server would accept tokens minted for any server sharing its token secret.
        try Data(#"{"defaultPolicy": "open", "policies": {"open": {}}}"#.utf8).write(to: file)
        let missing = #expect(throws: KeyServerSetupError.self) { try directory.loadConfiguration() }
        #expect(missing?.message.contains("tokenAudience") == true)
    }

    @Test func addAssetValidatesAndRefusesToReplaceAKey() async throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try KeyServerDataDirectory.initialize(at: path)
        let keyID = "000102030405060708090a0b0c0d0e0f"
        let key = SecretBytes(Hex.decode("00112233445566778899aabbccddeeff")!)
        func code(_ body: () async throws -> Void) async -> KeyServerSetupError.Code? {
            do {
                try await body()
                return nil
            } catch {
                return (error as? KeyServerSetupError)?.kind
            }
        }
        #expect(await code { try await directory.addAsset(id: "bad/id", keyID: keyID, key: key) } == .invalidAssetID)
        #expect(await code { try await directory.addAsset(id: "movie", keyID: "0001", key: key) } == .invalidKeyID)
        #expect(await code { try await directory.addAsset(id: "movie", keyID: keyID, key: SecretBytes([1, 2])) } == .invalidContentKey)
        #expect(await code { try await directory.addAsset(id: "movie", keyID: keyID, key: key, policy: "nope") } == .unknownPolicy)
        try await directory.addAsset(id: "movie", keyID: keyID, key: key)
        // The same key again is harmless; another key under the same ID is refused.
        try await directory.addAsset(id: "movie", keyID: keyID, key: key)
        let other = SecretBytes(Hex.decode("ffeeddccbbaa99887766554433221100")!)
        #expect(await code { try await directory.addAsset(id: "movie", keyID: keyID, key: other) } == .keyConflict)

        let store = try directory.openStore()
        #expect(try await store.asset(id: "movie")?.policy == "default")
        let sealed = try #require(try await store.contentKeys(assetID: "movie", keyIDs: [keyID]).first)
        #expect(sealed.nonce.count == 12)
        #expect(sealed.sealedKey.count == 32)
        #expect(!sealed.sealedKey.starts(with: Hex.decode("00112233445566778899aabbccddeeff")!))
    }
}
