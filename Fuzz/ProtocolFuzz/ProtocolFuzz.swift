// libFuzzer entry point for what Stowage parses from the network and from files a user can edit, besides playlists
// and media; built and run by scripts/fuzz-protocol.sh (see docs/fuzzing.md).
//
// The first input byte picks what is fuzzed; the rest is the input:
//   0: a key server's answer as the client reads it: the bytes are signed here with a fixed server key (a fuzzer cannot
//      forge Ed25519), so PayloadSigning.verify reaches the lease payload decoder, then every wrapped key is unwrapped
//      with a fixed device key (StrictBase64, X25519, HKDF, AES-GCM on hostile fields);
//   1: a SignedPayload as received (JSON), verified with the fixed server key: nothing may decode unless it verifies;
//   2: a request body as the key server reads it: signed here with a fixed device key, the signature header checked
//      (RequestSigning.verify), then decoded as each request message;
//   3: a `Stowage-Device-Signature` header value against a fixed body: only a valid signature may pass;
//   4: a package's manifest.json as PackageDirectory.readManifest reads it (a file in a scratch folder);
//   5: a key server's config.json (KeyServerConfiguration, decode and validate);
//   6: the origin's request path (RequestPath) and the play server's relative path rule (isSafeRelativePath);
//   7: a Range header against a size taken from the input (ByteRangeRequest).
// For every input: no trap and no sanitizer report; decoders throw, never crash; what decodes encodes and decodes to
// the same value; accepted paths stay under their root; ranges stay inside the representation.
import Foundation
import KeyDelivery
import KeyServer
import OfflinePackage
import StowageCore
import StowageCrypto

private func violation(_ property: String, _ details: String) -> Never {
    fatalError("ProtocolFuzz property violated: \(property)\n\(details)")
}

/// Fixed test keys (never used outside this harness).
private let serverKey = try! Ed25519.PrivateKey(rawRepresentation: SecretBytes([UInt8](repeating: 7, count: 32)))
private let deviceSigningKey = try! Ed25519.PrivateKey(rawRepresentation: SecretBytes([UInt8](repeating: 9, count: 32)))
private let deviceAgreementKey = try! X25519.PrivateKey(rawRepresentation: SecretBytes([UInt8](repeating: 11, count: 32)))
private let scratch: URL = {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("protocol-fuzz-\(getpid())", isDirectory: true)
    try? FileManager.default.createDirectory(at: url.appendingPathComponent("packages/fuzz-asset"), withIntermediateDirectories: true)
    return url
}()

/// Decodes `T` from `data`; when it decodes, it must encode and decode to the same value.
private func roundTrips<T: Codable & Equatable>(_ type: T.Type, _ data: Data) -> T? {
    guard let value = try? JSONDecoder().decode(T.self, from: data) else { return nil }
    do {
        let again = try JSONDecoder().decode(T.self, from: JSONEncoder().encode(value))
        if again != value { violation("decode-encode-decode is the identity", "\(T.self): \(value) became \(again)") }
    } catch {
        violation("what decodes encodes and decodes", "\(T.self): \(value): \(error)")
    }
    return value
}

private func leasePayload(_ bytes: [UInt8]) {
    guard let signed = try? PayloadSigning.sign(payloadBytes: bytes, with: serverKey) else { return }
    let payload: LeasePayload
    do {
        payload = try PayloadSigning.verify(signed, serverKey: serverKey.publicKey)
    } catch is SignatureVerificationError {
        return
    } catch {
        violation("verify throws SignatureVerificationError", "\(type(of: error)): \(error)")
    }
    _ = roundTrips(LeasePayload.self, Data(bytes))
    for key in payload.keys {
        do {
            let content = try KeyWrapping.unwrap(
                key,
                leaseID: payload.lease.leaseId,
                deviceID: payload.lease.deviceId,
                agreementKey: deviceAgreementKey
            )
            if content.count != 16 { violation("an unwrapped content key is 16 bytes", "\(content.count) bytes") }
        } catch is KeyWrappingError {
        } catch is CryptoError {
        } catch {
            violation("unwrap throws KeyWrappingError or CryptoError", "\(type(of: error)): \(error)")
        }
    }
}

private func signedPayload(_ bytes: [UInt8]) {
    guard let signed = roundTrips(SignedPayload.self, Data(bytes)) else { return }
    do {
        _ = try PayloadSigning.verify(signed, serverKey: serverKey.publicKey)
        // Only the harness's key signs; a fuzzer finding a valid signature would be news.
        violation("only signed payloads verify", "a payload verified: \(signed)")
    } catch is SignatureVerificationError {
    } catch {
        violation("verify throws SignatureVerificationError", "\(type(of: error)): \(error)")
    }
}

private func requestBody(_ bytes: [UInt8]) {
    guard let header = try? RequestSigning.signature(for: bytes, with: deviceSigningKey) else { return }
    do {
        try RequestSigning.verify(header, body: bytes, signingKey: deviceSigningKey.publicKey)
    } catch {
        violation("a request signed with the device key verifies", "\(error)")
    }
    let data = Data(bytes)
    if let request = roundTrips(KeyRequest.self, data) {
        _ = KeyProtocol.isValidAssetID(request.assetId)
        _ = request.keyIds.map(KeyProtocol.isValidKeyID)
    }
    _ = roundTrips(RenewRequest.self, data)
    _ = roundTrips(ReleaseRequest.self, data)
    _ = roundTrips(FirstPlayReport.self, data)
    _ = roundTrips(FirstPlayResponse.self, data)
    _ = roundTrips(ReleaseResponse.self, data)
    _ = roundTrips(ServerKeyResponse.self, data)
}

private func signatureHeader(_ bytes: [UInt8]) {
    let header = String(decoding: bytes, as: UTF8.self)
    do {
        try RequestSigning.verify(header, body: Array("{\"version\":1}".utf8), signingKey: deviceSigningKey.publicKey)
        violation("only valid signatures verify", "header \(header.debugDescription) verified")
    } catch is SignatureVerificationError {
    } catch {
        violation("verify throws SignatureVerificationError", "\(type(of: error)): \(error)")
    }
}

private func manifest(_ bytes: [UInt8]) {
    // Foundation's Data(contentsOf:) leaks its 4 KiB buffer for an empty file (swift-foundation, not Stowage): an
    // empty manifest is checked by the unit tests instead.
    guard !bytes.isEmpty else { return }
    let package = scratch.appendingPathComponent("packages/fuzz-asset")
    do {
        try Data(bytes).write(to: package.appendingPathComponent("manifest.json"))
    } catch {
        return
    }
    guard let directory = try? PackageDirectory(assetId: "fuzz-asset", in: DataDirectory(url: scratch)) else {
        violation("a valid asset ID makes a package directory", "fuzz-asset")
    }
    do {
        let read = try directory.readManifest()
        for path in [read.multivariantPlaylist] + read.renditions.map(\.playlist) + read.files.map(\.path) {
            let url = try directory.url(forRelativePath: path).standardizedFileURL.path
            if !under(url, package.standardizedFileURL.path) { violation("manifest paths stay in the package", path) }
        }
        _ = roundTrips(PackageManifest.self, Data(bytes))
    } catch {
        if case .invalidManifest = error { return }
        violation("readManifest throws invalidManifest", "\(error)")
    }
}

private func configuration(_ bytes: [UInt8]) {
    guard let configuration = roundTrips(KeyServerConfiguration.self, Data(bytes)) else { return }
    do {
        try configuration.validate()
    } catch is KeyServerSetupError {
    } catch {
        violation("validate throws KeyServerSetupError", "\(type(of: error)): \(error)")
    }
}

/// Whether `path` lies under the folder `root`, byte for byte (String's hasPrefix compares grapheme clusters: "/" then
/// a combining mark is no "/").
private func under(_ path: String, _ root: String) -> Bool {
    path.utf8.starts(with: (root + "/").utf8)
}

private func paths(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)
    if let path = try? RequestPath(target: text) {
        let full = URL(fileURLWithPath: path.fileSystemPath(under: "/srv/root")).standardizedFileURL.path
        if !under(full, "/srv/root") { violation("request paths stay under the root", "\(text.debugDescription) -> \(full)") }
        for component in path.components where component.isEmpty || component == "." || component == ".." || component.contains("/") {
            violation("request path components name files", "\(text.debugDescription): \(component.debugDescription)")
        }
    }
    if PackageDirectory.isSafeRelativePath(text) {
        let full = URL(fileURLWithPath: "/srv/package").appendingPathComponent(text).standardizedFileURL.path
        if !under(full, "/srv/package") { violation("safe relative paths stay in the package", "\(text.debugDescription) -> \(full)") }
    }
}

private func range(_ bytes: [UInt8]) {
    guard bytes.count >= 4 else { return }
    let size = Int(bytes[0]) << 16 | Int(bytes[1]) << 8 | Int(bytes[2])
    let header = String(decoding: bytes.dropFirst(3), as: UTF8.self)
    switch ByteRangeRequest(header: header, size: size) {
    case .whole, .unsatisfiable:
        break
    case .partial(let range):
        if range.lowerBound < 0 || range.upperBound >= size || range.isEmpty {
            violation("a partial range lies inside the representation", "\(header.debugDescription), size \(size): \(range)")
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard let mode = bytes.first else { return 0 }
    let input = Array(bytes.dropFirst())
    switch mode % 8 {
    case 0: leasePayload(input)
    case 1: signedPayload(input)
    case 2: requestBody(input)
    case 3: signatureHeader(input)
    case 4: manifest(input)
    case 5: configuration(input)
    case 6: paths(input)
    default: range(input)
    }
    return 0
}
