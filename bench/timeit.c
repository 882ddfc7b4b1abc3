/*
 * timeit: run one or more commands as whole processes, alternating them
 * (A B A B ...), and report for each the wall time until a marker string
 * first appears on its stdout, the wall time until the process has exited,
 * and its peak RSS (ru_maxrss from wait4).
 *
 *   timeit [-n RUNS] [-w WARMUP] [-m MARKER] -- CMD_A ARGS... [:: CMD_B ARGS...]
 *
 * The command's stdout is a pipe read by timeit; its stderr goes to
 * /dev/null.  Times are taken with CLOCK_MONOTONIC from just before fork()
 * to (a) the read() that completes the marker and (b) the return of wait4().
 *
 * Output, one line per command (times in milliseconds, memory in KiB):
 *   cmd=K runs=R fail=F marker_min=.. marker_med=.. marker_max=.. \
 *       exit_min=.. exit_med=.. exit_max=.. maxrss_med=..
 * A run "fails" when the command exits non-zero, is killed by a signal, or
 * never prints the marker.  Failed runs are not counted in the figures.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXCMDS 4
#define MAXRUNS 200

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double);
    if (n == 0)
        return -1;
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct result {
    double marker_ms, exit_ms, maxrss_kb;
    int ok;
};

static struct result run_once(char **argv, const char *marker)
{
    struct result r = {-1, -1, -1, 0};
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        perror("pipe");
        exit(1);
    }
    double t0 = now_ms();
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);

    /* Keep a sliding window large enough to find the marker across reads. */
    size_t mlen = marker ? strlen(marker) : 0;
    char buf[65536 + 256];
    size_t have = 0;
    int found = marker == NULL;
    for (;;) {
        ssize_t n = read(fds[0], buf + have, 65536);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (!found) {
            have += n;
            buf[have] = 0;
            if (memmem(buf, have, marker, mlen)) {
                found = 1;
                r.marker_ms = now_ms() - t0;
            }
            if (have > mlen) {
                memmove(buf, buf + have - mlen, mlen);
                have = mlen;
            }
        }
    }
    close(fds[0]);
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
        ;
    r.exit_ms = now_ms() - t0;
    r.maxrss_kb = ru.ru_maxrss;
    r.ok = found && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!marker)
        r.marker_ms = r.exit_ms;
    return r;
}

int main(int argc, char **argv)
{
    int runs = 10, warmup = 1;
    const char *marker = NULL;
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-w") && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-m") && i + 1 < argc)
            marker = argv[++i];
        else if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else {
            fprintf(stderr, "usage: timeit [-n RUNS] [-w WARMUP] [-m MARKER] -- CMD... [:: CMD...]\n");
            return 2;
        }
    }
    if (marker && strlen(marker) > 200) {
        fprintf(stderr, "timeit: marker too long\n");
        return 2;
    }
    if (runs < 1 || runs > MAXRUNS || i >= argc) {
        fprintf(stderr, "timeit: need a command and 1..%d runs\n", MAXRUNS);
        return 2;
    }
    char **cmds[MAXCMDS];
    int ncmds = 0;
    cmds[ncmds++] = &argv[i];
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "::")) {
            argv[i] = NULL;
            if (ncmds == MAXCMDS || i + 1 >= argc) {
                fprintf(stderr, "timeit: bad command list\n");
                return 2;
            }
            cmds[ncmds++] = &argv[i + 1];
        }
    }

    static double mk[MAXCMDS][MAXRUNS], ex[MAXCMDS][MAXRUNS], rss[MAXCMDS][MAXRUNS];
    int ok[MAXCMDS] = {0}, fail[MAXCMDS] = {0};
    for (int w = 0; w < warmup; w++)
        for (int c = 0; c < ncmds; c++)
            run_once(cmds[c], marker);
    for (int k = 0; k < runs; k++) {
        for (int c = 0; c < ncmds; c++) {
            struct result r = run_once(cmds[c], marker);
            if (!r.ok) {
                fail[c]++;
                continue;
            }
            mk[c][ok[c]] = r.marker_ms;
            ex[c][ok[c]] = r.exit_ms;
            rss[c][ok[c]] = r.maxrss_kb;
            ok[c]++;
        }
    }
    for (int c = 0; c < ncmds; c++) {
        int n = ok[c];
        double mmed = median(mk[c], n), emed = median(ex[c], n), rmed = median(rss[c], n);
        printf("cmd=%d runs=%d fail=%d marker_min=%.2f marker_med=%.2f marker_max=%.2f "
               "exit_min=%.2f exit_med=%.2f exit_max=%.2f maxrss_med=%.0f\n",
               c, n, fail[c], n ? mk[c][0] : -1, mmed, n ? mk[c][n - 1] : -1,
               n ? ex[c][0] : -1, emed, n ? ex[c][n - 1] : -1, rmed);
    }
    return 0;
}
