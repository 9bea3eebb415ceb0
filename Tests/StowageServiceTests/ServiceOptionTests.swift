import AssetDownload
import Foundation
import StowageCore
import StowageService
import Testing

/// The service's option parsing and unit file, and the update form of download events.
struct ServiceOptionTests {
    @Test func timeWindowsAreLocalHoursAndMayCrossMidnight() throws {
        let utc = try #require(TimeZone(identifier: "UTC"))
        func at(_ hour: Int, _ minute: Int) -> Date { Date(timeIntervalSince1970: Double(hour * 3600 + minute * 60) + 86_400 * 20_000) }
        let night = try TimeWindow(parsing: "01:00-06:00")
        #expect(night.contains(at(1, 0), timeZone: utc))
        #expect(night.contains(at(5, 59), timeZone: utc))
        #expect(!night.contains(at(6, 0), timeZone: utc))
        #expect(!night.contains(at(0, 59), timeZone: utc))
        let across = try TimeWindow(parsing: "22:30-06:00")
        #expect(across.contains(at(23, 0), timeZone: utc) && across.contains(at(2, 0), timeZone: utc))
        #expect(!across.contains(at(12, 0), timeZone: utc) && !across.contains(at(22, 29), timeZone: utc))
        #expect(across.description == "22:30-06:00")
        // The same instant in another zone: the window is the device's local hours.
        let tokyo = try #require(TimeZone(identifier: "Asia/Tokyo"))  // UTC+9
        #expect(night.contains(at(17, 0), timeZone: tokyo))
        for bad in ["", "1-6", "25:00-06:00", "01:00-01:00", "01:00", "01:60-02:00", "a:b-c:d"] {
            #expect(throws: ServiceSetupError.self, "\(bad)") { try TimeWindow(parsing: bad) }
        }
        do {
            _ = try TimeWindow(parsing: "7pm-6am")
        } catch {
            #expect(error.code == "invalid_time_window")
            #expect(error.message.contains("HH:MM-HH:MM"))
        }
    }

    @Test func ratesAndSizesTakeCurlsUnits() throws {
        #expect(try ByteQuantity.parse("5M", option: "--limit-rate") == 5 * 1_048_576)
        #expect(try ByteQuantity.parse("500k", option: "--limit-rate") == 512_000)
        #expect(try ByteQuantity.parse("1.5G", option: "--keep-free") == 1_610_612_736)
        #expect(try ByteQuantity.parse("4096", option: "--keep-free") == 4096)
        for bad in ["", "0", "-1M", "5X", "M", "1e20G", "nan"] {
            #expect(throws: ServiceSetupError.self, "\(bad)") { try ByteQuantity.parse(bad, option: "--limit-rate") }
        }
    }

    @Test func theSystemdUnitRunsThisStowageWithTheOptionsAndDataDirectory() throws {
        let unit = SystemdUnit(
            executable: "/opt/stowage bin/stowage",
            arguments: ["--max-downloads", "1", "--token-command", "pass show tokens/$STOWAGE_ASSET_ID"],
            dataDirectory: "/home/ann/.local/share/stowage"
        )
        let text = unit.text
        #expect(
            text.contains(
                #"ExecStart="/opt/stowage bin/stowage" service run --max-downloads 1 --token-command "pass show tokens/$$STOWAGE_ASSET_ID""#
            )
        )
        #expect(text.contains(#"Environment=STOWAGE_HOME=/home/ann/.local/share/stowage"#))
        #expect(text.contains("Restart=on-failure"))
        #expect(text.contains("WantedBy=default.target"))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("unit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let written = try unit.write(to: folder)
        #expect(written.lastPathComponent == "stowage.service")
        #expect(try String(contentsOf: written, encoding: .utf8) == text)
        #expect(SystemdUnit.directory(environment: ["HOME": "/home/ann"]).path == "/home/ann/.config/systemd/user")
        #expect(SystemdUnit.directory(environment: ["HOME": "/home/ann", "XDG_CONFIG_HOME": "/cfg"]).path == "/cfg/systemd/user")
    }

    @Test func downloadUpdatesCarryTheEventsAsData() throws {
        let failure = DownloadUpdate(.failed(.segmentHTTPStatus(path: "video/00001.ts", url: "http://o/1.ts", status: 404)), assetId: "m")
        #expect(failure.event == .failed && failure.isFinal)
        #expect(failure.error?.code == "segment_http_status")
        let line = failure.jsonLine()
        #expect(line.hasPrefix(#"{"asset":"m","error":{"code":"segment_http_status""#))
        #expect(!line.contains("null"))
        let decoded = try JSONDecoder().decode(DownloadUpdate.self, from: Data(line.utf8))
        #expect(decoded == failure)
        let paused = DownloadUpdate(.paused(nil), assetId: "m")
        #expect(paused.reason == nil && paused.isFinal)
        #expect(!DownloadUpdate(.resumed, assetId: "m").isFinal)
    }
}
