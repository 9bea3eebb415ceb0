import Foundation

/// How commands report a failure: the message on standard error (or a JSON object on standard output with
/// `--json`), then exit status 1.
enum CommandOutput {
    static func fail(code: String, message: String, json: Bool) -> Never {
        if json {
            let body = ["error": ["code": code, "message": message]]
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            if let data = try? encoder.encode(body) { print(String(decoding: data, as: UTF8.self)) }
        } else {
            FileHandle.standardError.write(Data("error: \(message) [\(code)]\n".utf8))
        }
        exit(1)
    }
}
