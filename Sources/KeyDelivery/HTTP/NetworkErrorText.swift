import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL
import StowageCore

#if canImport(Glibc)
import Glibc
#endif

/// What a failed HTTP exchange means, in words a user can act on, instead of AsyncHTTPClient's or NIO's type dumps
/// (`HTTPClientError.emptyScheme`, `connection reset (error set): Connection refused (errno: 111)`).
///
/// ```swift
/// catch { throw KeySessionError.unreachable(NetworkErrorText.describe(error)) }
/// ```
public enum NetworkErrorText {
    /// A sentence fragment: "the connection was refused (nothing listens there, or a firewall blocks it)".
    public static func describe(_ error: any Error) -> String {
        if let error = error as? any StowageError { return error.message }
        if let error = error as? HTTPClientError { return describe(error) }
        if let trust = certificateFailure(error) { return trust }
        if let errno = errnoCode(of: error) { return describe(errno: errno) }
        if error is CancellationError { return "the request was cancelled" }
        let text = String(describing: error).lowercased()
        if text.contains("connection refused") { return describe(errno: ECONNREFUSED) }
        if text.contains("unreachable") { return describe(errno: ENETUNREACH) }
        if text.contains("dns") || text.contains("name resolution") || text.contains("nodename nor servname") {
            return "the host name could not be resolved; check its spelling and the network"
        }
        if text.contains("timeout") || text.contains("timed out") { return "the connection timed out; check the network and the address" }
        if text.contains("ssl") || text.contains("tls") || text.contains("certificate") {
            return "the secure (TLS) connection failed: the server's certificate or protocol was not accepted"
        }
        return "the network request failed (\(type(of: error)))"
    }

    /// Whether the server's TLS certificate was refused: not signed by a CA this machine trusts (the system's store and
    /// ``TLSTrust/caFile``), expired, or issued for another host name. Retrying cannot help.
    public static func isUntrustedCertificate(_ error: any Error) -> Bool {
        certificateFailure(error) != nil
    }

    private static func certificateFailure(_ error: any Error) -> String? {
        let advice = "if your own CA signed it, name that CA's PEM file with --ca-file (or STOWAGE_CA_FILE)"
        if let error = error as? NIOSSLExtraError, error == .failedToValidateHostname {
            return "the server's TLS certificate was issued for another host name; use the name the certificate names"
        }
        let text = String(describing: error)
        if text.contains("failedToValidateHostname") {
            return "the server's TLS certificate was issued for another host name; use the name the certificate names"
        }
        if text.contains("CERTIFICATE_VERIFY_FAILED") {
            return "the server's TLS certificate is not trusted (not signed by a CA this machine trusts, or expired); \(advice)"
        }
        return nil
    }

    /// Whether the error means the host cannot be reached at all (refused, unreachable, no route, connect timeout):
    /// downloads wait such outages out instead of counting them as failed attempts.
    public static func isNetworkDown(_ error: any Error) -> Bool {
        if let error = error as? HTTPClientError { return error == .connectTimeout }
        if let errno = errnoCode(of: error) { return [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, ENETDOWN, EHOSTDOWN].contains(errno) }
        let text = String(describing: error).lowercased()
        return text.contains("connection refused") || text.contains("connectionrefused") || text.contains("unreachable")
            || text.contains("connecttimeout") || text.contains("connect timeout")
    }

    private static func describe(_ error: HTTPClientError) -> String {
        switch error {
        case .emptyScheme, .unsupportedScheme("file"): "the URL has no http or https scheme"
        case .emptyHost: "the URL has no host"
        case .invalidURL: "the URL is not valid"
        case .connectTimeout: "the connection timed out; check the network and the address"
        case .readTimeout: "the server stopped sending data (read timeout)"
        case .writeTimeout: "the request could not be sent in time (write timeout)"
        case .remoteConnectionClosed: "the server closed the connection before answering"
        case .deadlineExceeded: "the transfer took longer than allowed"
        case .tlsHandshakeTimeout: "the secure (TLS) connection could not be set up in time"
        case .redirectLimitReached, .redirectCycleDetected: "the server redirected too many times (or in a circle)"
        case .cancelled, .requestStreamCancelled: "the request was cancelled"
        case .alreadyShutdown, .uncleanShutdown: "the HTTP client was shut down while the request ran"
        default:
            String(describing: error).lowercased().contains("unsupported scheme")
                ? "the URL's scheme is not http or https" : "the HTTP exchange failed (\(String(describing: error)))"
        }
    }

    private static func describe(errno: Int32) -> String {
        switch errno {
        case ECONNREFUSED: "the connection was refused (nothing listens at that address, or a firewall blocks it)"
        case ENETUNREACH, EHOSTUNREACH, ENETDOWN, EHOSTDOWN: "the network or the host is unreachable; check the connection"
        case ECONNRESET: "the server reset the connection"
        case ETIMEDOUT: "the connection timed out; check the network and the address"
        case EADDRINUSE: "the address is already in use"
        default: String(cString: strerror(errno))
        }
    }

    private static func errnoCode(of error: any Error) -> Int32? {
        if let error = error as? IOError { return error.errnoCode }
        // NIOPosix's NIOConnectionError keeps the IOError of each attempt; its description carries the errno.
        let text = String(describing: error)
        guard let range = text.range(of: "errno: ") else { return nil }
        return Int32(text[range.upperBound...].prefix { $0.isNumber })
    }
}
