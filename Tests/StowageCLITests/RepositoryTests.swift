import Foundation
import Testing

/// A clone of the repository is all a reader has: nothing in it may point at files outside it, and every relative
/// link of its Markdown pages must lead to a file that is there.
struct RepositoryTests {
    /// Paths that led outside the repository once (the starting notes sat in a folder beside it); spelled in pieces so
    /// that this file does not match itself.
    static let outsideReferences = ["../" + "shared", "shared/" + "DESIGN.md", "shared/" + "KEY-PROTOCOL.md", "shared/" + "STYLE.md"]

    /// Every text file of the repository (build folders, `.git` and files over 1 MiB left out), by path from the root.
    static func textFiles() throws -> [(path: String, text: String)] {
        let root = TestSupport.repositoryRoot
        guard let walk = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isDirectoryKey, .fileSizeKey]) else {
            Issue.record("cannot walk \(root.path)")
            return []
        }
        var files: [(path: String, text: String)] = []
        for case let url as URL in walk {
            let values = try url.resourceValues(forKeys: [.isDirectoryKey, .fileSizeKey])
            if values.isDirectory == true {
                if url.lastPathComponent.hasPrefix(".build") || url.lastPathComponent == ".git" { walk.skipDescendants() }
                continue
            }
            guard (values.fileSize ?? 0) <= 1 << 20, let data = FileManager.default.contents(atPath: url.path),
                !data.contains(0), let text = String(data: data, encoding: .utf8)
            else { continue }
            files.append((String(url.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count + 1)), text))
        }
        return files
    }

    /// The relative targets of a Markdown page's links (`[text](target)`), without their `#fragment`.
    static func relativeLinks(in markdown: String) -> [String] {
        let pattern = /\]\(([^)\s#]+)(?:#[^)\s]*)?\)/
        return markdown.matches(of: pattern).map { String($0.output.1) }
            .filter { !$0.contains("://") && !$0.hasPrefix("mailto:") }
    }

    @Test func theLinkReaderFindsRelativeLinksOnly() {
        let page = "See [design](design.md#modules), [the RFC](https://example.com/x.md) and [key](../Keys/README.md)."
        #expect(Self.relativeLinks(in: page) == ["design.md", "../Keys/README.md"])
    }

    @Test func nothingPointsOutsideTheRepository() throws {
        let files = try Self.textFiles()
        #expect(files.count > 100)
        #expect(files.contains { $0.path == "docs/design.md" } && files.contains { $0.path == "docs/key-protocol.md" })
        for file in files {
            for (number, line) in file.text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                for reference in Self.outsideReferences where line.contains(reference) {
                    Issue.record("\(file.path):\(number + 1) refers to \(reference), which a clone does not have; move what it needs into docs/")
                }
            }
        }
    }

    @Test func everyRelativeLinkOfThePagesLeadsToAFile() throws {
        let root = TestSupport.repositoryRoot
        for file in try Self.textFiles() where file.path.hasSuffix(".md") {
            let folder = root.appendingPathComponent(file.path).deletingLastPathComponent()
            for link in Self.relativeLinks(in: file.text) {
                let target = folder.appendingPathComponent(link.removingPercentEncoding ?? link).standardizedFileURL
                if !FileManager.default.fileExists(atPath: target.path) {
                    Issue.record("\(file.path) links to \(link), which does not exist")
                }
            }
        }
    }
}
