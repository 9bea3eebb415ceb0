/// One program's PMT PID while its sections are reassembled and rewritten.
final class ProgramMapRewrite {
    let programNumber: UInt16
    let pid: UInt16
    var assembler = PSISectionAssembler()
    /// Whether a PMT section has been seen for the program.
    var mapped = false
    /// The output continuity_counter of the next PMT packet, -1 until the first input packet gives it.
    var nextOutputCounter = -1
    /// Whether the input pads its PMT packets with adaptation-field stuffing (Shaka Packager) rather than 0xFF bytes
    /// after the section (ffmpeg); rewritten PMTs are padded the same way.
    var stuffsWithAdaptationField = false

    init(programNumber: UInt16, pid: UInt16) {
        self.programNumber = programNumber
        self.pid = pid
    }

    func takeOutputCounter() -> UInt8 {
        let counter = UInt8(max(nextOutputCounter, 0))
        nextOutputCounter = Int((counter + 1) & 0x0F)
        return counter
    }
}
