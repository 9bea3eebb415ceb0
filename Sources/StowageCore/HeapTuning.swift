#if canImport(Glibc)
import Glibc
#endif

/// How the C allocator treats large buffers, for a process that streams files through them.
///
/// glibc serves an allocation of 128 KiB or more with its own `mmap` and unmaps it when it is freed (the threshold
/// rises with use, but a streaming server frees as often as it allocates). A server that reads, decrypts and sends a
/// file in 16-256 KiB chunks then faults in and zeroes fresh pages for every chunk and shoots down TLB entries for every
/// free: `exc_page_fault`, `clear_page_erms` and `smp_call_function_many_cond` in its profile (docs/PERFORMANCE.md).
public enum HeapTuning {
    /// Keeps allocations up to 32 MiB in the heap, and freed memory there up to 128 MiB, for the rest of the process:
    /// the next chunk reuses the pages of the last. What the process holds stays bounded by what it uses at once.
    ///
    /// In one heap arena: with glibc's default of up to eight per core, each thread that frees chunks into an arena of
    /// its own keeps them there, and the peak grew with the number of segments served (`stowage play` 76 MiB at 256
    /// MiB, 87-90 at 1 GiB; with one arena 64-69 at both, at the same rate). Call it before any other thread
    /// allocates: the arena limit binds only arenas not yet made.
    public static func keepStreamingBuffersInHeap() {
        guard let mallopt else { return }
        _ = mallopt(mmapThreshold, 32 << 20)
        _ = mallopt(trimThreshold, 128 << 20)
        _ = mallopt(arenaMax, 1)
    }

    // From <malloc.h>, which the Glibc module does not import.
    private static let trimThreshold: Int32 = -1
    private static let mmapThreshold: Int32 = -3
    private static let arenaMax: Int32 = -8

    /// glibc's `mallopt`, looked up at run time; nil under another C library (then nothing is tuned).
    private static let mallopt: (@convention(c) (Int32, Int32) -> Int32)? = {
        #if canImport(Glibc)
        guard let symbol = dlsym(nil, "mallopt") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
        #else
        return nil
        #endif
    }()
}
