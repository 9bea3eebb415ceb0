/// The audio setup information that an encrypted audio stream's registration descriptor (format_identifier
/// `apad`) carries in the PMT (Apple, "MPEG-2 Stream Encryption Format for HTTP Live Streaming", 2.3.2 Audio
/// Setup and 3.0 Transport Stream Signaling): audio_type, priming, version, setup_data.
///
/// The encryptor derives it from the first frame of each audio stream.
struct AudioSetupInformation: Equatable {
    /// audio_type: `zaac` (AAC-LC), `zac3` (AC-3) or `zec3` (E-AC-3).
    let audioType: [UInt8]
    /// 2.3.2.1 AAC Setup: the AudioSpecificConfig; 2.3.2.2 AC-3 Setup: the first 10 bytes of the syncframe;
    /// 2.3.2.3 Enhanced AC-3 Setup: the body of an EC3SpecificBox (`dec3`).
    let setupData: [UInt8]

    /// priming: no information about encoder priming reaches a transport stream, so 0.
    private static let priming: UInt16 = 0
    /// version: 1.
    private static let version: UInt8 = 1

    /// The registration_descriptor (ISO/IEC 13818-1 2.6.8) carrying this information.
    var registrationDescriptor: [UInt8] {
        var value = SampleAESCodec.audioSetupFormatIdentifier
        value.append(contentsOf: audioType)
        value.append(UInt8(Self.priming >> 8))
        value.append(UInt8(Self.priming & 0xFF))
        value.append(Self.version)
        value.append(UInt8(setupData.count))
        value.append(contentsOf: setupData)
        return [SampleAESCodec.registrationTag, UInt8(value.count)] + value
    }

    /// The setup information of a stream whose first frame starts at `frame`.
    /// - Returns: nil for an AAC profile other than AAC-LC, which SAMPLE-AES does not define.
    static func derive(codec: SampleAESCodec, header: AudioFrameHeader, frame: UnsafePointer<UInt8>) -> AudioSetupInformation? {
        switch codec {
        case .aac:
            // ADTS profile 1 is AAC-LC (object type 2); HE-AAC in ADTS also signals LC with implicit SBR.
            guard header.adtsProfile == 1 else { return nil }
            // ISO/IEC 14496-3 1.6.2.1 AudioSpecificConfig: audioObjectType (5), samplingFrequencyIndex (4),
            // channelConfiguration (4), then GASpecificConfig's three flags, all 0.
            let config =
                UInt16(header.adtsProfile + 1) << 11 | UInt16(header.adtsSamplingFrequencyIndex) << 7
                | UInt16(header.adtsChannelConfiguration) << 3
            return AudioSetupInformation(audioType: Array("zaac".utf8), setupData: [UInt8(config >> 8), UInt8(config & 0xFF)])
        case .ac3:
            guard header.frameLength >= 10 else { return nil }
            return AudioSetupInformation(audioType: Array("zac3".utf8), setupData: Array(UnsafeBufferPointer(start: frame, count: 10)))
        case .eac3:
            return AudioSetupInformation(audioType: Array("zec3".utf8), setupData: ec3SpecificBox(header))
        case .h264:
            return nil
        }
    }

    /// ETSI TS 102 366 F.6 EC3SpecificBox for one independent substream without dependent substreams:
    /// data_rate (13), num_ind_sub (3) = 0, then fscod (2), bsid (5), reserved (1), asvc (1), bsmod (3), acmod (3),
    /// lfeon (1), reserved (3), num_dep_sub (4) = 0, reserved (1).
    private static func ec3SpecificBox(_ header: AudioFrameHeader) -> [UInt8] {
        // E.1.3.1: numblkscod gives 1, 2, 3 or 6 blocks of 256 samples; fscod 3 means half rate and 6 blocks.
        let sampleRates = [48000, 44100, 32000]
        let blocks: Int
        let sampleRate: Int
        if header.fscod == 3 {
            blocks = 6
            sampleRate = sampleRates[Int(min(header.numblkscodOrFscod2, 2))] / 2
        } else {
            blocks = [1, 2, 3, 6][Int(header.numblkscodOrFscod2)]
            sampleRate = sampleRates[Int(header.fscod)]
        }
        let dataRate = min(header.frameLength * 8 * sampleRate / (blocks * 256) / 1000, 0x1FFF)
        let first = UInt16(dataRate) << 3
        return [
            UInt8(first >> 8), UInt8(first & 0xFF),
            (header.fscod & 0x03) << 6 | (header.bsid & 0x1F) << 1,
            (header.acmod & 0x07) << 1 | (header.lfeon & 0x01),
            0,
        ]
    }
}
