import Foundation
import OfflinePackage
import Testing

@Suite("Package folder, manifest and W3C logs")
struct PackageLayoutTests {
    static func temporary() throws -> DataDirectory {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("layout-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return DataDirectory(url: url)
    }

    @Test(
        "paths that would leave the package are refused",
        arguments: ["../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a/.", "", "a\\b", "a\u{0}b", "a/..", ".."]
    )
    func unsafePaths(_ path: String) throws {
        let package = try PackageDirectory(assetId: "movie-1", in: try Self.temporary())
        #expect(throws: PackageError.unsafePath(path)) { try package.url(forRelativePath: path) }
    }

    @Test("safe paths resolve inside the package")
    func safePaths() throws {
        let package = try PackageDirectory(assetId: "movie-1", in: try Self.temporary())
        for path in ["video/00000.ts", "audio-en/init-0.mp4", "master.m3u8", "a/.hidden"] {
            #expect(try package.url(forRelativePath: path).path.hasPrefix(package.url.path + "/"))
        }
    }

    @Test(
        "asset IDs are safe folder names",
        arguments: [("movie-1", true), ("a.b_c-D9", true), (".hidden", false), ("a/b", false), ("", false), ("ü", false)]
    )
    func assetIDs(_ id: String, _ valid: Bool) {
        #expect(PackageDirectory.isValidAssetID(id) == valid)
    }

    @Test("the manifest round-trips; a manifest naming an unsafe path, another asset or another schema is refused")
    func manifest() throws {
        let directory = try Self.temporary()
        let package = try PackageDirectory(assetId: "movie-1", in: directory)
        var manifest = PackageManifest(assetId: "movie-1", title: "Movie", sourceURL: "https://cdn.example/m.m3u8", createdAt: 1_700_000_000)
        manifest.renditions = [
            PackageRendition(
                id: "video",
                kind: .video,
                name: "video",
                sourceURL: "https://cdn.example/v.m3u8",
                playlist: "video/index.m3u8",
                duration: 4,
                segments: [
                    PackageSegment(
                        index: 0,
                        duration: 4,
                        mediaSequence: 0,
                        discontinuitySequence: 0,
                        file: PackageFile(path: "video/00000.ts", sourceURL: "https://cdn.example/0.ts", size: 10, sha256: "ab")
                    )
                ]
            )
        ]
        try package.writeManifest(manifest)
        #expect(try package.readManifest() == manifest)

        var hostile = manifest
        hostile.renditions[0].segments[0].file?.path = "../../escape.ts"
        try package.writeManifest(hostile)
        #expect(throws: PackageError.self) { try package.readManifest() }

        var other = manifest
        other.assetId = "movie-2"
        try package.writeManifest(other)
        #expect(throws: PackageError.self) { try package.readManifest() }

        var future = manifest
        future.schemaVersion = 2
        try package.writeManifest(future)
        #expect(throws: PackageError.self) { try package.readManifest() }
        // No temporary file is left behind by the atomic writes.
        #expect(try FileManager.default.contentsOfDirectory(atPath: package.url.path) == [PackageManifest.fileName])
    }

    @Test("W3C extended logs: directives once per file, one line per entry, values escaped, fields matched by name")
    func extendedLog() throws {
        let directory = try Self.temporary()
        let url = directory.url.appendingPathComponent("logs/access.log")
        let date = Date(timeIntervalSince1970: 1_795_250_438.573)
        do {
            let log = try ExtendedLogFile(url: url, fields: ["date", "time", "cs-uri", "sc-status", "x-comment"], now: date)
            log.write(["cs-uri": "/a b.ts", "sc-status": "200", "x-comment": "line\nbreak \"quoted\" 100%"], at: date)
            log.write(["cs-uri": "/c.ts"], at: date)
        }
        do {
            // A second run with the same fields adds a #Date directive only.
            let log = try ExtendedLogFile(url: url, fields: ["date", "time", "cs-uri", "sc-status", "x-comment"], now: date)
            log.write(["cs-uri": "/d.ts", "sc-status": "404"], at: date)
        }
        let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(
            lines == [
                "#Version: 1.0", "#Software: stowage", "#Fields: date time cs-uri sc-status x-comment", "#Date: 2026-11-21 08:40:38.573",
                "2026-11-21 08:40:38.573 /a%20b.ts 200 line%0Abreak%20%22quoted%22%20100%25",
                "2026-11-21 08:40:38.573 /c.ts - -",
                "#Date: 2026-11-21 08:40:38.573",
                "2026-11-21 08:40:38.573 /d.ts 404 -",
            ]
        )
    }
}
