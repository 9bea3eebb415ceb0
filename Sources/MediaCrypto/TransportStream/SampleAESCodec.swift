/// The elementary streams SAMPLE-AES covers in a transport stream, with their clear and encrypted stream_type
/// values and private_data_indicator (Apple, "MPEG-2 Stream Encryption Format for HTTP Live Streaming",
/// 3.0 Transport Stream Signaling).
enum SampleAESCodec: CaseIterable {
    case h264
    case aac
    case ac3
    case eac3

    /// The stream_type of the clear stream (ISO/IEC 13818-1 Table 2-34; ATSC A/52 for AC-3 and E-AC-3).
    var clearStreamType: UInt8 {
        switch self {
        case .h264: 0x1B
        case .aac: 0x0F
        case .ac3: 0x81
        case .eac3: 0x87
        }
    }

    /// 3.0: the stream_type that signals the encrypted stream.
    var encryptedStreamType: UInt8 {
        switch self {
        case .h264: 0xDB
        case .aac: 0xCF
        case .ac3: 0xC1
        case .eac3: 0xC2
        }
    }

    /// 3.0: the big-endian private_data_indicator of the stream's private data indicator descriptor.
    var privateDataIndicator: [UInt8] {
        switch self {
        case .h264: Array("zavc".utf8)
        case .aac: Array("aacd".utf8)
        case .ac3: Array("ac3d".utf8)
        case .eac3: Array("ec3d".utf8)
        }
    }

    var isAudio: Bool { self != .h264 }

    init?(clearStreamType: UInt8) {
        guard let codec = Self.allCases.first(where: { $0.clearStreamType == clearStreamType }) else { return nil }
        self = codec
    }

    init?(encryptedStreamType: UInt8) {
        guard let codec = Self.allCases.first(where: { $0.encryptedStreamType == encryptedStreamType }) else { return nil }
        self = codec
    }

    /// Any of the four encrypted stream types.
    static func isEncryptedStreamType(_ streamType: UInt8) -> Bool {
        SampleAESCodec(encryptedStreamType: streamType) != nil
    }

    /// ISO/IEC 13818-1 2.6.60 private_data_indicator_descriptor.
    static let privateDataIndicatorTag: UInt8 = 0x0F
    /// ISO/IEC 13818-1 2.6.8 registration_descriptor.
    static let registrationTag: UInt8 = 0x05
    /// 3.0: the format_identifier of the registration descriptor that carries the audio setup information.
    static let audioSetupFormatIdentifier = Array("apad".utf8)

    /// Whether a descriptor is one of the SAMPLE-AES signaling descriptors (3.0): a private data indicator with
    /// one of the four indicators, or an `apad` registration descriptor.
    static func isEncryptionDescriptor(tag: UInt8, value: ArraySlice<UInt8>) -> Bool {
        switch tag {
        case privateDataIndicatorTag:
            return value.count == 4 && allCases.contains { $0.privateDataIndicator.elementsEqual(value) }
        case registrationTag:
            return value.count >= 4 && value.prefix(4).elementsEqual(audioSetupFormatIdentifier)
        default:
            return false
        }
    }

    /// Whether a descriptor loop holds an `apad` registration descriptor.
    static func containsAudioSetup(_ descriptors: [UInt8]) -> Bool {
        var index = 0
        while index + 2 <= descriptors.count {
            let end = min(descriptors.count, index + 2 + Int(descriptors[index + 1]))
            if descriptors[index] == registrationTag && descriptors[(index + 2)..<end].prefix(4).elementsEqual(audioSetupFormatIdentifier) {
                return true
            }
            index = end
        }
        return false
    }

    /// Stream types of audio and video that SAMPLE-AES in a transport stream cannot protect (MPEG-1/2 video and
    /// audio, MPEG-4 visual, LATM AAC, HEVC...): the encryptor refuses them rather than leave them clear.
    static func isUnprotectableMediaStreamType(_ streamType: UInt8) -> Bool {
        [0x01, 0x02, 0x03, 0x04, 0x10, 0x11, 0x1C, 0x1F, 0x20, 0x24, 0x42, 0xEA].contains(streamType)
    }
}
