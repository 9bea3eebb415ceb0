import Foundation
import KeyDelivery
import StowageCore
import StowageCrypto
import Testing

struct DeviceIdentityTests {
    @Test func firstUseCreatesOwnerOnlyDirectoryAndKeyFiles() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let home = temporary.url.appendingPathComponent("nested/stowage", isDirectory: true)
        let identity = try DeviceIdentity.loadOrCreate(in: home)
        #expect(try mode(of: home) == 0o700)
        #expect(try mode(of: home.appendingPathComponent(DeviceIdentity.signingKeyFileName)) == 0o600)
        #expect(try mode(of: home.appendingPathComponent(DeviceIdentity.agreementKeyFileName)) == 0o600)
        let files = try FileManager.default.contentsOfDirectory(atPath: home.path).sorted()
        #expect(files == [DeviceIdentity.agreementKeyFileName, DeviceIdentity.signingKeyFileName])
        #expect(identity.deviceId.count == 32)
    }

    @Test func aSecondLoadReturnsTheSameIdentity() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let first = try DeviceIdentity.loadOrCreate(in: temporary.dataDirectory)
        let second = try DeviceIdentity.loadOrCreate(in: temporary.dataDirectory)
        let loaded = try #require(try DeviceIdentity.load(from: temporary.dataDirectory))
        #expect(first.deviceId == second.deviceId)
        #expect(first.publicInfo == second.publicInfo)
        #expect(loaded.publicInfo == first.publicInfo)
        #expect(first.signingKey.rawRepresentation == second.signingKey.rawRepresentation)
        #expect(first.agreementKey.rawRepresentation == second.agreementKey.rawRepresentation)
    }

    @Test func publicInfoFollowsTheProtocol() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let identity = try DeviceIdentity.loadOrCreate(in: temporary.dataDirectory)
        let info = identity.publicInfo
        let signing = try #require(Data(base64Encoded: info.signingKey))
        let agreement = try #require(Data(base64Encoded: info.agreementKey))
        #expect(signing.count == 32 && agreement.count == 32)
        #expect(info.id == DeviceIdentifier.make(signingKey: Array(signing), agreementKey: Array(agreement)))
        let message = Array("{\"version\":1}".utf8)
        #expect(identity.signingKey.publicKey.isValidSignature(try identity.signature(for: message), for: message))
    }

    @Test func loadWithoutCreatingFindsNothingInAnEmptyDirectory() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        #expect(try DeviceIdentity.load(from: temporary.url) == nil)
    }

    @Test(arguments: [0o640, 0o604, 0o644])
    func keyFilesReadableByOthersAreRefused(fileMode: Int) throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        _ = try DeviceIdentity.loadOrCreate(in: temporary.dataDirectory)
        let file = temporary.dataDirectory.appendingPathComponent(DeviceIdentity.agreementKeyFileName)
        try FileManager.default.setAttributes([.posixPermissions: fileMode], ofItemAtPath: file.path)
        let error = #expect(throws: PrivateFileError.self) { try DeviceIdentity.loadOrCreate(in: temporary.dataDirectory) }
        #expect(error?.code == "insecure_permissions")
        #expect(error?.path == file.path)
        #expect(error?.message.contains("chmod 600") == true)
    }

    @Test func aDirectoryOpenToOthersIsRefused() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let home = temporary.url.appendingPathComponent("open")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        let error = #expect(throws: PrivateFileError.self) { try DeviceIdentity.loadOrCreate(in: home) }
        #expect(error?.code == "insecure_permissions")
    }

    @Test func aTruncatedKeyFileIsReportedAsDamaged() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        _ = try DeviceIdentity.loadOrCreate(in: temporary.dataDirectory)
        let file = temporary.dataDirectory.appendingPathComponent(DeviceIdentity.signingKeyFileName)
        try Data(repeating: 1, count: 31).write(to: file)
        let error = #expect(throws: PrivateFileError.self) { try DeviceIdentity.loadOrCreate(in: temporary.dataDirectory) }
        #expect(error?.code == "malformed_file")
    }

    /// What stands where the key files or their folder go, besides damage: a file in the folder's place, a link in a key
    /// file's place (never followed: it could point at another user's file), and a file owned by someone else.
    @Test func whatIsInTheWayIsNamed() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        func code(_ directory: URL) -> ErrorCode? {
            (#expect(throws: PrivateFileError.self) { try DeviceIdentity.loadOrCreate(in: directory) })?.code
        }
        let file = temporary.url.appendingPathComponent("a-file")
        try Data().write(to: file)
        #expect(code(file) == "wrong_file_type")

        let home = temporary.url.appendingPathComponent("home")
        _ = try DeviceIdentity.loadOrCreate(in: home)
        let key = home.appendingPathComponent(DeviceIdentity.signingKeyFileName)
        try FileManager.default.removeItem(at: key)
        try FileManager.default.createSymbolicLink(at: key, withDestinationURL: home.appendingPathComponent(DeviceIdentity.agreementKeyFileName))
        #expect(code(home) == "io_failure")

        // Another owner: chown needs root; as a normal user, a root-owned folder stands in.
        if geteuid() == 0 {
            let other = temporary.url.appendingPathComponent("other")
            _ = try DeviceIdentity.loadOrCreate(in: other)
            #expect(chown(other.appendingPathComponent(DeviceIdentity.signingKeyFileName).path, 65_534, 65_534) == 0)
            #expect(code(other) == "not_owned")
        } else {
            #expect(code(URL(fileURLWithPath: "/")) == "not_owned")
        }
    }

    @Test func concurrentFirstUsesAgreeOnOneIdentity() async throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let directory = temporary.dataDirectory
        let ids = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 {
                group.addTask { try DeviceIdentity.loadOrCreate(in: directory).deviceId }
            }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(ids.count == 1)
    }
}
