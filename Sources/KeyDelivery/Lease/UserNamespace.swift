/// Whether this process runs in the machine's own user namespace, where an ordinary user cannot mount anything.
///
/// Inside a user namespace of one's own (`unshare -rm`, a rootless container, a sandbox), a user can mount an overlay
/// or a copy over the data directory, so that what Stowage writes never reaches the real files: every session would
/// then start from the same saved state, first plays and ends forgotten, with every file's change time intact
/// (docs/SECURITY.md, "Restoring"). Playback refuses there. The initial user namespace maps every uid to itself:
/// `/proc/self/uid_map` reads `0 0 4294967295`.
public enum UserNamespace {
    /// A sentence saying why this process is not in the machine's own user namespace, or nil when it is.
    public static func confinement() -> String? {
        guard let text = KernelTime.readProc("/proc/self/uid_map", limit: 4_096), !text.isEmpty else {
            return "its user namespace cannot be told (/proc/self/uid_map cannot be read)"
        }
        let map = text.split(whereSeparator: \.isWhitespace)
        guard map != ["0", "0", "4294967295"] else { return nil }
        let shown = map.joined(separator: " ")
        return "it runs in a user namespace of its own (unshare, a rootless container or a sandbox: uid map \"\(shown)\"), where "
            + "the data directory can be mounted over so that its state never changes"
    }
}
