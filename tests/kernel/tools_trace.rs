//! `rtrace trace` and BCC 0.26's options of it: each test makes its own
//! events (getpgid/getsid calls with arguments no other process passes,
//! opens of unique paths, writes of unique buffers to /dev/null, calls into
//! the uprobe fixture built under a unique name) and checks what each option
//! filters, which column it adds, or what it prints under the line.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common::*;
use crate::tools::{fixture, lines_with, run_fixture, start_tool};

/// A number no process passes as a pid: above any pid_max, unique to this call.
fn unique_arg() -> i64 {
    0x4000_0000 + (u32::from_str_radix(&token(), 16).unwrap() & 0x3fff_ffff) as i64
}

/// getpgid(arg) as a raw syscall (it fails: no such process).
fn getpgid(arg: i64) {
    unsafe { libc::syscall(libc::SYS_getpgid, arg) };
}

/// getsid(arg) as a raw syscall (it fails: no such process).
fn getsid(arg: i64) {
    unsafe { libc::syscall(libc::SYS_getsid, arg) };
}

/// A trace probe on getpgid calls with one of `args`, printing the argument.
fn getpgid_probe(args: &[i64]) -> String {
    let pred: Vec<String> = args.iter().map(|a| format!("args->pid == {a}")).collect();
    format!("t:syscalls:sys_enter_getpgid ({}) \"%d\", args->pid", pred.join(" || "))
}

/// BCC's columns of an event line after `skip` bytes of time/CPU columns:
/// (PID, TID, COMM, FUNC, message); None for other lines. FUNC takes 16
/// columns, or more for a longer name.
fn event_columns(line: &str, skip: usize) -> Option<(i64, i64, String, String, String)> {
    let l = line.get(skip..)?;
    let num = |s: &str| s.trim().parse::<i64>().ok();
    let func = l.get(32..)?.split(' ').next()?;
    let msg_at = 32 + func.len().max(16) + 1;
    Some((
        num(l.get(0..8)?)?,
        num(l.get(8..16)?)?,
        l.get(16..32)?.trim_end().to_string(),
        func.to_string(),
        l.get(msg_at..)?.to_string(),
    ))
}

/// [`event_columns`] of a line that must be an event line.
fn columns(line: &str, skip: usize) -> (i64, i64, String, String, String) {
    event_columns(line, skip).unwrap_or_else(|| panic!("not an event line: {line:?}"))
}

/// The event lines (those whose message is `msg`) of a finished run.
fn events_with<'a>(out: &'a Outcome, skip: usize, msg: &str) -> Vec<&'a str> {
    out.stdout.lines().filter(|l| event_columns(l, skip).is_some_and(|c| c.4 == msg)).collect()
}

kernel_test!(trace_lines_have_bccs_columns);
/// The header and an event line, in BCC's widths; a probe without a format
/// prints no message (and the header no `-`).
fn trace_lines_have_bccs_columns() {
    let _g = setup();
    let a = unique_arg();
    let spec = format!("t:syscalls:sys_enter_getpgid (args->pid == {a})");
    let mut t = start_tool(&["trace", &spec]);
    getpgid(a);
    t.wait_line("the event", Duration::from_secs(10), |l| l.contains("sys_enter_getpgid"));
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("\nPID     TID     COMM            FUNC             \n"), "{out}");
    let want = format!("{:<7} {:<7} {:<15} {:<16} ", pid(), tid(), comm(), "sys_enter_getpgid");
    assert_eq!(lines_with(&out, &["sys_enter_getpgid"]), vec![want.as_str()], "{out}");
}

kernel_test!(trace_pid_and_tid_filters);
/// -p keeps one process's events, -L one thread's; the other events come
/// first, so a filter that let them through would print them.
fn trace_pid_and_tid_filters() {
    let _g = setup();
    let (a, b) = (unique_arg(), unique_arg());
    let me = pid().to_string();
    let mut t = start_tool(&["trace", "-p", &me, &getpgid_probe(&[a, b])]);
    fork_and_wait(|| getpgid(a));
    getpgid(b);
    t.wait_line("this process's call", Duration::from_secs(10), |l| l.ends_with(&b.to_string()));
    let out = t.interrupt_and_finish();
    assert!(events_with(&out, 0, &a.to_string()).is_empty(), "-p let another process through\n{out}");
    let line = events_with(&out, 0, &b.to_string());
    assert_eq!(line.len(), 1, "{out}");
    assert_eq!(columns(line[0], 0).0, pid(), "{out}");

    let (a, b) = (unique_arg(), unique_arg());
    let me = tid();
    let mut t = start_tool(&["trace", "-L", &me.to_string(), &getpgid_probe(&[a, b])]);
    std::thread::spawn(move || getpgid(a)).join().unwrap();
    getpgid(b);
    t.wait_line("this thread's call", Duration::from_secs(10), |l| l.ends_with(&b.to_string()));
    let out = t.interrupt_and_finish();
    assert!(events_with(&out, 0, &a.to_string()).is_empty(), "-L let another thread through\n{out}");
    let line = events_with(&out, 0, &b.to_string());
    assert_eq!(line.len(), 1, "{out}");
    assert_eq!((columns(line[0], 0).0, columns(line[0], 0).1), (pid(), me), "{out}");
}

kernel_test!(trace_uid_and_name_filters);
/// --uid keeps one user's events, -n the processes whose name contains a
/// text: a child (another user, another name) calls after this process did.
fn trace_uid_and_name_filters() {
    let _g = setup();
    let (a, b) = (unique_arg(), unique_arg());
    let mut t = start_tool(&["trace", "--uid", "65534", &getpgid_probe(&[a, b])]);
    getpgid(b);
    fork_and_wait(|| {
        if unsafe { libc::syscall(libc::SYS_setuid, 65534) } == 0 {
            getpgid(a);
        }
    });
    t.wait_line("the child's call", Duration::from_secs(10), |l| l.ends_with(&a.to_string()));
    let out = t.interrupt_and_finish();
    assert!(events_with(&out, 0, &b.to_string()).is_empty(), "--uid let uid 0 through\n{out}");
    assert_eq!(events_with(&out, 0, &a.to_string()).len(), 1, "{out}");

    let (a, b) = (unique_arg(), unique_arg());
    let tok = token();
    let name = std::ffi::CString::new(format!("rtt_n{tok}")).unwrap();
    let mut t = start_tool(&["trace", "-n", &format!("n{tok}"), &getpgid_probe(&[a, b])]);
    getpgid(b);
    fork_and_wait(|| {
        if set_comm_raw(&name) == 0 {
            getpgid(a);
        }
    });
    t.wait_line("the child's call", Duration::from_secs(10), |l| l.ends_with(&a.to_string()));
    let out = t.interrupt_and_finish();
    assert!(events_with(&out, 0, &b.to_string()).is_empty(), "-n let another name through\n{out}");
    let line = events_with(&out, 0, &a.to_string());
    assert_eq!(line.len(), 1, "{out}");
    assert_eq!(columns(line[0], 0).2, format!("rtt_n{tok}"), "{out}");
}

kernel_test!(trace_msg_filter);
/// -f keeps the events whose formatted message contains the text.
fn trace_msg_filter() {
    let _g = setup();
    let (a, b) = (unique_arg(), unique_arg());
    let spec =
        format!("t:syscalls:sys_enter_getpgid (args->pid == {a} || args->pid == {b}) \"pid %d asked\", args->pid");
    let mut t = start_tool(&["trace", "-f", &format!("{b} ask"), &spec]);
    getpgid(a);
    getpgid(b);
    t.wait_line("the second call", Duration::from_secs(10), |l| l.contains(&b.to_string()));
    let out = t.interrupt_and_finish();
    assert!(lines_with(&out, &[&a.to_string()]).is_empty(), "-f let another message through\n{out}");
    assert_eq!(events_with(&out, 0, &format!("pid {b} asked")).len(), 1, "{out}");
}

kernel_test!(trace_max_events_counts_all_probes);
/// -M ends the run after that many lines, counted over every probe.
fn trace_max_events_counts_all_probes() {
    let _g = setup();
    let a = unique_arg();
    let sid = format!("t:syscalls:sys_enter_getsid (args->pid == {a}) \"sid %d\", args->pid");
    let mut t = Tracer::start(&["trace", "-M", "3", &getpgid_probe(&[a]), &sid]);
    t.wait_attached();
    for _ in 0..3 {
        getpgid(a);
        getsid(a);
    }
    let out = t.finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(events_with(&out, 0, &a.to_string()).len(), 2, "{out}");
    assert_eq!(events_with(&out, 0, &format!("sid {a}")).len(), 1, "{out}");
}

/// Run `f` with this thread on one CPU (the last it may use); returns that CPU.
fn on_one_cpu(f: impl FnOnce()) -> usize {
    unsafe {
        let mut old: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old), 0);
        let cpu = (0..libc::CPU_SETSIZE as usize).rev().find(|&c| libc::CPU_ISSET(c, &old)).unwrap();
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        assert_eq!(libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one), 0);
        f();
        assert_eq!(libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &old), 0);
        cpu
    }
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

kernel_test!(trace_time_and_cpu_columns);
/// -t: seconds since the start (8 columns); -t -u: UNIX time (17 columns);
/// -T: local HH:MM:SS; -C: the CPU the event happened on.
fn trace_time_and_cpu_columns() {
    let _g = setup();
    let a = unique_arg();
    let mut t = start_tool(&["trace", "-t", "-C", &getpgid_probe(&[a])]);
    let cpu = on_one_cpu(|| getpgid(a));
    t.wait_line("the event", Duration::from_secs(10), |l| l.ends_with(&a.to_string()));
    let out = t.interrupt_and_finish();
    assert!(out.stdout.contains("\nTIME     CPU PID     TID     COMM            FUNC             -\n"), "{out}");
    let line = events_with(&out, 13, &a.to_string());
    assert_eq!(line.len(), 1, "{out}");
    let secs: f64 = line[0][..8].trim().parse().unwrap_or_else(|_| panic!("no offset in {:?}", line[0]));
    assert!(line[0][..8].contains('.') && secs >= 0.0 && secs <= out.elapsed.as_secs_f64(), "{out}");
    assert_eq!(line[0][9..13], format!("{cpu:<3} "), "{out}");
    assert_eq!(columns(line[0], 13).0, pid(), "{out}");

    let a = unique_arg();
    let before = unix_now();
    let mut t = start_tool(&["trace", "-t", "-u", &getpgid_probe(&[a])]);
    getpgid(a);
    t.wait_line("the event", Duration::from_secs(10), |l| l.ends_with(&a.to_string()));
    let out = t.interrupt_and_finish();
    let after = unix_now();
    assert!(out.stdout.contains(&format!("\n{:<17} PID     TID", "TIME")), "{out}");
    let line = events_with(&out, 18, &a.to_string());
    assert_eq!(line.len(), 1, "{out}");
    let stamp: f64 = line[0][..17].trim().parse().unwrap_or_else(|_| panic!("no UNIX time in {:?}", line[0]));
    assert!(stamp >= before.floor() && stamp <= after + 1.0, "{stamp} not in [{before}, {after}]\n{out}");

    let a = unique_arg();
    let mut t = start_tool(&["trace", "-T", &getpgid_probe(&[a])]);
    getpgid(a);
    t.wait_line("the event", Duration::from_secs(10), |l| l.ends_with(&a.to_string()));
    let out = t.interrupt_and_finish();
    assert!(out.stdout.contains("\nTIME     PID     TID"), "{out}");
    let line = events_with(&out, 9, &a.to_string());
    assert_eq!(line.len(), 1, "{out}");
    let hms: Vec<&str> = line[0][..8].split(':').collect();
    assert!(hms.len() == 3 && hms.iter().all(|p| p.len() == 2 && p.parse::<u32>().is_ok()), "{out}");
}

/// The lines printed under the event line whose message is `msg`, up to the
/// empty line that ends them.
fn stack_under(out: &Outcome, msg: &str) -> Vec<String> {
    let lines = out.lines();
    let at = lines.iter().position(|l| l.ends_with(msg)).unwrap_or_else(|| panic!("no event {msg}\n{out}"));
    let frames: Vec<String> = lines[at + 1..].iter().take_while(|l| !l.is_empty()).map(|l| l.to_string()).collect();
    assert!(lines.len() > at + 1 + frames.len(), "no empty line after the stack\n{out}");
    frames
}

kernel_test!(trace_kernel_stack);
/// -K prints the kernel stack under the line, `func+0xOFF [kernel]`, 8
/// spaces in, and an empty line after it.
fn trace_kernel_stack() {
    let _g = setup();
    let a = unique_arg();
    let mut t = start_tool(&["trace", "-K", &getpgid_probe(&[a])]);
    getpgid(a);
    t.wait_for(Duration::from_secs(10), |lines| {
        lines.iter().skip_while(|l| !l.ends_with(&a.to_string())).any(|l| l.is_empty())
    });
    let out = t.interrupt_and_finish();
    let frames = stack_under(&out, &a.to_string());
    assert!(!frames.is_empty(), "{out}");
    for f in &frames {
        let sym = f.strip_prefix("        ").and_then(|s| s.strip_suffix(" [kernel]"));
        assert!(sym.is_some_and(|s| s.contains("+0x") && !s.contains(' ')), "frame {f:?}\n{out}");
    }
    assert!(frames.iter().any(|f| f.contains("syscall")), "{out}");
}

kernel_test!(trace_user_stack_and_addresses, needs: Program("gcc"));
/// -U prints the user stack, `func+0xOFF [file name]`; -a puts each
/// frame's address before it, in 16 columns.
fn trace_user_stack_and_addresses() {
    let _g = setup();
    let (_d, bin) = fixture();
    let name = bin.file_name().unwrap().to_str().unwrap().to_string();
    let spec = format!("p:{}:rtt_add(int a, int b) (b == 20) \"a=%d\", a", bin.display());
    for address in [false, true] {
        let args: Vec<&str> = if address { vec!["trace", "-U", "-a", &spec] } else { vec!["trace", "-U", &spec] };
        let mut t = start_tool(&args);
        run_fixture(&bin, 4);
        t.wait_for(Duration::from_secs(10), |lines| {
            lines.iter().skip_while(|l| !l.ends_with("a=2")).any(|l| l.is_empty())
        });
        let out = t.interrupt_and_finish();
        let frames = stack_under(&out, "a=2");
        // At a function's entry, its own address is the first frame.
        let first = frames.first().unwrap_or_else(|| panic!("no user stack\n{out}"));
        let tail = format!("rtt_add+0x0 [{name}]");
        if address {
            let frame = first.strip_prefix("        ").unwrap_or("");
            let (addr, rest) = frame.split_at(frame.len().min(16));
            let hex = u64::from_str_radix(addr.trim_start(), 16);
            assert!(hex.is_ok_and(|h| h != 0) && rest == format!(" {tail}"), "frame {first:?}\n{out}");
        } else {
            assert_eq!(first, &format!("        {tail}"), "{out}");
        }
    }
}

kernel_test!(trace_aggregate_counts_identical_events, needs: Program("gcc"));
/// -A prints each distinct event once at the end, most frequent first, with
/// `-->COUNT N`; -M says how many events to take.
fn trace_aggregate_counts_identical_events() {
    let _g = setup();
    let (_d, bin) = fixture();
    let add = format!("p:{}:rtt_add(int a) \"added %d\", a", bin.display());
    let mul = format!("p:{}:rtt_mul \"multiplied\"", bin.display());
    let mut t = Tracer::start(&["trace", "-A", "-M", "9", &mul, &add]);
    t.wait_attached();
    // rtt_add(i, 10 * i), then rtt_mul, each round: the first 9 calls are
    // rtt_add with 0 to 4 (5 distinct events) and 4 identical rtt_mul calls.
    run_fixture(&bin, 6);
    let out = t.finish();
    assert_eq!(out.code, Some(0), "{out}");
    let text = &out.stdout;
    let at = |msg: &str, n: u32| {
        text.find(&format!(" {msg}\n-->COUNT {n}\n\n")).unwrap_or_else(|| panic!("no {msg:?} counted {n}\n{out}"))
    };
    let order: Vec<usize> = (0..5).map(|i| at(&format!("added {i}"), 1)).collect();
    let multiplied = at("multiplied", 4);
    assert!(multiplied < order[0], "the largest count comes first\n{out}");
    assert!(order.windows(2).all(|w| w[0] < w[1]), "equal counts in the order they were first seen\n{out}");
    assert_eq!(lines_with(&out, &["rtt_"]).len(), 6, "each distinct event once\n{out}");
}

kernel_test!(trace_string_size);
/// -Z: strings are read up to that many bytes.
fn trace_string_size() {
    let _g = setup();
    let path = format!("/tmp/rtt_{}_a_longer_name", token());
    let spec =
        format!("t:syscalls:sys_enter_openat (STRCMP(\"{}\", args->filename)) \"%s\", args->filename", &path[..17]);
    let mut t = start_tool(&["trace", "-Z", "11", &spec]);
    let _ = std::fs::File::open(&path);
    t.wait_line("the open", Duration::from_secs(10), |l| l.contains("sys_enter_openat"));
    let out = t.interrupt_and_finish();
    assert_eq!(events_with(&out, 0, &path[..11]).len(), 1, "{out}");
}

kernel_test!(trace_strcmp_compares_a_prefix);
/// STRCMP("TEXT", ptr) in a predicate: the string at ptr starts with TEXT;
/// as a value it is 1 or 0.
fn trace_strcmp_compares_a_prefix() {
    let _g = setup();
    let base = format!("/tmp/rtt_{}", token());
    let spec = format!(
        "t:syscalls:sys_enter_openat (STRCMP(\"{base}_yes\", args->filename)) \"%d %s\", STRCMP(\"{base}_y\", args->filename), args->filename"
    );
    let mut t = start_tool(&["trace", &spec]);
    let _ = std::fs::File::open(format!("{base}_no"));
    let _ = std::fs::File::open(format!("{base}_yes_and_more"));
    t.wait_line("the matching open", Duration::from_secs(10), |l| l.contains("_yes_and_more"));
    let out = t.interrupt_and_finish();
    assert!(lines_with(&out, &[&format!("{base}_no")]).is_empty(), "{out}");
    assert_eq!(events_with(&out, 0, &format!("1 {base}_yes_and_more")).len(), 1, "{out}");
}

/// write(2) of `bytes` to /dev/null.
fn write_devnull(bytes: &[u8]) {
    let f = std::fs::OpenOptions::new().write(true).open("/dev/null").unwrap();
    use std::os::fd::AsRawFd;
    let n = unsafe { libc::write(f.as_raw_fd(), bytes.as_ptr() as *const libc::c_void, bytes.len()) };
    assert_eq!(n, bytes.len() as isize);
}

kernel_test!(trace_bin_cmp_compares_bytes);
/// -B: STRCMP's first argument is a list of bytes, compared past a 0 byte
/// too (a text compare stops there).
fn trace_bin_cmp_compares_bytes() {
    let _g = setup();
    let tok = token();
    let mut want = vec![0x6cu8, 0, 0, 0];
    want.extend_from_slice(tok.as_bytes());
    let needle: Vec<String> = want.iter().map(|b| format!("0x{b:02x}")).collect();
    let spec = format!(
        "t:syscalls:sys_enter_write (STRCMP(\"{{{}}}\", args->buf)) \"%d bytes\", args->count",
        needle.join(", ")
    );
    let mut t = start_tool(&["trace", "-B", &spec]);
    // Differs from the list only after the first 0 byte.
    let mut other = vec![0x6cu8, 0, 1, 0];
    other.extend_from_slice(tok.as_bytes());
    write_devnull(&other);
    let mut matching = want.clone();
    matching.push(b'!');
    write_devnull(&matching);
    t.wait_line("the matching write", Duration::from_secs(10), |l| l.ends_with(&format!(" {} bytes", want.len() + 1)));
    let out = t.interrupt_and_finish();
    assert!(events_with(&out, 0, &format!("{} bytes", want.len())).is_empty(), "{out}");
    assert_eq!(events_with(&out, 0, &format!("{} bytes", want.len() + 1)).len(), 1, "{out}");
}

/// A probe on writes of `tok` (12 bytes, printed as the message): at the
/// buffer's start (this test's writes) or where trace's own line puts its
/// message (byte 49, after the PID, TID, COMM and FUNC columns).
fn self_probe(tok: &str) -> String {
    format!("t:syscalls:sys_enter_write (STRCMP(\"{tok}\", args->buf) || STRCMP(\"{tok}\", args->buf + 49)) \"%s\", args->buf")
}

kernel_test!(trace_include_self);
/// trace leaves out its own events unless -S: its own write of an event
/// line is an event of the same probe.
fn trace_include_self() {
    let _g = setup();
    let tok = format!("rtt_{}", token());
    let t = start_tool(&["trace", "-S", "-Z", "12", "-M", "2", &self_probe(&tok)]);
    write_devnull(tok.as_bytes());
    let tracer = t.pid() as i64;
    let out = t.finish();
    let pids: Vec<i64> = lines_with(&out, &["sys_enter_write"]).iter().map(|l| columns(l, 0).0).collect();
    assert_eq!(pids, vec![pid(), tracer], "-S: this write, then trace's own write of its line\n{out}");

    let tok = format!("rtt_{}", token());
    let mut t = start_tool(&["trace", "-Z", "12", "-M", "2", &self_probe(&tok)]);
    write_devnull(tok.as_bytes());
    // trace has written the line, so its own write event is queued before the next one.
    t.wait_line("the first line", Duration::from_secs(10), |l| l.contains("sys_enter_write"));
    write_devnull(tok.as_bytes());
    let out = t.finish();
    let pids: Vec<i64> = lines_with(&out, &["sys_enter_write"]).iter().map(|l| columns(l, 0).0).collect();
    assert_eq!(pids, vec![pid(), pid()], "without -S trace's own writes are left out\n{out}");
}

/// The sizes of the BPF ring buffers process `pid` holds.
fn ring_buffer_sizes(pid: i32) -> Vec<u64> {
    let mut sizes = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fdinfo")).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string());
        // BPF_MAP_TYPE_RINGBUF
        if field("map_type:").as_deref() == Some("27") {
            sizes.extend(field("max_entries:").and_then(|v| v.parse::<u64>().ok()));
        }
    }
    sizes
}

kernel_test!(trace_buffer_pages_and_verbose);
/// -b sizes the event ring in pages of 4 KiB; -v prints the script trace
/// generates (with the ring size) before it runs.
fn trace_buffer_pages_and_verbose() {
    let _g = setup();
    let a = unique_arg();
    let t = start_tool(&["trace", "-v", "-b", "16", &getpgid_probe(&[a])]);
    let tracer = t.pid();
    let sizes = ring_buffer_sizes(tracer);
    let out = t.interrupt_and_finish();
    // The event ring is the largest (the control rings are a fraction of it).
    assert_eq!(sizes.iter().max(), Some(&65536), "no ring of 16 pages: {sizes:?}\n{out}");
    assert!(out.stdout.contains("ring_size(65536);\n"), "{out}");
    // The probe, with the filter that leaves out trace's own process.
    let probe = format!("probe(\"tracepoint:syscalls:sys_enter_getpgid\", \"|e| {{ if e.pid != {tracer} && ");
    assert!(out.stdout.contains(&probe), "{out}");

    let t = start_tool(&["trace", "-b", "32", &getpgid_probe(&[a])]);
    let sizes = ring_buffer_sizes(t.pid());
    let out = t.interrupt_and_finish();
    assert_eq!(sizes.iter().max(), Some(&131072), "no ring of 32 pages: {sizes:?}\n{out}");
    assert!(!out.stdout.contains("probe(\""), "the script printed without -v\n{out}");
}

kernel_test!(trace_option_errors);
/// Options that can't be combined or done are one-line errors.
fn trace_option_errors() {
    let _g = setup();
    let tp = "t:syscalls:sys_enter_getpgid";
    let bytes = "t:syscalls:sys_enter_write (STRCMP(\"{0x6c, 0x80}\", args->buf))";
    let cases: &[(&[&str], &[&str])] = &[
        (&["trace", "-p", "1", "-L", "1", tp], &["trace: error: only one of -p and -L may be specified"]),
        (&["trace", "-A", tp], &["-M/--max-events should be specified with -A/--aggregate"]),
        (&["trace", "-u", tp], &["-u/--unix-timestamp: requires -t"]),
        (&["trace", "-c", "/sys/fs/cgroup", tp], &["-c/--cgroup-path: not supported"]),
        (&["trace", "-s", "/bin/true", tp], &["-s/--sym_file_list: not supported"]),
        (&["trace", "-b", "3", tp], &["-b/--buffer-pages: must be a power of two"]),
        (&["trace", "-Z", "0", tp], &["-Z/--string-size: must be from 1 to 255"]),
        (&["trace", "-B", bytes], &["byte 0x80", "0x00 to 0x7f"]),
        (&["trace", "-B", "t:syscalls:sys_enter_write (STRCMP(\"ab\", args->buf))"], &["takes a list of bytes"]),
        (&["trace", "t:syscalls:sys_enter_write (STRCMP(args->buf, 1))"], &["STRCMP's first argument is a string"]),
    ];
    assert_usage_errors(cases);
}
