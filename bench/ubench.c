/*
 * ubench: helpers for bench/userspace.sh (events delivered to userspace).
 *
 *   ubench gen RATE SECS GOFILE
 *       Prints "pid=PID" and waits until GOFILE exists (so a tracer can be
 *       started with the pid in its filter and attached first), then makes
 *       getppid() syscalls for SECS seconds, paced to RATE calls/s (0: as
 *       fast as it can), then one getpgid() syscall as an end marker.  Prints
 *         calls=N start=NS end=NS ns_per_call=X rate=R
 *       (CLOCK_MONOTONIC ns; rate = calls per second actually achieved).
 *
 *   ubench once COUNT GAP_MS GOFILE
 *       Prints "pid=PID", waits for GOFILE, makes one untimed warm-up
 *       getppid() call (prints "warm"), sleeps GAP_MS, then COUNT times: reads
 *       CLOCK_MONOTONIC, makes one getppid() syscall, prints "call=NS", sleeps
 *       GAP_MS ms.  Then one getpgid() syscall as an end marker.
 *
 *   ubench stamp
 *       Reads lines on stdin.  Lines that are exactly "x" are only counted;
 *       every other line is written to stdout prefixed with the
 *       CLOCK_MONOTONIC ns at which the read() that returned it completed.
 *       At EOF prints "xlines=N".
 *
 *   ubench waitfor FILE STRING TIMEOUT_S
 *       Polls FILE every 0.5 ms until its last 4 KiB contain STRING; prints "found=NS" (CLOCK_MONOTONIC when seen) and
 *       exits 0, or exits 1 after TIMEOUT_S seconds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void wait_go(const char *gofile)
{
    printf("pid=%d\n", (int)getpid());
    fflush(stdout);
    struct stat st;
    long long t0 = now_ns();
    while (stat(gofile, &st) != 0) {
        if (now_ns() - t0 > 60LL * 1000000000LL) {
            fprintf(stderr, "ubench: no %s within 60 s\n", gofile);
            exit(3);
        }
        usleep(200);
    }
}

static int gen(long long rate, double secs, const char *gofile)
{
    wait_go(gofile);
    long long start = now_ns(), stop = start + (long long)(secs * 1e9), now = start;
    long long calls = 0;
    /* Look at the clock every 16 calls: stop after SECS, and when paced,
     * busy-wait until the next 16 calls are due. */
    double per = rate > 0 ? 1e9 / (double)rate : 0;
    while (now < stop) {
        if (rate > 0) {
            long long due = start + (long long)(calls * per);
            while ((now = now_ns()) < due)
                ;
            if (now >= stop)
                break;
        }
        for (int j = 0; j < 16; j++)
            syscall(SYS_getppid);
        calls += 16;
        now = now_ns();
    }
    long long end = now_ns();
    syscall(SYS_getpgid, 0);
    printf("calls=%lld start=%lld end=%lld ns_per_call=%.1f rate=%.0f\n", calls, start, end,
           (end - start) / (double)calls, calls / ((end - start) / 1e9));
    return 0;
}

static int once(long count, long gap_ms, const char *gofile)
{
    wait_go(gofile);
    syscall(SYS_getppid);
    printf("warm\n");
    fflush(stdout);
    usleep(gap_ms * 1000);
    for (long i = 0; i < count; i++) {
        long long t = now_ns();
        syscall(SYS_getppid);
        printf("call=%lld\n", t);
        fflush(stdout);
        usleep(gap_ms * 1000);
    }
    syscall(SYS_getpgid, 0);
    return 0;
}

static int stamp(void)
{
    static char buf[1 << 16];
    static char line[4096];
    size_t ll = 0;
    long long xlines = 0;
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        long long t = now_ns();
        for (ssize_t i = 0; i < n; i++) {
            char c = buf[i];
            if (c != '\n') {
                if (ll < sizeof line - 1)
                    line[ll++] = c;
                continue;
            }
            if (ll == 1 && line[0] == 'x') {
                xlines++;
            } else {
                line[ll] = 0;
                printf("%lld %s\n", t, line);
                fflush(stdout);
            }
            ll = 0;
        }
    }
    if (ll) {
        line[ll] = 0;
        printf("%lld %s\n", now_ns(), line);
    }
    printf("xlines=%lld\n", xlines);
    return 0;
}

static int waitfor(const char *path, const char *what, double timeout)
{
    static char buf[4097];
    size_t wl = strlen(what);
    long long t0 = now_ns();
    for (;;) {
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            struct stat st;
            if (fstat(fd, &st) == 0) {
                off_t off = st.st_size > 4096 ? st.st_size - 4096 : 0;
                ssize_t n = pread(fd, buf, 4096, off);
                if (n > 0) {
                    buf[n] = 0;
                    for (ssize_t i = 0; i + (ssize_t)wl <= n; i++) {
                        if (!memcmp(buf + i, what, wl)) {
                            long long t = now_ns();
                            close(fd);
                            printf("found=%lld\n", t);
                            return 0;
                        }
                    }
                }
            }
            close(fd);
        }
        if (now_ns() - t0 > (long long)(timeout * 1e9))
            return 1;
        usleep(500);
    }
}

int main(int argc, char **argv)
{
    if (argc >= 5 && !strcmp(argv[1], "waitfor"))
        return waitfor(argv[2], argv[3], atof(argv[4]));
    if (argc >= 5 && !strcmp(argv[1], "gen"))
        return gen(atoll(argv[2]), atof(argv[3]), argv[4]);
    if (argc >= 5 && !strcmp(argv[1], "once"))
        return once(atol(argv[2]), atol(argv[3]), argv[4]);
    if (argc >= 2 && !strcmp(argv[1], "stamp"))
        return stamp();
    fprintf(stderr, "usage: ubench gen RATE SECS GOFILE | once COUNT GAP_MS GOFILE | stamp | waitfor FILE STRING TIMEOUT_S\n");
    return 2;
}
