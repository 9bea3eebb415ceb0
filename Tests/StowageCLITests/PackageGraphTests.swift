import Foundation
import StowageTestSupport
import Testing

/// The package graph as SwiftPM reads it (`swift package dump-package`): an app that imports the facade,
/// `StowageLibrary`, links the client modules only, none of the servers a content owner runs and none of their
/// dependencies (PostgreSQL, JWT, Prometheus).
@Suite("Package graph")
struct PackageGraphTests {
    /// Each target's dependencies: the targets it names and the products (package, product) it takes.
    struct Target {
        var targets: [String] = []
        var products: [(package: String, product: String)] = []
    }

    static func targets() async throws -> [String: Target] {
        // A scratch folder of its own: the test runs while `swift test` holds the build folder's lock.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("package-graph-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let dump = try await ProcessRunner.run(
            program: "swift",
            ["package", "--package-path", TestSupport.repositoryRoot.path, "--scratch-path", scratch.path, "dump-package"],
            timeout: .seconds(300)
        )
        try #require(dump.status == 0, "swift package dump-package: \(String(decoding: dump.standardError, as: UTF8.self))")
        let package = try #require(try JSONSerialization.jsonObject(with: dump.standardOutput) as? [String: Any])
        var targets: [String: Target] = [:]
        for target in package["targets"] as? [[String: Any]] ?? [] {
            guard let name = target["name"] as? String else { continue }
            var entry = Target()
            for dependency in target["dependencies"] as? [[String: Any]] ?? [] {
                if let named = (dependency["byName"] ?? dependency["target"]) as? [Any], let first = named.first as? String {
                    entry.targets.append(first)
                } else if let product = dependency["product"] as? [Any], let name = product.first as? String {
                    entry.products.append(((product.count > 1 ? product[1] as? String : nil) ?? name, name))
                }
            }
            targets[name] = entry
        }
        return targets
    }

    /// `root` and every target it depends on, directly or not, with the products they take.
    static func closure(of root: String, in targets: [String: Target]) -> (targets: Set<String>, packages: Set<String>) {
        var seen: Set<String> = []
        var packages: Set<String> = []
        var pending = [root]
        while let name = pending.popLast() {
            guard seen.insert(name).inserted, let target = targets[name] else { continue }
            pending += target.targets
            packages.formUnion(target.products.map(\.package))
        }
        return (seen, packages)
    }

    @Test("StowageLibrary links no server module and none of their dependencies; StowageDemo and the CLI do")
    func facadeLinksNoServer() async throws {
        let targets = try await Self.targets()
        let library = Self.closure(of: "StowageLibrary", in: targets)
        #expect(library.targets.contains("KeyDelivery") && library.targets.contains("Playback"), "\(library.targets.sorted())")
        for server in ["KeyServer", "OriginServer", "Packaging", "StowageService", "StowageDemo"] {
            #expect(!library.targets.contains(server), "StowageLibrary links \(server)")
        }
        for package in ["postgres-nio", "jwt-kit", "swift-prometheus"] {
            #expect(!library.packages.contains(package), "StowageLibrary links \(package)")
        }
        // The demo's servers are where they belong: the check above would pass on a graph it cannot read.
        let demo = Self.closure(of: "StowageDemo", in: targets)
        #expect(demo.targets.isSuperset(of: ["StowageLibrary", "KeyServer", "OriginServer", "Packaging"]), "\(demo.targets.sorted())")
        #expect(demo.packages.contains("postgres-nio"), "\(demo.packages.sorted())")
    }
}
