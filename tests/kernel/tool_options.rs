//! The headline tools' options against BCC 0.26's. The table is BCC's
//! option list for each tool (its `-h`), with a sample value where the
//! option takes one; each option must be listed by `rtrace TOOL -h` with the
//! same short and long name, take a value exactly when BCC's does, and be
//! accepted by the parser (`rtrace TOOL OPTION [VALUE] -h` ends with the
//! help, status 0). An option rtrace's tool lists that BCC's doesn't must be
//! in `RTRACE_ONLY` with the reason. Left out of the table on purpose:
//! `--cgroupmap`/`--mntnsmap` (BCC's pinned-map filters), `-I/--include`
//! of argdist and trace (C headers: rtrace reads types from BTF) and the
//! hidden `--ebpf`.

use crate::common::*;

/// BCC 0.26: `-s/--long` is a flag; `-s/--long VALUE` takes a value (VALUE a sample).
const BCC_0_26: &[(&str, &[&str])] = &[
    (
        "argdist",
        &[
            "-C/--count t:syscalls:sys_enter_read():u64:args->count",
            "-c/--cumulative",
            "-d/--duration 1",
            "-H/--histogram t:syscalls:sys_enter_read():u64:args->count",
            "-i/--interval 1",
            "-n/--number 1",
            "-p/--pid 1",
            "-t/--tid 1",
            "-T/--top 5",
            "-v/--verbose",
            "-z/--string-size 80",
        ],
    ),
    (
        "trace",
        &[
            "-a/--address",
            "-A/--aggregate",
            "-B/--bin_cmp",
            "-b/--buffer-pages 64",
            "-c/--cgroup-path /sys/fs/cgroup",
            "-C/--print_cpu",
            "-f/--msg-filter x",
            "-K/--kernel-stack",
            "-L/--tid 1",
            "-M/--max-events 1",
            "-n/--name x",
            "-p/--pid 1",
            "-S/--include-self",
            "-s/--sym_file_list /bin/true",
            "-T/--time",
            "-t/--timestamp",
            "-u/--unix-timestamp",
            "-U/--user-stack",
            "--uid 0",
            "-v/--verbose",
            "-Z/--string-size 80",
        ],
    ),
    (
        "funccount",
        &[
            "-c/--cpu 0",
            "-D/--debug",
            "-d/--duration 1",
            "-i/--interval 1",
            "-p/--pid 1",
            "-r/--regexp",
            "-T/--timestamp",
        ],
    ),
    (
        "funclatency",
        &[
            "-d/--duration 1",
            "-F/--function",
            "-i/--interval 1",
            "-l/--level 1",
            "-m/--milliseconds",
            "-p/--pid 1",
            "-r/--regexp",
            "-T/--timestamp",
            "-u/--microseconds",
            "-v/--verbose",
        ],
    ),
    (
        "stackcount",
        &[
            "-c/--cpu 0",
            "-d/--delimited",
            "-D/--duration 1",
            "--debug",
            "-f/--folded",
            "-i/--interval 1",
            "-K/--kernel-stacks-only",
            "-P/--perpid",
            "-p/--pid 1",
            "-r/--regexp",
            "-s/--offset",
            "-T/--timestamp",
            "-U/--user-stacks-only",
            "-v/--verbose",
        ],
    ),
    (
        "opensnoop",
        &[
            "-b/--buffer-pages 64",
            "-d/--duration 1",
            "-e/--extended_fields",
            "-f/--flag_filter O_WRONLY",
            "-F/--full-path",
            "-n/--name x",
            "-p/--pid 1",
            "-t/--tid 1",
            "-T/--timestamp",
            "-U/--print-uid",
            "-u/--uid 0",
            "-x/--failed",
        ],
    ),
    (
        "execsnoop",
        &[
            "-l/--line x",
            "--max-args 20",
            "-n/--name x",
            "-P/--ppid 1",
            "-q/--quote",
            "-T/--time",
            "-t/--timestamp",
            "-U/--print-uid",
            "-u/--uid 0",
            "-x/--fails",
        ],
    ),
    (
        "syscount",
        &[
            "-c/--ppid 1",
            "-d/--duration 1",
            "-e/--errno EPERM",
            "-i/--interval 1",
            "-L/--latency",
            "-l/--list",
            "-m/--milliseconds",
            "-p/--pid 1",
            "-P/--process",
            "--syscall read",
            "-t/--tid 1",
            "-T/--top 5",
            "-x/--failures",
        ],
    ),
    ("runqlat", &["-L/--tids", "-m/--milliseconds", "-p/--pid 1", "-P/--pids", "--pidnss", "-T/--timestamp"]),
    (
        "biolatency",
        &[
            "-d/--disk sda",
            "-D/--disks",
            "-e/--extension",
            "-F/--flags",
            "-j/--json",
            "-m/--milliseconds",
            "-Q/--queued",
            "-T/--timestamp",
        ],
    ),
    (
        "tcplife",
        &[
            "-4/--ipv4",
            "-6/--ipv6",
            "-D/--remoteport 80",
            "-L/--localport 80",
            "-p/--pid 1",
            "-s/--csv",
            "-T/--time",
            "-t/--timestamp",
            "-w/--wide",
        ],
    ),
    (
        "profile",
        &[
            "-a/--annotations",
            "-c/--count 1000",
            "-C/--cpu 0",
            "-d/--delimited",
            "-f/--folded",
            "-F/--frequency 49",
            "-I/--include-idle",
            "-K/--kernel-stacks-only",
            "-L/--tid 1",
            "-p/--pid 1",
            "--stack-storage-size 1024",
            "-U/--user-stacks-only",
        ],
    ),
    ("statsnoop", &["-p/--pid 1", "-t/--timestamp", "-x/--failed"]),
    ("exitsnoop", &["--label x", "-p/--pid 1", "--per-thread", "-t/--timestamp", "--utc", "-x/--failed"]),
];

/// Options of rtrace's tools that BCC 0.26's don't have: (tool, `-s/--long`, why).
const RTRACE_ONLY: &[(&str, &str, &str)] = &[(
    "profile",
    "-v/--verbose",
    "prints the rtrace probe the tool generates (BCC's --ebpf, which prints its C program, is hidden)",
)];

/// One option as the table or a help row names it.
#[derive(Debug, Clone, PartialEq)]
struct Opt {
    short: Option<String>,
    long: Option<String>,
    takes_value: bool,
}

impl Opt {
    /// `-s/--long`, `--long` or `-s`.
    fn names(&self) -> String {
        [self.short.clone(), self.long.clone()].into_iter().flatten().collect::<Vec<_>>().join("/")
    }
}

/// A table entry: the option and its sample value.
fn table_entry(entry: &str) -> (Opt, Option<&str>) {
    let (names, value) = match entry.split_once(' ') {
        Some((n, v)) => (n, Some(v)),
        None => (entry, None),
    };
    let mut opt = Opt { short: None, long: None, takes_value: value.is_some() };
    for n in names.split('/') {
        if n.starts_with("--") {
            opt.long = Some(n.to_string());
        } else {
            opt.short = Some(n.to_string());
        }
    }
    (opt, value)
}

/// The options a tool's `-h` lists (rows `  -s VALUE, --long VALUE   help`).
fn options_in_help(help: &str) -> Vec<Opt> {
    let mut out = Vec::new();
    let mut in_options = false;
    for line in help.lines() {
        if line == "options:" {
            in_options = true;
            continue;
        }
        if in_options && !line.starts_with(' ') && !line.is_empty() {
            break;
        }
        let Some(row) = line.strip_prefix("  ").filter(|r| r.starts_with('-')) else { continue };
        let names = row.split("  ").next().unwrap_or("");
        let mut opt = Opt { short: None, long: None, takes_value: false };
        for n in names.split(", ") {
            let mut words = n.split(' ');
            let name = words.next().unwrap_or("").to_string();
            opt.takes_value |= words.next().is_some();
            if name.starts_with("--") {
                opt.long = Some(name);
            } else {
                opt.short = Some(name);
            }
        }
        if opt.long.as_deref() != Some("--help") {
            out.push(opt);
        }
    }
    out
}

kernel_test!(headline_tools_take_bccs_options);
/// Every BCC 0.26 option of the headline tools, by the table above.
fn headline_tools_take_bccs_options() {
    let _g = setup();
    let mut problems = Vec::new();
    for (tool, entries) in BCC_0_26 {
        let help = run(&[tool, "-h"]);
        assert_eq!(help.code, Some(0), "{tool} -h\n{help}");
        let listed = options_in_help(&help.stdout);
        let mut bcc = Vec::new();
        for entry in *entries {
            let (want, value) = table_entry(entry);
            bcc.push(want.clone());
            match listed.iter().find(|o| o.short == want.short && o.long == want.long) {
                None => problems.push(format!("{tool}: BCC's {} isn't listed by `{tool} -h`", want.names())),
                Some(o) if o.takes_value != want.takes_value => problems.push(format!(
                    "{tool}: {} {} a value in BCC but not in rtrace",
                    want.names(),
                    if want.takes_value { "takes" } else { "doesn't take" }
                )),
                Some(_) => {
                    // Each of its names is parsed (an unknown option or a
                    // missing value ends with status 2 before the help).
                    for name in [&want.short, &want.long].into_iter().flatten() {
                        let mut args = vec![*tool, name.as_str()];
                        args.extend(value);
                        args.push("-h");
                        let out = run(&args);
                        if out.code != Some(0) || !out.stdout.starts_with(&format!("usage: {tool}")) {
                            problems.push(format!(
                                "{tool}: `{}` isn't accepted: {}",
                                args.join(" "),
                                out.stderr.trim()
                            ));
                        }
                    }
                }
            }
        }
        for o in &listed {
            let known = bcc.iter().any(|b| b.short == o.short && b.long == o.long)
                || RTRACE_ONLY.iter().any(|(t, names, _)| t == tool && *names == o.names());
            if !known {
                let clash = bcc
                    .iter()
                    .find(|b| (o.short.is_some() && b.short == o.short) || (o.long.is_some() && b.long == o.long));
                problems.push(match clash {
                    Some(b) => format!("{tool}: {} clashes with BCC's {}", o.names(), b.names()),
                    None => format!("{tool}: {} isn't BCC's and isn't in RTRACE_ONLY", o.names()),
                });
            }
        }
    }
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n"));
}

kernel_test!(help_rows_are_read_as_options, without_root);
/// The help reader above, on rows of each shape (so a tool test can't pass
/// because rows went unread).
fn help_rows_are_read_as_options() {
    let help = "usage: t [-h]\n\noptions:\n  -h, --help            show\n  -T, --timestamp       a\n  -p PID, --pid PID     b\n  --max-args MAX_ARGS   c\n  -d DURATION, --duration DURATION\n                        d\n  -f [F ...], --flag_filter [F ...]\n                        e\n\nexamples:\n  -x, --nope   not an option row\n";
    let got: Vec<_> = options_in_help(help).iter().map(|o| (o.names(), o.takes_value)).collect();
    let want = [
        ("-T/--timestamp", false),
        ("-p/--pid", true),
        ("--max-args", true),
        ("-d/--duration", true),
        ("-f/--flag_filter", true),
    ];
    assert_eq!(got, want.map(|(n, v)| (n.to_string(), v)));
}
