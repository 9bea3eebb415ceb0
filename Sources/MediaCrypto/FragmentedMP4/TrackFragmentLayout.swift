/// Where a `traf` lies in its `moof` and which of its fields depend on positions, for rewriting the `moof`.
struct TrackFragmentLayout {
    var traf: MP4Box
    var trackID: UInt32
    /// tfhd's 64-bit base_data_offset, when present: its offset in the moof and its value (a segment position).
    var baseDataOffset: (field: Int, value: Int)?
    /// Each trun data_offset: its offset in the moof and the position it counts from.
    var dataOffsets: [(field: Int, base: Int)] = []
    var samples: Range<Int>
    var entry: SampleEntryDescription?
    /// The traf already has senc, saiz or saio.
    var hasSampleEncryptionBoxes = false
}
