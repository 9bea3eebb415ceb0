/// A track of an init section: its sample entries and its `trex` defaults (ISO/IEC 14496-12 8.8.3).
struct TrackDescription: Sendable {
    var trackID: UInt32
    var handler: FourCC
    var entries: [SampleEntryDescription]
    var defaultSampleDescriptionIndex: UInt32 = 1
    var defaultSampleSize: UInt32?
}
