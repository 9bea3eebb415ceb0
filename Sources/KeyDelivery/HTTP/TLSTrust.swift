public import AsyncHTTPClient
import Foundation
import NIOSSL
public import StowageCore

/// The certificate authorities Stowage's HTTPS clients trust: the system's store, plus the PEM file the user names
/// (`--ca-file`, or `STOWAGE_CA_FILE` for every command and the download service), for key servers and origins behind
/// a company's own CA. Certificates are always verified, host name included; there is no way to turn that off.
///
/// ```swift
/// var configuration = HTTPClient.Configuration()
/// try TLSTrust(caFile: "/etc/stowage/ca.pem").apply(to: &configuration)
/// ```
public struct TLSTrust: Sendable, Hashable {
    /// A PEM file of one or more CA certificates trusted besides the system's; nil: the system's only.
    public var caFile: String?

    public init(caFile: String? = nil) {
        self.caFile = caFile?.isEmpty == false ? caFile : nil
    }

    /// `STOWAGE_CA_FILE` when set, else the system's store only.
    public static func fromEnvironment() -> TLSTrust {
        TLSTrust(caFile: ProcessInfo.processInfo.environment["STOWAGE_CA_FILE"])
    }

    /// Makes `configuration` verify servers against the system's store and ``caFile``.
    ///
    /// - Throws: ``TLSTrustError`` `invalid_ca_file` when the file cannot be read or holds no PEM certificate.
    public func apply(to configuration: inout HTTPClient.Configuration) throws(TLSTrustError) {
        guard let caFile else { return }
        var tls = configuration.tlsConfiguration ?? TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.certificates(try certificates(in: caFile))]
        configuration.tlsConfiguration = tls
    }

    private func certificates(in path: String) throws(TLSTrustError) -> [NIOSSLCertificate] {
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw TLSTrustError(path: path, reason: "the file does not exist or cannot be read")
        }
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(path)
        } catch {
            throw TLSTrustError(path: path, reason: "it is not a PEM file of certificates (-----BEGIN CERTIFICATE-----)")
        }
        guard !certificates.isEmpty else { throw TLSTrustError(path: path, reason: "it holds no PEM certificate") }
        return certificates
    }
}

/// A CA file that cannot be used.
public struct TLSTrustError: StowageError, Hashable {
    public let path: String
    public let reason: String

    public var code: ErrorCode { .invalidCAFile }
    public var message: String { "the CA file \(path) cannot be used: \(reason); name a PEM file of the CA that signed the server's certificate" }
    public var subject: ErrorSubject { ErrorSubject(path: path) }
    public var description: String { message }
}
