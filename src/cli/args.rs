// The command line's definition. build.rs includes this file too, to write
// the man page and the shell completions from it, so it uses only clap.

use clap::Parser;

/// The end of `--help` and of the man page: exit status, signals, the
/// environment (docs/cli.md#environment has the details) and examples.
pub const AFTER_HELP: &str = "\
Exit status: 0 normally; the code given to exit(code); 1 after fail(), a failed check, assert or error; 2 for usage errors.
Signals: SIGINT/SIGTERM end the run (END runs, maps print); SIGUSR1 prints every map and tracing goes on.

Environment (read once at start; a value out of range is an error):
  RTRACE_RING_SIZE=1M       event ring buffer size when --ring-size isn't given
  RTRACE_STRLEN=64          bytes str() reads when no length is given (1-200)
  RTRACE_JOIN_MAX=6         strings of a char ** argument shipped for join() (1-16)
  RTRACE_MAX_PROBES=1024    most attach points of one script after wildcards
  RTRACE_MISSING_PROBES=warn  a wildcard's points that can't attach: error, warn or ignore
  RTRACE_SYSCALL_DISPATCH=8 fewest syscall tracepoints sharing one raw_syscalls program
  RTRACE_STACK_DEPTH=127    frames kept per stack (1-127)
  RTRACE_STACK_ENTRIES      distinct stacks per stack map (16-1048576)
  RTRACE_NO_SPLIT=1         as --no-split
  RTRACE_ERRORS_SHOWN=1     with --keep-going, runtime errors printed before the rest are counted
  RTRACE_VERIFIER_LOG=1     print the full verifier log of a rejected program
  RTRACE_DEBUG_SYMBOLS=1    print user-stack symbolization problems

Examples:
  rtrace -e 'probe(\"tracepoint:syscalls:sys_enter_openat\", |e| { print(str(e.args.filename)); });'
  rtrace -c 'make -j2' -e 'let m = map(); probe(\"tracepoint:raw_syscalls:sys_enter\", |e| { m[e.comm] = count(); });'
  rtrace -l 'tracepoint:sched:*'
  rtrace opensnoop -x               (a tool: rtrace --list-tools; rtrace TOOL -h)
  rtrace --junit out.xml -c ./test.sh budgets.rhai";

#[derive(Parser, Debug)]
#[command(
    name = "rtrace",
    version,
    about = "A Linux tracer: Rhai scripts whose probes compile straight to eBPF",
    override_usage = "rtrace [OPTIONS] SCRIPT.rhai [ARGS...]\n       rtrace [OPTIONS] -e 'SOURCE' [ARGS...]\n       rtrace [OPTIONS] - [ARGS...]      (the script from stdin)\n       rtrace [OPTIONS] TOOL [TOOL-ARGS...]   (rtrace --list-tools)\n       rtrace -l [PATTERN]\n       rtrace --info",
    after_help = AFTER_HELP
)]
pub struct Cli {
    /// Program source to run instead of a script file.
    #[arg(short = 'e', value_name = "SOURCE")]
    pub source: Option<String>,
    /// Stop after this long (e.g. 5s, 100ms).
    #[arg(short = 'd', value_name = "DURATION", allow_hyphen_values = true)]
    pub duration: Option<String>,
    /// Output format: text or json (NDJSON).
    #[arg(short = 'f', value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
    /// Write output to FILE.
    #[arg(short = 'o', value_name = "FILE")]
    pub output: Option<String>,
    /// Output buffering: none, line or full (default: written after each batch of events).
    #[arg(short = 'B', value_name = "MODE", value_parser = ["none", "line", "full"])]
    pub buffering: Option<String>,
    /// Quiet: no "Attaching N probes..." line.
    #[arg(short = 'q')]
    pub quiet: bool,
    /// Verbose: per program, its instructions, what the verifier processed, its maps
    /// and their sizes, and where it attaches; at exit, each probe's overhead (on
    /// stderr); with -l, probe arguments.
    #[arg(short = 'v')]
    pub verbose: bool,
    /// Report failed helper calls, counted per probe and statement (bpftrace's -k):
    /// -k map updates and deletes that fail; -kk memory reads too (str(), e.args.X
    /// through a pointer, buf(), BTF members), which fail on unmapped memory.
    #[arg(short = 'k', action = clap::ArgAction::Count)]
    pub check_helpers: u8,
    /// Print no warnings (errors still print).
    #[arg(long = "no-warnings")]
    pub no_warnings: bool,
    /// Allow system() and other actions with side effects.
    #[arg(long = "unsafe")]
    pub allow_unsafe: bool,
    /// Run the script with every action (signal(), deny(), kill(), system())
    /// reported on an `rtrace: action:` line but not taken; needs no --unsafe.
    #[arg(long)]
    pub monitor: bool,
    /// Start at most N commands a second from each system()/exec() call in the
    /// script (bursts up to N); calls over it are counted and reported, not run.
    #[arg(long = "command-rate", value_name = "N")]
    pub command_rate: Option<f64>,
    /// Kill a command of system()/exec() (its whole process group) that runs
    /// longer than DURATION (default 60s; 0: no limit).
    #[arg(long = "command-timeout", value_name = "DURATION")]
    pub command_timeout: Option<String>,
    /// Show maps, record layouts and BPF disassembly per probe; attach nothing.
    #[arg(long)]
    pub explain: bool,
    /// Compile and load through the verifier; attach nothing.
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// What a point of a wildcard (or list) probe that the kernel can't attach does:
    /// `error` ends the run, `warn` (the default) prints one warning per point and
    /// goes on, `ignore` skips it silently (env RTRACE_MISSING_PROBES). A probe none
    /// of whose points attach is always an error.
    #[arg(long = "missing-probes", value_name = "MODE", value_parser = ["error", "warn", "ignore"])]
    pub missing_probes: Option<String>,
    /// Run every probe's closure whole in userspace, as ordinary Rhai (the
    /// kernel only captures each event): the meaning the kernel/userspace
    /// split must keep, to check a surprising result (env RTRACE_NO_SPLIT=1).
    #[arg(long = "no-split")]
    pub no_split: bool,
    /// Keep going after an error in a probe's userspace statements (count them).
    #[arg(long = "keep-going")]
    pub keep_going: bool,
    /// Size of the event ring buffer, e.g. 4M (env RTRACE_RING_SIZE; default 1M).
    #[arg(long = "ring-size", value_name = "BYTES")]
    pub ring_size: Option<String>,
    /// Trace only this process.
    #[arg(short = 'p', value_name = "PID", allow_negative_numbers = true)]
    pub pid: Option<i32>,
    /// Run CMD (held until probes are attached), trace it, stop when it exits.
    #[arg(short = 'c', value_name = "CMD")]
    pub command: Option<String>,
    /// Serve the maps as Prometheus/OpenMetrics metrics on http://ADDR:PORT/metrics.
    #[arg(long = "serve", value_name = "ADDR:PORT")]
    pub serve: Option<String>,
    /// Prefix of the metric names of maps (default rtrace_).
    #[arg(long = "metrics-prefix", value_name = "PREFIX", default_value = "rtrace_")]
    pub metrics_prefix: String,
    /// With --serve: run as a metrics service (no terminal output unless the
    /// script prints; SIGHUP reloads the script).
    #[arg(long = "exporter")]
    pub exporter: bool,
    /// List probes matching PATTERN.
    #[arg(short = 'l')]
    pub list: bool,
    /// What this kernel offers: probe types (and why one is missing), BTF, ring buffer, helpers.
    #[arg(long)]
    pub info: bool,
    /// Write the results of check(), fail() and assert() to FILE as JUnit XML.
    #[arg(long = "junit", value_name = "FILE")]
    pub junit: Option<String>,
    /// Report the checks where a CI system shows them: `github` (an ::error
    /// annotation at each failed check's line, a table in $GITHUB_STEP_SUMMARY),
    /// `gitlab` (metrics.txt), `none`; `auto` picks from GITHUB_ACTIONS/GITLAB_CI.
    #[arg(long = "ci-report", value_name = "SYSTEM", default_value = "auto",
          value_parser = ["auto", "github", "gitlab", "none"])]
    pub ci_report: String,
    /// Compare regression(name, m, pct) checks with the distributions saved in FILE.
    #[arg(long = "baseline", value_name = "FILE")]
    pub baseline: Option<String>,
    /// Save the distributions regression() checks measured to FILE, for --baseline.
    #[arg(long = "save-baseline", value_name = "FILE")]
    pub save_baseline: Option<String>,
    /// With -c: run the command N times in a row under the same probes (maps add up; each
    /// run is a testcase, command_runs() lists them); a run that fails ends the series.
    #[arg(long = "repeat", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub repeat: Option<u32>,
    /// Write the run (checks with their values, the command's fate, exit status) to FILE as JSON.
    #[arg(long = "summary", value_name = "FILE")]
    pub summary: Option<String>,
    /// List the embedded tools (`rtrace TOOL [ARGS...]` runs one).
    #[arg(long = "list-tools")]
    pub list_tools: bool,
    /// SCRIPT.rhai (or - for stdin) followed by its ARGS (or only ARGS with -e; the PATTERN with -l).
    /// Options may come anywhere; ARGS that start with '-' go after `--`.
    pub rest: Vec<String>,
}
