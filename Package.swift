// swift-tools-version:6.2
// Stowage: take protected HLS video offline on Linux. Module map: docs/design.md; what each module holds: docs/modules.md.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .treatAllWarnings(as: .error),
]

let package = Package(
    name: "stowage",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "stowage", targets: ["stowage"]),
        .executable(name: "StowageExample", targets: ["StowageExample"]),
        .library(name: "StowageCore", targets: ["StowageCore"]),
        .library(name: "StowageCrypto", targets: ["StowageCrypto"]),
        .library(name: "HLS", targets: ["HLS"]),
        .library(name: "MediaCrypto", targets: ["MediaCrypto"]),
        .library(name: "KeyDelivery", targets: ["KeyDelivery"]),
        .library(name: "OfflinePackage", targets: ["OfflinePackage"]),
        .library(name: "AssetDownload", targets: ["AssetDownload"]),
        .library(name: "Playback", targets: ["Playback"]),
        .library(name: "HTTPServing", targets: ["HTTPServing"]),
        .library(name: "KeyServer", targets: ["KeyServer"]),
        .library(name: "Packaging", targets: ["Packaging"]),
        .library(name: "StowageLibrary", targets: ["StowageLibrary"]),
        .library(name: "StowageDemo", targets: ["StowageDemo"]),
        .library(name: "OriginServer", targets: ["OriginServer"]),
        .library(name: "StowageService", targets: ["StowageService"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.29.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.24.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.25.0"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.0.0"),
        // `swift package generate-documentation`: the DocC catalogs in Sources/*/*.docc.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
    ],
    targets: [
        // The C surface of OpenSSL 3's libcrypto; every call into it sits in StowageCrypto.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // The kernel's clock and a file's change time, read with the system calls themselves so that nothing preloaded
        // into the process (LD_PRELOAD, libfaketime) can change them: the lease's trusted time (docs/SECURITY.md).
        .target(name: "CKernelTime"),
        // The one error shape (StowageError), human times, child processes; no dependencies, below every other module.
        .target(name: "StowageCore", swiftSettings: swiftSettings),
        .target(name: "StowageCrypto", dependencies: ["COpenSSL", "StowageCore"], swiftSettings: swiftSettings),
        .target(name: "HLS", dependencies: ["StowageCore"], swiftSettings: swiftSettings),
        .target(name: "MediaCrypto", dependencies: ["StowageCrypto", "StowageCore"], swiftSettings: swiftSettings),
        .target(
            name: "KeyDelivery",
            dependencies: [
                "CKernelTime", "StowageCore", "StowageCrypto", "HLS", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "OfflinePackage",
            dependencies: ["StowageCore", "HLS", "MediaCrypto", "KeyDelivery", "StowageCrypto"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "AssetDownload",
            dependencies: [
                "StowageCore", "HLS", "KeyDelivery", "OfflinePackage", "StowageCrypto",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // What every Stowage HTTP server puts on its clients: a connection cap and deadlines for requests to arrive.
        .target(
            name: "HTTPServing",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Playback",
            dependencies: [
                "HTTPServing", "StowageCore", "OfflinePackage", "KeyDelivery", "MediaCrypto", "StowageCrypto", "HLS",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // Making protected HLS from clear HLS (`stowage package`): fresh keys handed to a registrar (the key server's).
        .target(
            name: "Packaging",
            dependencies: ["StowageCore", "StowageCrypto", "HLS", "MediaCrypto", "KeyDelivery"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "KeyServer",
            dependencies: [
                "HTTPServing", "StowageCore", "KeyDelivery", "StowageCrypto",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "OriginServer",
            dependencies: [
                "HTTPServing", "StowageCore", "HLS",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The facade a Swift program uses (OfflineLibrary); the CLI is a face of it.
        .target(
            name: "StowageLibrary",
            dependencies: [
                "StowageCore", "HLS", "AssetDownload", "Playback", "OfflinePackage", "KeyDelivery",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The demo: an embedded key server and origin on loopback (DemoEnvironment) and the narrated scenario
        // `stowage demo` runs (DemoScenario). Apart from StowageLibrary, so that an app importing the facade links no
        // server code (PackageGraphTests).
        .target(
            name: "StowageDemo",
            dependencies: [
                "StowageLibrary", "StowageCore", "AssetDownload", "KeyDelivery", "OfflinePackage", "Playback",
                "KeyServer", "OriginServer", "Packaging",
            ],
            swiftSettings: swiftSettings
        ),
        // The background download service (queue, rate cap, lease upkeep) on a Unix socket, and its client.
        .target(
            name: "StowageService",
            dependencies: [
                "StowageCore", "StowageLibrary", "AssetDownload", "OfflinePackage", "KeyDelivery",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "stowage",
            dependencies: [
                "Packaging",
                "StowageCore", "StowageCrypto", "HLS", "MediaCrypto", "KeyDelivery", "OfflinePackage",
                "AssetDownload", "Playback", "KeyServer", "OriginServer", "StowageLibrary", "StowageDemo", "StowageService",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // A Swift program using the library API, importing only StowageLibrary (built with everything else).
        .executableTarget(
            name: "StowageExample",
            dependencies: ["StowageLibrary", "StowageDemo"],
            path: "Examples/StowageExample",
            swiftSettings: swiftSettings
        ),
        // Helpers shared by the test targets: subprocesses awaited without blocking a thread, ffmpeg as an independent client,
        // the built `stowage` executable.
        .target(
            name: "StowageTestSupport",
            dependencies: [
                "StowageCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/StowageTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "StowageCoreTests", dependencies: ["StowageCore", "StowageTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "StowageCryptoTests", dependencies: ["StowageCrypto", "StowageTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "HLSTests", dependencies: ["HLS"], resources: [.copy("Playlists")], swiftSettings: swiftSettings),
        .testTarget(name: "MediaCryptoTests", dependencies: ["MediaCrypto", "StowageCrypto", "StowageTestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "KeyDeliveryTests",
            dependencies: [
                "StowageTestSupport",
                "KeyDelivery", "StowageCrypto", "KeyServer", "HLS",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "OfflinePackageTests",
            dependencies: [
                "Packaging",
                "StowageTestSupport", "PackageTestSupport", "OfflinePackage", "KeyDelivery", "KeyServer", "HLS", "MediaCrypto", "StowageCrypto",
                "StowageCore",
            ],
            swiftSettings: swiftSettings
        ),
        // A real key server and origin serving an asset packaged from a clear fixture, for download tests.
        .target(
            name: "DownloadTestSupport",
            dependencies: [
                "Packaging", "AssetDownload", "OriginServer", "KeyServer", "KeyDelivery", "OfflinePackage", "StowageCrypto", "StowageTestSupport",
            ],
            path: "Tests/DownloadTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "OriginServerTests",
            dependencies: [
                "OriginServer", "HLS", "HTTPServing", "StowageTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "StowageServiceTests",
            dependencies: [
                "StowageTestSupport", "DownloadTestSupport", "StowageService", "StowageLibrary", "StowageDemo", "StowageCore",
                "AssetDownload", "OriginServer", "KeyServer", "KeyDelivery", "OfflinePackage", "Playback", "StowageCrypto", "HLS",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AssetDownloadTests",
            dependencies: [
                "StowageTestSupport", "DownloadTestSupport",
                "AssetDownload", "OriginServer", "KeyServer", "KeyDelivery", "OfflinePackage", "HLS", "StowageCrypto", "StowageCore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // Real offline packages for tests: packaged with fresh keys, leases from an in-process key server.
        .target(
            name: "PackageTestSupport",
            dependencies: [
                "Packaging", "StowageTestSupport", "StowageCore",
                "OfflinePackage", "KeyServer", "KeyDelivery", "HLS", "MediaCrypto", "StowageCrypto",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            path: "Tests/PackageTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PlaybackTests",
            dependencies: [
                "HTTPServing",
                "Packaging",
                "Playback", "PackageTestSupport", "StowageTestSupport", "StowageCore",
                "OfflinePackage", "KeyDelivery", "HLS", "MediaCrypto", "StowageCrypto",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "KeyServerTests",
            dependencies: [
                "HTTPServing",
                "Packaging",
                "StowageTestSupport",
                "KeyServer", "KeyDelivery", "HLS", "MediaCrypto", "OfflinePackage",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                "StowageCrypto",
            ],
            swiftSettings: swiftSettings
        ),
        // End to end: the origin over loopback, inspection over HTTP, and the `stowage` executable as a user runs it.
        .testTarget(
            name: "StowageCLITests",
            dependencies: [
                "StowageTestSupport", "DownloadTestSupport", "StowageCore",
                "OriginServer", "AssetDownload", "HLS", "OfflinePackage", "KeyServer",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
