// The two system calls Stowage's trusted clock needs, made without libc so that nothing preloaded can interpose them
// (docs/SECURITY.md, "Time"). x86_64 and aarch64 issue the instruction directly; elsewhere syscall(2) is the fallback.
#define _GNU_SOURCE
#include "CKernelTime.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static long raw_syscall5(long number, long a, long b, long c, long d, long e) {
#if defined(__x86_64__)
    long result;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    return result;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = number;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory");
    return x0;
#else
    long result = syscall(number, a, b, c, d, e);
    return result < 0 ? -errno : result;
#endif
}

int stowage_kernel_realtime(struct timespec *time) {
    return (int)raw_syscall5(SYS_clock_gettime, CLOCK_REALTIME, (long)time, 0, 0, 0);
}

int stowage_kernel_change_time(int descriptor, struct timespec *time) {
    struct statx status;
    memset(&status, 0, sizeof status);
    long result = raw_syscall5(SYS_statx, descriptor, (long)"", AT_EMPTY_PATH, STATX_CTIME, (long)&status);
    if (result != 0) return (int)result;
    if (!(status.stx_mask & STATX_CTIME)) return -ENODATA;
    time->tv_sec = status.stx_ctime.tv_sec;
    time->tv_nsec = status.stx_ctime.tv_nsec;
    return 0;
}
