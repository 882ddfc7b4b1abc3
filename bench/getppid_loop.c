/*
 * getppid_loop: call getppid() N times in a tight loop (raw syscall, so no
 * libc caching) and report the cost per call.
 *
 *   getppid_loop N [WARMUP]
 *
 * WARMUP calls (default 100000) are made first and not timed.  The N timed
 * calls are split into 20 equal chunks, each timed on its own; the figure
 * reported is the median chunk's ns/call, which keeps a chunk disturbed by
 * another task (this is meant for small, shared machines) from moving it.
 * Prints one line:
 *   pid=PID calls=TOTAL ns_per_call=MEDIAN ns_min=.. ns_mean=..
 * where TOTAL = WARMUP + N (rounded down to whole chunks) is the number of
 * getppid syscalls this process made: a tracer counting sys_enter_getppid
 * by pid should report exactly that.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHUNKS 20

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: getppid_loop N [WARMUP]\n");
        return 2;
    }
    long per = atol(argv[1]) / CHUNKS;
    long warm = argc > 2 ? atol(argv[2]) : 100000;
    if (per < 1) {
        fprintf(stderr, "getppid_loop: N must be at least %d\n", CHUNKS);
        return 2;
    }
    for (long i = 0; i < warm; i++)
        syscall(SYS_getppid);
    double ns[CHUNKS], total = 0;
    for (int c = 0; c < CHUNKS; c++) {
        double t0 = now_ns();
        for (long i = 0; i < per; i++)
            syscall(SYS_getppid);
        ns[c] = (now_ns() - t0) / per;
        total += ns[c];
    }
    qsort(ns, CHUNKS, sizeof ns[0], cmp);
    printf("pid=%d calls=%ld ns_per_call=%.2f ns_min=%.2f ns_mean=%.2f\n", (int)getpid(),
           warm + per * CHUNKS, (ns[CHUNKS / 2 - 1] + ns[CHUNKS / 2]) / 2, ns[0], total / CHUNKS);
    return 0;
}
