//! The options of the snoop tools (opensnoop, execsnoop, tcplife, statsnoop,
//! exitsnoop) on a real kernel: each test makes the opens, execs, TCP
//! sessions on 127.0.0.1, stats and exits itself and reads the tool's
//! output for them, filtered by its own pids or unique names.

use std::ffi::CString;
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use crate::tools::{lines_with, only_line_with, start_tool, tool_until};

/// openat(AT_FDCWD, path, flags, 0644) as a raw system call (the flags
/// exactly as given); the descriptor is closed. Returns the result.
fn openat(path: &str, flags: i32) -> i64 {
    let c = CString::new(path).unwrap();
    let fd = unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, c.as_ptr(), flags, 0o644) };
    if fd >= 0 {
        unsafe { libc::close(fd as i32) };
    }
    fd
}

/// openat2(AT_FDCWD, path, {flags, mode}): the flags in a struct open_how.
fn openat2(path: &str, flags: i32) -> i64 {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let c = CString::new(path).unwrap();
    // openat2 refuses a mode without O_CREAT.
    let mode = if flags & libc::O_CREAT != 0 { 0o644 } else { 0 };
    let how = OpenHow { flags: flags as u64, mode, resolve: 0 };
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd >= 0 {
        unsafe { libc::close(fd as i32) };
    }
    fd
}

/// The path column: what follows the last of the fixed columns.
fn after<'a>(line: &'a str, col: &str) -> &'a str {
    line.rsplit_once(col).map(|(_, p)| p).unwrap_or("")
}

kernel_test!(opensnoop_extended_fields_show_the_flags);
fn opensnoop_extended_fields_show_the_flags() {
    let _g = setup();
    let me = pid().to_string();
    let dir = TempDir::new();
    let file = dir.join(&format!("rtt_{}", token())).display().to_string();
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND;
    let t = start_tool(&["opensnoop", "-e", "-p", &me]);
    let plain = start_tool(&["opensnoop", "-p", &me]);
    // openat2 has its flags in a struct open_how.
    let flags2 = libc::O_RDWR | libc::O_APPEND;
    assert!(openat(&file, flags) >= 0);
    assert!(openat(&file, libc::O_RDONLY) >= 0);
    assert!(openat2(&file, flags2) >= 0);
    let mut t = t;
    t.wait_count("three opens", Duration::from_secs(10), 3, |l| l.ends_with(&file));
    let out = t.interrupt_and_finish();
    assert!(out.stdout.contains("PID    COMM               FD ERR FLAGS    PATH\n"), "{out}");
    let hits = lines_with(&out, &[&file]);
    assert_eq!(hits.len(), 3, "{out}");
    // FD, ERR, then the flags in octal (8 digits) and the path.
    assert!(hits[0].ends_with(&format!("   0 {:08o} {file}", flags)), "{out}");
    assert!(hits[1].ends_with(&format!("   0 {:08o} {file}", libc::O_RDONLY)), "{out}");
    assert!(hits[2].ends_with(&format!("   0 {:08o} {file}", flags2)), "{out}");
    let mut plain = plain;
    plain.wait_count("three opens", Duration::from_secs(10), 3, |l| l.ends_with(&file));
    let out = plain.interrupt_and_finish();
    assert!(out.stdout.contains("PID    COMM               FD ERR PATH\n"), "{out}");
    assert!(lines_with(&out, &[&file]).iter().all(|l| l.ends_with(&format!("   0 {file}"))), "{out}");
}

kernel_test!(opensnoop_flag_filter_keeps_opens_with_any_of_the_flags);
fn opensnoop_flag_filter_keeps_opens_with_any_of_the_flags() {
    let _g = setup();
    let me = pid().to_string();
    let dir = TempDir::new();
    let tok = token();
    let path = |what: &str| dir.join(&format!("rtt_{tok}_{what}")).display().to_string();
    let (ro, wo, rw, ap, end) = (path("ro"), path("wo"), path("rw"), path("ap"), path("end"));
    std::fs::write(&ro, "x").unwrap();
    let mut t = start_tool(&["opensnoop", "-T", "-p", &me, "-f", "O_WRONLY", "-f", "O_RDWR"]);
    let mut append = start_tool(&["opensnoop", "-p", &me, "--flag_filter", "O_APPEND"]);
    assert!(openat(&ro, libc::O_RDONLY) >= 0);
    assert!(openat(&wo, libc::O_WRONLY | libc::O_CREAT) >= 0);
    assert!(openat(&rw, libc::O_RDWR | libc::O_CREAT) >= 0);
    assert!(openat(&ap, libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND) >= 0);
    assert!(openat(&end, libc::O_RDWR | libc::O_CREAT | libc::O_APPEND) >= 0);
    t.wait_line("the last open", Duration::from_secs(10), |l| l.ends_with(&end));
    append.wait_line("the last open", Duration::from_secs(10), |l| l.ends_with(&end));
    let out = t.interrupt_and_finish();
    for want in [&wo, &rw, &ap, &end] {
        assert_eq!(lines_with(&out, &[want.as_str()]).len(), 1, "{want}\n{out}");
    }
    assert!(lines_with(&out, &[&ro]).is_empty(), "a read-only open passed -f O_WRONLY -f O_RDWR\n{out}");
    // -T: seconds since the first event shown (this process's opens only).
    let times: Vec<f64> = out
        .lines()
        .iter()
        .skip_while(|l| !l.starts_with("TIME(s)"))
        .skip(1)
        .map(|l| l.split_whitespace().next().and_then(|w| w.parse().ok()).unwrap_or(-1.0))
        .collect();
    assert!(times.len() >= 4 && times[0] == 0.0 && times.windows(2).all(|w| w[1] >= w[0]), "{out}");
    let out = append.interrupt_and_finish();
    assert_eq!(lines_with(&out, &[&format!("rtt_{tok}_")]).len(), 2, "only the O_APPEND opens\n{out}");
    assert_eq!(lines_with(&out, &[&ap]).len(), 1, "{out}");

    let bad = run(&["opensnoop", "-f", "O_NOSUCH"]);
    assert_eq!(bad.code, Some(2), "{bad}");
    assert!(bad.stderr.contains("opensnoop: error: argument -f/--flag_filter: bad flag: O_NOSUCH"), "{bad}");
}

kernel_test!(opensnoop_full_path_puts_the_current_directory_in_front);
fn opensnoop_full_path_puts_the_current_directory_in_front() {
    let _g = setup();
    let dir = TempDir::new();
    let name = format!("rtt_{}", token());
    let cat = dir.join(&name);
    std::fs::copy("/bin/cat", &cat).unwrap();
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let file = format!("{name}.txt");
    std::fs::write(sub.join(&file), "hello\n").unwrap();
    let abs = sub.join(&file).display().to_string();
    let full = start_tool(&["opensnoop", "-F", "-n", &name]);
    let plain = start_tool(&["opensnoop", "-n", &name]);
    let st = Command::new(&cat).args([&file, &abs]).current_dir(&sub).stdout(Stdio::null()).status().unwrap();
    assert!(st.success());
    let mut full = full;
    full.wait_count("both opens", Duration::from_secs(10), 2, |l| l.ends_with(&file));
    let out = full.interrupt_and_finish();
    let hits = lines_with(&out, &[&file]);
    assert_eq!(hits.len(), 2, "{out}");
    // The relative name is now a path from the root, through the directory
    // it was opened in (from its file system's root, as BCC walks it).
    let p = after(hits[0], "   0 ");
    assert!(
        p.starts_with('/') && p.ends_with(&format!("/{}/sub/{file}", dir.path.file_name().unwrap().to_str().unwrap())),
        "{out}"
    );
    // An absolute path is left as it is.
    assert_eq!(after(hits[1], "   0 "), abs, "{out}");
    let mut plain = plain;
    plain.wait_count("both opens", Duration::from_secs(10), 2, |l| l.ends_with(&file));
    let out = plain.interrupt_and_finish();
    assert_eq!(lines_with(&out, &[&format!("   0 {file}")]).len(), 1, "{out}");
}

kernel_test!(opensnoop_tid_column_and_buffer_pages);
fn opensnoop_tid_column_and_buffer_pages() {
    let _g = setup();
    let dir = TempDir::new();
    let file = dir.join(&format!("rtt_{}", token())).display().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let f = file.clone();
    let th = std::thread::spawn(move || {
        tx.send(tid()).unwrap();
        go_rx.recv().unwrap();
        openat(&f, libc::O_RDONLY);
    });
    let thread = rx.recv().unwrap().to_string();
    let mut t = start_tool(&["opensnoop", "-t", &thread, "-b", "8"]);
    go_tx.send(()).unwrap();
    th.join().unwrap();
    t.wait_line("the thread's open", Duration::from_secs(10), |l| l.ends_with(&file));
    let out = t.interrupt_and_finish();
    assert!(out.stdout.contains("TID    COMM               FD ERR PATH\n"), "{out}");
    // The thread's id, not the process's, in the first column.
    assert!(only_line_with(&out, &[&file]).starts_with(&format!("{thread:<6} ")), "{out}");

    let bad = run(&["opensnoop", "-b", "3"]);
    assert_eq!(bad.code, Some(2), "{bad}");
    assert!(bad.stderr.contains("opensnoop: error: argument -b/--buffer-pages"), "{bad}");
}

kernel_test!(execsnoop_quote_and_max_args);
fn execsnoop_quote_and_max_args() {
    let _g = setup();
    let dir = TempDir::new();
    let name = format!("rtt_{}", token());
    let prog = dir.true_named(&name);
    let p = prog.display().to_string();
    let quoted = start_tool(&["execsnoop", "-q", "-n", &name]);
    let short = start_tool(&["execsnoop", "--max-args", "3", "-n", &name]);
    let st = Command::new(&prog).args(["one", "say \"hi\"", "three", "four"]).status().unwrap();
    assert!(st.success());
    let st = Command::new(&prog).args(["last"]).status().unwrap();
    assert!(st.success());
    let mut quoted = quoted;
    quoted.wait_line("the last exec", Duration::from_secs(10), |l| l.contains("last"));
    let out = quoted.interrupt_and_finish();
    let hit = only_line_with(&out, &["one"]);
    assert!(hit.ends_with(&format!(r#"   0 "{p}" "one" "say \"hi\"" "three" "four""#)), "{out}");
    let mut short = short;
    short.wait_line("the last exec", Duration::from_secs(10), |l| l.contains("last"));
    let out = short.interrupt_and_finish();
    // The file name and two arguments, then "..." for the rest.
    assert!(only_line_with(&out, &["one"]).ends_with(&format!("   0 {p} one say \"hi\" ...")), "{out}");
    assert!(only_line_with(&out, &["last"]).ends_with(&format!("   0 {p} last")), "{out}");

    let bad = run(&["execsnoop", "--max-args", "x"]);
    assert_eq!(bad.code, Some(2), "{bad}");
}

kernel_test!(execsnoop_ppid_filter_and_failed_execs);
fn execsnoop_ppid_filter_and_failed_execs() {
    let _g = setup();
    let me = pid().to_string();
    let dir = TempDir::new();
    let name = format!("rtt_{}", token());
    let prog = dir.true_named(&name);
    let p = prog.display().to_string();
    let missing = dir.join(&format!("{name}_missing")).display().to_string();
    let mut mine = start_tool(&["execsnoop", "-P", &me]);
    let mut fails = start_tool(&["execsnoop", "-x", "-P", &me]);
    // A grandchild (its parent is sh), a failed exec, then a child.
    let st = Command::new("sh").args(["-c", &format!("{p} grandchild; true")]).status().unwrap();
    assert!(st.success());
    assert!(Command::new(&missing).status().is_err());
    let st = Command::new(&prog).arg("child").status().unwrap();
    assert!(st.success());
    for t in [&mut mine, &mut fails] {
        t.wait_line("the child", Duration::from_secs(10), |l| l.ends_with(&format!("{p} child")));
    }
    let out = mine.interrupt_and_finish();
    let hit = only_line_with(&out, &[&format!("{p} child")]);
    assert_eq!(hit.split_whitespace().nth(2), Some(me.as_str()), "{out}");
    // sh (a child) shows, with the command line it was given; not what it ran.
    only_line_with(&out, &["sh -c "]);
    assert!(!out.stdout.lines().any(|l| l.ends_with(&format!("{p} grandchild"))), "-P let a grandchild in\n{out}");
    assert!(lines_with(&out, &[&missing]).is_empty(), "a failed exec without -x\n{out}");
    let out = fails.interrupt_and_finish();
    // -x: failed execs too (ENOENT: -2), besides the ones that worked.
    assert!(only_line_with(&out, &[&missing]).contains(&format!(" {me:<7}  -2 {missing}")), "{out}");
    only_line_with(&out, &[&format!("{p} child")]);
}

kernel_test!(execsnoop_name_line_and_time_columns);
fn execsnoop_name_line_and_time_columns() {
    let _g = setup();
    let dir = TempDir::new();
    let tok = token();
    let name = format!("rtt_{tok}x");
    let prog = dir.true_named(&name);
    let other = dir.true_named(&format!("rtt_{}", token()));
    // -n: part of the command's name; -l: part of its arguments.
    let named = start_tool(&["execsnoop", "-T", "-t", "-U", "-n", &tok]);
    let lined = start_tool(&["execsnoop", "-l", &format!("arg_{tok}")]);
    assert!(Command::new(&other).arg(format!("--arg_{tok}_y")).status().unwrap().success());
    assert!(Command::new(&prog).arg("end").status().unwrap().success());
    assert!(Command::new(&other).arg(format!("arg_{tok}_end")).status().unwrap().success());
    let mut named = named;
    named.wait_line("the named exec", Duration::from_secs(10), |l| l.contains(&name));
    let out = named.interrupt_and_finish();
    assert!(out.stdout.contains("TIME     TIME(s) UID   PCOMM            PID     PPID    RET ARGS\n"), "{out}");
    let hit = only_line_with(&out, &[&format!("rtt_{tok}")]);
    // HH:MM:SS, seconds since the start, the UID (root), then the name.
    let b = hit.as_bytes();
    assert!(hit.len() > 23 && b[2] == b':' && b[5] == b':' && b[8] == b' ', "{out}");
    assert!(hit[9..17].trim().parse::<f64>().is_ok_and(|s| s >= 0.0), "{out}");
    assert!(hit[17..].starts_with(&format!("0     {name}")), "{out}");
    let mut lined = lined;
    lined.wait_line("the last exec", Duration::from_secs(10), |l| l.contains(&format!("arg_{tok}_end")));
    let out = lined.interrupt_and_finish();
    assert_eq!(lines_with(&out, &[&format!("arg_{tok}")]).len(), 2, "{out}");
    assert!(lines_with(&out, &[&name]).is_empty(), "{out}");
}

kernel_test!(tcplife_wide_csv_and_port_lists);
fn tcplife_wide_csv_and_port_lists() {
    let _g = setup();
    let me = pid().to_string();
    // The ports are known only once the listener exists: the tools take
    // them from a listener bound first, then the session uses it.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let s = |a: &[&str]| a.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let tools = [
        s(&["tcplife", "-w", "-L", &port]),
        s(&["tcplife", "-s", "-T", "-t", "-L", &port]),
        s(&["tcplife", "-L", &format!("1,{port}")]),
        s(&["tcplife", "-D", &format!("{port},2")]),
    ];
    let mut ts: Vec<Tracer> =
        tools.iter().map(|a| start_tool(&a.iter().map(|x| x.as_str()).collect::<Vec<_>>())).collect();
    let c = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let cport = c.local_addr().unwrap().port();
    let (a, _) = listener.accept().unwrap();
    drop(c);
    drop(a);
    let ip = "127.0.0.1";
    let waits = [
        format!("{ip:<26} {port:<5} {ip}"),
        format!(",{ip},{port},{ip},{cport},"),
        format!("{ip:<15} {port:<5} {ip:<15} {cport:<5}"),
        format!("{ip:<15} {cport:<5} {ip:<15} {port:<5}"),
    ];
    for (t, w) in ts.iter_mut().zip(&waits) {
        t.wait_line(w, Duration::from_secs(10), |l| l.contains(w.as_str()));
    }
    let mut outs = ts.into_iter().map(|t| t.interrupt_and_finish());
    let (wide, csv, local, remote) =
        (outs.next().unwrap(), outs.next().unwrap(), outs.next().unwrap(), outs.next().unwrap());

    let out = wide;
    let head = "PID   COMM             IP LADDR                      LPORT RADDR                      RPORT  TX_KB  RX_KB MS\n";
    assert!(out.stdout.contains(head), "{out}");
    let hit = only_line_with(&out, &[&waits[0]]);
    assert!(hit.starts_with(&format!("{me:<5} ")), "{out}");
    let want = format!("4  {ip:<26} {port:<5} {ip:<26} {cport:<5} {:>6} {:>6} ", 0, 0);
    assert!(hit.contains(&want), "{out}");

    let out = csv;
    assert!(out.stdout.contains("TIME,TIME(s),PID,COMM,IP,LADDR,LPORT,RADDR,RPORT,TX_KB,RX_KB,MS\n"), "{out}");
    let hit = only_line_with(&out, &[&waits[1]]);
    let f: Vec<&str> = hit.split(',').collect();
    assert_eq!(f.len(), 12, "{out}");
    assert!(f[0].len() == 8 && f[0].as_bytes()[2] == b':', "{out}");
    assert!(f[1].parse::<f64>().is_ok(), "{out}");
    assert_eq!((f[2], f[4], f[9], f[10]), (me.as_str(), "4", "0", "0"), "{out}");
    assert!(f[11].parse::<f64>().is_ok(), "{out}");

    // -L 1,PORT: the server's end only; -D PORT,2: the client's only.
    let out = local;
    assert!(
        out.stdout.contains("PID   COMM       LADDR           LPORT RADDR           RPORT TX_KB RX_KB MS\n"),
        "{out}"
    );
    only_line_with(&out, &[&waits[2]]);
    assert!(lines_with(&out, &[&waits[3]]).is_empty(), "{out}");
    let out = remote;
    only_line_with(&out, &[&waits[3]]);
    assert!(lines_with(&out, &[&waits[2]]).is_empty(), "{out}");

    let bad = run(&["tcplife", "-L", "80,x"]);
    assert_eq!(bad.code, Some(2), "{bad}");
    assert!(bad.stderr.contains("tcplife: error: argument -L/--localport"), "{bad}");
}

kernel_test!(statsnoop_timestamp_is_t);
fn statsnoop_timestamp_is_t() {
    let _g = setup();
    let me = pid().to_string();
    let missing = format!("/tmp/rtt_{}_missing", token());
    let (first, last) = (format!("{missing}_a"), format!("{missing}_z"));
    let out = tool_until(
        &["statsnoop", "-t", "-p", &me],
        || {
            let _ = std::fs::metadata(&first);
            let _ = std::fs::metadata(&last);
        },
        &last,
    );
    assert!(out.stdout.contains("TIME(s)       PID     COMM               FD ERR PATH\n"), "{out}");
    let rows: Vec<&str> = out.lines().into_iter().skip_while(|l| !l.starts_with("TIME(s)")).skip(1).collect();
    // Seconds since the first stat shown, which is this process's first.
    assert!(rows.first().is_some_and(|l| l.starts_with("0.000000000   ")), "{out}");
    let hit = lines_with(&out, &[&format!("  -1   2 {first}")]);
    assert_eq!(hit.len(), 1, "{out}");
    assert!(hit[0][..14].trim().parse::<f64>().is_ok() && hit[0][14..].starts_with(&format!("{me:<7} ")), "{out}");
    let bad = run(&["statsnoop", "-T"]);
    assert_eq!(bad.code, Some(2), "{bad}");
    assert!(bad.stderr.contains("unrecognized option '-T'"), "{bad}");
}

/// `HH:MM:SS.mmm` → seconds in the day.
fn clock_secs(s: &str) -> Option<f64> {
    let (h, rest) = s.split_once(':')?;
    let (m, sec) = rest.split_once(':')?;
    if sec.len() != 6 || sec.as_bytes()[2] != b'.' {
        return None;
    }
    Some(h.parse::<f64>().ok()? * 3600.0 + m.parse::<f64>().ok()? * 60.0 + sec.parse::<f64>().ok()?)
}

kernel_test!(exitsnoop_utc_local_time_and_label);
fn exitsnoop_utc_local_time_and_label() {
    let _g = setup();
    // A time zone 5:30 ahead of UTC, so local time and UTC differ here.
    let tz = [("TZ", "RTT-5:30")];
    let mut local = Tracer::start_env(&["exitsnoop", "-t", "--label", "rtt"], &tz);
    local.wait_attached();
    let mut utc = Tracer::start_env(&["exitsnoop", "--utc", "--label=", "-x"], &tz);
    utc.wait_attached();
    let ok = Command::new("sh").args(["-c", "exit 0"]).spawn().unwrap();
    let okpid = ok.id().to_string();
    ok.wait_with_output().unwrap();
    let sh = Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap();
    let shpid = sh.id().to_string();
    sh.wait_with_output().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64() % 86400.0;
    let key = format!(" {shpid} ");
    for t in [&mut local, &mut utc] {
        t.wait_line("the exit", Duration::from_secs(10), |l| l.contains(&key));
    }
    let out_local = local.interrupt_and_finish();
    let out_utc = utc.interrupt_and_finish();

    assert!(
        out_local.stdout.contains("TIME-RTT     LABEL PCOMM            PID     PPID    TID     AGE(s)  EXIT_CODE \n"),
        "{out_local}"
    );
    assert!(
        out_utc.stdout.contains("TIME-UTC     LABEL PCOMM            PID     PPID    TID     AGE(s)  EXIT_CODE \n"),
        "{out_utc}"
    );
    let l = only_line_with(&out_local, &[&key]);
    let u = only_line_with(&out_utc, &[&key]);
    assert!(l[12..].starts_with(" rtt   sh ") && l.ends_with(" code 3"), "{out_local}");
    // --label= (empty) labels with "exit".
    assert!(u[12..].starts_with(" exit  sh ") && u.ends_with(" code 3"), "{out_utc}");
    let (lt, ut) = (clock_secs(&l[..12]), clock_secs(&u[..12]));
    let (lt, ut) = (lt.unwrap_or_else(|| panic!("{out_local}")), ut.unwrap_or_else(|| panic!("{out_utc}")));
    let near = |a: f64, b: f64| ((a - b).rem_euclid(86400.0)).min((b - a).rem_euclid(86400.0)) < 60.0;
    assert!(near(ut, now), "UTC {ut} vs the clock {now}\n{out_utc}");
    assert!(near(lt, now + 5.5 * 3600.0), "local {lt} vs the clock {now}\n{out_local}");
    // -x: exit(0) left out; without it, shown as 0.
    assert!(lines_with(&out_utc, &[&format!(" {okpid} ")]).is_empty(), "{out_utc}");
    assert!(only_line_with(&out_local, &[&format!(" {okpid} ")]).ends_with(" 0"), "{out_local}");
}

kernel_test!(exitsnoop_per_thread_and_pid);
fn exitsnoop_per_thread_and_pid() {
    let _g = setup();
    let me = pid().to_string();
    let mut threads = start_tool(&["exitsnoop", "--per-thread", "-p", &me]);
    let mut procs = start_tool(&["exitsnoop"]);
    let th = std::thread::spawn(tid);
    let thread = th.join().unwrap().to_string();
    let child = Command::new("sh").args(["-c", "exit 0"]).spawn().unwrap();
    let cpid = child.id().to_string();
    child.wait_with_output().unwrap();
    // --per-thread: the thread's exit, in this process (-p ends the tool after it).
    threads.wait_line("the thread's exit", Duration::from_secs(10), |l| l.contains(&format!(" {thread} ")));
    let out = threads.finish_within(Duration::from_secs(10));
    assert_eq!(out.code, Some(0), "{out}");
    // PID, PPID, TID, AGE(s), EXIT_CODE, from the end (a comm may hold spaces).
    let w: Vec<&str> = only_line_with(&out, &[&format!(" {thread} ")]).split_whitespace().rev().take(5).collect();
    assert_eq!((w[4], w[2], w[0]), (me.as_str(), thread.as_str(), "0"), "{out}");
    // Without it, only processes: the child, not the thread.
    procs.wait_line("the child's exit", Duration::from_secs(10), |l| l.contains(&format!(" {cpid} ")));
    let out = procs.interrupt_and_finish();
    assert!(lines_with(&out, &[&format!(" {me} "), &format!(" {thread} ")]).is_empty(), "{out}");

    // -p: the process's exit, then the tool ends by itself.
    let mut cat = Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    let cat_pid = cat.id().to_string();
    let t = start_tool(&["exitsnoop", "-p", &cat_pid]);
    drop(cat.stdin.take());
    cat.wait().unwrap();
    let out = t.finish_within(Duration::from_secs(10));
    assert_eq!(out.code, Some(0), "{out}");
    let hit = only_line_with(&out, &[&format!(" {cat_pid} ")]);
    assert!(hit.starts_with("cat ") && hit.ends_with(" 0"), "{out}");
}

kernel_test!(execsnoop_name_and_line_are_regular_expressions);
/// `-l` and `-n` are regular expressions searched in the arguments and the
/// command's name, as in BCC; a bad one is an error before attaching.
fn execsnoop_name_and_line_are_regular_expressions() {
    let _g = setup();
    let dir = TempDir::new();
    let tok = token();
    let prog = dir.true_named(&format!("rtt_{}", token()));
    let mut t = start_tool(&["execsnoop", "-l", &format!("--arg_{tok}_(y|z)$"), "-n", "^rtt_[0-9a-z]+$"]);
    for arg in
        [format!("--arg_{tok}_y"), format!("--arg_{tok}_q"), format!("x--arg_{tok}_z"), format!("--arg_{tok}_yy")]
    {
        assert!(Command::new(&prog).arg(arg).status().unwrap().success());
    }
    t.wait_line("the last match", Duration::from_secs(10), |l| l.contains(&format!("x--arg_{tok}_z")));
    let out = t.interrupt_and_finish();
    let hits = lines_with(&out, &[&format!("arg_{tok}_")]);
    assert_eq!(hits.len(), 2, "{out}");
    assert!(hits[0].ends_with(&format!(" --arg_{tok}_y")) && hits[1].ends_with(&format!(" x--arg_{tok}_z")), "{out}");
    let bad = run(&["execsnoop", "-n", "ba(d"]);
    assert_eq!(bad.code, Some(1), "{bad}");
    assert!(bad.stderr.contains("\"ba(d\" is not a regular expression") && !bad.has_attach_line(), "{bad}");
}
