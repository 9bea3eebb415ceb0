#ifndef STOWAGE_CKERNELTIME_H
#define STOWAGE_CKERNELTIME_H

#include <time.h>

/// Reads CLOCK_REALTIME with the clock_gettime system call itself: no libc wrapper and no vDSO, so a library
/// preloaded into the process (LD_PRELOAD, libfaketime) cannot change what it returns. Returns 0, or a negative errno.
int stowage_kernel_realtime(struct timespec *time);

/// The change time (st_ctime) of an open file, read with the statx system call itself, for the same reason.
/// Returns 0, or a negative errno.
int stowage_kernel_change_time(int descriptor, struct timespec *time);

#endif
