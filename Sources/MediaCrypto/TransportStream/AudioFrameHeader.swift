/// The start of one audio frame in a SAMPLE-AES protected stream: how long it is, how much of it is the header,
/// and the fields the audio setup information needs.
struct AudioFrameHeader {
    /// Bytes of header before the 16-byte unencrypted leader: 7 or 9 for ADTS, 0 for AC-3 and E-AC-3 (whose
    /// leader counts from the sync word).
    let headerLength: Int
    /// The whole frame, header included.
    let frameLength: Int

    /// ADTS only: profile_ObjectType, sampling_frequency_index, channel_configuration.
    let adtsProfile: UInt8
    let adtsSamplingFrequencyIndex: UInt8
    let adtsChannelConfiguration: UInt8

    /// AC-3 and E-AC-3: fscod, bsid, acmod, lfeon, and for E-AC-3 numblkscod (or fscod2 when fscod is 3).
    let fscod: UInt8
    let bsid: UInt8
    let acmod: UInt8
    let lfeon: UInt8
    let numblkscodOrFscod2: UInt8

    /// The audio codec whose sync word starts `bytes` (ADTS 0xFFF; AC-3 and E-AC-3 0x0B77, told apart by bsid when
    /// byte 5 is there), or nil.
    static func codec(atStartOf bytes: some RandomAccessCollection<UInt8>) -> SampleAESCodec? {
        guard bytes.count >= 2 else { return nil }
        let first = bytes[bytes.startIndex]
        let second = bytes[bytes.index(after: bytes.startIndex)]
        if first == 0xFF, second & 0xF6 == 0xF0 { return .aac }
        guard first == 0x0B, second == 0x77 else { return nil }
        guard bytes.count >= 6 else { return .ac3 }
        return bytes[bytes.index(bytes.startIndex, offsetBy: 5)] >> 3 > 10 ? .eac3 : .ac3
    }

    /// The number of bytes `parse` needs to see (the longest header it reads).
    static let minimumBytes = 9

    /// Parses the frame starting at `frame`, of which `available` bytes are readable (at least `minimumBytes`
    /// are needed unless the frame is shorter). Returns nil when the bytes are not a frame of this codec.
    static func parse(_ frame: UnsafePointer<UInt8>, available: Int, codec: SampleAESCodec) -> AudioFrameHeader? {
        switch codec {
        case .aac: parseADTS(frame, available: available)
        case .ac3, .eac3: parseDolby(frame, available: available)
        case .h264: nil
        }
    }

    /// ISO/IEC 13818-7 6.2 adts_fixed_header and adts_variable_header.
    private static func parseADTS(_ p: UnsafePointer<UInt8>, available: Int) -> AudioFrameHeader? {
        guard available >= 7, p[0] == 0xFF, p[1] & 0xF6 == 0xF0 else { return nil }
        let headerLength = p[1] & 0x01 != 0 ? 7 : 9
        let frameLength = Int(p[3] & 0x03) << 11 | Int(p[4]) << 3 | Int(p[5] >> 5)
        guard frameLength >= headerLength, available >= headerLength else { return nil }
        return AudioFrameHeader(
            headerLength: headerLength,
            frameLength: frameLength,
            adtsProfile: p[2] >> 6,
            adtsSamplingFrequencyIndex: (p[2] >> 2) & 0x0F,
            adtsChannelConfiguration: (p[2] & 0x01) << 2 | p[3] >> 6,
            fscod: 0,
            bsid: 0,
            acmod: 0,
            lfeon: 0,
            numblkscodOrFscod2: 0
        )
    }

    /// ATSC A/52 5.3.1 syncinfo and 5.4.1 bsi (AC-3, bsid up to 10) or E.1.2 (E-AC-3, bsid 11 to 16).
    private static func parseDolby(_ p: UnsafePointer<UInt8>, available: Int) -> AudioFrameHeader? {
        guard available >= 7, p[0] == 0x0B, p[1] == 0x77 else { return nil }
        let bsid = p[5] >> 3
        if bsid <= 10 {
            let fscod = p[4] >> 6
            let frmsizecod = Int(p[4] & 0x3F)
            guard fscod < 3, frmsizecod < 38 else { return nil }
            return AudioFrameHeader(
                headerLength: 0,
                frameLength: ac3FrameBytes(fscod: Int(fscod), frmsizecod: frmsizecod),
                adtsProfile: 0,
                adtsSamplingFrequencyIndex: 0,
                adtsChannelConfiguration: 0,
                fscod: fscod,
                bsid: bsid,
                acmod: p[6] >> 5,
                lfeon: 0,
                numblkscodOrFscod2: 0
            )
        }
        guard bsid <= 16 else { return nil }
        let frmsiz = Int(p[2] & 0x07) << 8 | Int(p[3])
        return AudioFrameHeader(
            headerLength: 0,
            frameLength: (frmsiz + 1) * 2,
            adtsProfile: 0,
            adtsSamplingFrequencyIndex: 0,
            adtsChannelConfiguration: 0,
            fscod: p[4] >> 6,
            bsid: bsid,
            acmod: (p[4] >> 1) & 0x07,
            lfeon: p[4] & 0x01,
            numblkscodOrFscod2: (p[4] >> 4) & 0x03
        )
    }

    /// ATSC A/52 Table 5.18: nominal bit rates by frmsizecod / 2, in kbit/s.
    private static let ac3BitRates = [32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 576, 640]

    /// ATSC A/52 Table 5.18: the syncframe size in bytes. 48 kHz frames hold 2 words per kbit/s and 32 kHz ones 3;
    /// 44.1 kHz frames hold 320/147 words per kbit/s, rounded down, plus one word for odd frmsizecod.
    static func ac3FrameBytes(fscod: Int, frmsizecod: Int) -> Int {
        let rate = ac3BitRates[frmsizecod >> 1]
        let words: Int
        switch fscod {
        case 0: words = rate * 2
        case 1: words = rate * 320 / 147 + (frmsizecod & 1)
        default: words = rate * 3
        }
        return words * 2
    }
}
