//! User probes that name no binary, as bpftrace reads them under `-p PID`
//! (`uprobe:FN`, `uprobe:*:FN`, `usdt::PROV:NAME`, `usdt:*:NAME`, listing
//! with `-l 'usdt:*' -p PID`), indirect functions (`uprobe:libc:strlen`
//! attaches to the implementation this CPU runs), and kernel types listed
//! from BTF (`-l 'struct task_*'`, `-lv 'struct task_struct'`).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::common::*;

/// A long-running target: for each number N it reads on stdin, it calls
/// `rup_ping(i)` N times (a function of its own), fires the USDT probe
/// `rup:tick(i)` N times (its note written by hand, as <sys/sdt.h> writes
/// it) and calls `getpid()` N times, then prints `done N`.
const LOOPER: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noinline, noclone)) int rup_ping(int i) {
    __asm__ volatile("");
    return i + 1;
}

__attribute__((noinline, noclone)) void rup_fire(long i) {
    __asm__ __volatile__(
        "990: nop\n"
        ".pushsection .note.stapsdt,\"?\",\"note\"\n"
        ".balign 4\n"
        ".4byte 992f-991f, 994f-993f, 3\n"
        "991: .asciz \"stapsdt\"\n"
        "992: .balign 4\n"
        "993: .8byte 990b\n"
        ".8byte _.stapsdt.base\n"
        ".8byte 0\n"
        ".asciz \"rup\"\n"
        ".asciz \"tick\"\n"
        ".asciz \"-8@%0\"\n"
        "994: .balign 4\n"
        ".popsection\n"
        ".ifndef _.stapsdt.base\n"
        ".pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat\n"
        ".weak _.stapsdt.base\n"
        ".hidden _.stapsdt.base\n"
        "_.stapsdt.base: .space 1\n"
        ".size _.stapsdt.base, 1\n"
        ".popsection\n"
        ".endif\n"
        :
        : "r"(i));
}

int main(void) {
    char line[32];
    long total = 0;
    setvbuf(stdout, NULL, _IONBF, 0);
    printf("ready\n");
    while (fgets(line, sizeof line, stdin)) {
        int n = atoi(line);
        for (int i = 0; i < n; i++) {
            total += rup_ping(i);
            rup_fire(i);
            total += getpid() & 1;
        }
        printf("done %d\n", n);
    }
    return total < 0;
}
"#;

/// The looper, built under a unique name and running, waiting for input.
struct Looper {
    _dir: TempDir,
    path: PathBuf,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Looper {
    fn start() -> Looper {
        let dir = TempDir::new();
        let src = dir.write("looper.c", LOOPER);
        let path = dir.join(&format!("rup_{}", token()));
        let built = gcc().args(["-O2", "-o"]).arg(&path).arg(&src).output().expect("cannot run gcc");
        assert!(built.status.success(), "gcc failed:\n{}", String::from_utf8_lossy(&built.stderr));
        let mut child =
            Command::new(&path).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("cannot start the looper");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        Looper { _dir: dir, path, child, stdin, stdout }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    fn p(&self) -> &str {
        self.path.to_str().unwrap()
    }

    /// One round of `n` calls of each kind.
    fn round(&mut self, n: usize) {
        writeln!(self.stdin, "{n}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), format!("done {n}"));
    }

    /// The path of the libc this process has mapped.
    fn libc(&self) -> String {
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", self.pid())).unwrap();
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
            .expect("the looper maps libc")
            .to_string()
    }
}

impl Drop for Looper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run `src` with `-p` on the looper through `n` rounds of 1..=n calls.
fn traced_rounds(src: &str, l: &mut Looper, rounds: usize) -> (usize, Outcome) {
    let pid = l.pid();
    let mut tr = Tracer::start(&["-p", &pid, "-e", src]);
    let attached = tr.wait_attached();
    for n in 1..=rounds {
        l.round(n);
    }
    let out = tr.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    (attached, out)
}

kernel_test!(pid_supplies_the_binary_of_uprobes_and_usdt, needs: Program("gcc"));
/// Under `-p PID`: `uprobe:FN` is FN in the process's program, `uprobe:*:FN`
/// FN in every file it has mapped, `uprobe:libc:FN` the libc it has mapped,
/// and `usdt::PROV:NAME`, `usdt:*:NAME`, `usdt:NAME` its USDT probes in any
/// of its files. 1 + 2 + 3 = 6 calls of each.
fn pid_supplies_the_binary_of_uprobes_and_usdt() {
    let _g = setup();
    let mut l = Looper::start();
    let src = r#"
let c = map();
let s = map();
probe("uprobe:rup_ping", |e| { c[["exe", e.probe]] = count(); });
probe("uprobe:*:rup_ping", |e| { c[["all", e.probe]] = count(); });
probe("uprobe:libc:getpid", |e| { c[["libc", e.probe]] = count(); });
probe("usdt::rup:tick", |e| { c[["usdt", e.probe]] = count(); });
probe("usdt:*:tick", |e| { s[e.probe] = sum(e.arg0 + 1); });
probe("U:tick", |e| { c[["bare", e.probe]] = count(); });
"#;
    let (attached, out) = traced_rounds(src, &mut l, 3);
    assert_eq!(attached, 6, "{out}");
    let (bin, libc) = (l.p().to_string(), l.libc());
    let mut want = vec![
        format!("@c[all, uprobe:{bin}:rup_ping]: 6"),
        format!("@c[bare, usdt:{bin}:rup:tick]: 6"),
        format!("@c[exe, uprobe:{bin}:rup_ping]: 6"),
        format!("@c[libc, uprobe:{libc}:getpid]: 6"),
        format!("@c[usdt, usdt:{bin}:rup:tick]: 6"),
    ];
    want.sort();
    let mut got = out.map_lines("c");
    got.sort();
    assert_eq!(got, want, "{out}");
    // e.arg0 + 1 over rounds of 1, 2, 3 calls: 1 + (1 + 2) + (1 + 2 + 3).
    assert_eq!(out.map_lines("s"), vec![format!("@s[usdt:{bin}:rup:tick]: 10")], "{out}");
}

kernel_test!(pid_forms_without_pid_say_to_add_it, needs: Program("gcc"));
/// Without `-p` the forms that name no binary are one-line errors that say
/// to add `-p PID`; with `-p`, a function or probe no mapped file has is one
/// too.
fn pid_forms_without_pid_say_to_add_it() {
    let _g = setup();
    for spec in ["uprobe:rup_ping", "uprobe:*:rup_ping", "ur::rup_ping", "usdt::rup:tick", "usdt:*:tick", "usdt:tick"] {
        let src = format!(r#"probe("{spec}", |e| {{ }});"#);
        let line = assert_clean_error(&run(&["-e", &src]));
        assert!(line.contains("-p PID"), "{spec}: {line}");
    }
    for item in ["usdt:*", "uprobe:*:*"] {
        let line = assert_clean_error(&run(&["-l", item]));
        assert!(line.contains("add -p PID"), "{item}: {line}");
    }
    let l = Looper::start();
    let pid = l.pid();
    for (spec, want) in [
        ("uprobe:*:no_such_fn_rup", "none of the"),
        ("uprobe:no_such_fn_rup", "no function 'no_such_fn_rup'"),
        ("usdt:*:rup:tock", "none of the"),
    ] {
        let src = format!(r#"probe("{spec}", |e| {{ }});"#);
        let line = assert_clean_error(&run(&["-p", &pid, "-e", &src]));
        assert!(line.contains(want), "{spec}: expected {want:?} in {line}");
    }
}

kernel_test!(list_with_pid_covers_every_mapped_file, needs: Program("gcc"));
/// `-l 'usdt:*' -p PID` and `-l 'uprobe:*' -p PID` list the probes of the
/// process's program and of the libraries it has mapped.
fn list_with_pid_covers_every_mapped_file() {
    let _g = setup();
    let l = Looper::start();
    let (pid, bin, libc) = (l.pid(), l.p().to_string(), l.libc());
    let usdt = run(&["-l", "usdt:*", "-p", &pid]);
    assert_eq!(usdt.code, Some(0), "{usdt}");
    assert!(usdt.lines().contains(&format!("usdt:{bin}:rup:tick").as_str()), "{usdt}");
    let uprobes = run(&["-l", "uprobe:*", "-p", &pid]);
    assert_eq!(uprobes.code, Some(0), "{uprobes}");
    let lines = uprobes.lines();
    for want in [format!("uprobe:{bin}:rup_ping"), format!("uprobe:{libc}:getpid"), format!("uprobe:{libc}:strlen")] {
        assert!(lines.contains(&want.as_str()), "{want} missing\n{uprobes}");
    }
    let some = run(&["-l", "uprobe:*:rup_*", "-p", &pid]);
    assert_eq!(some.lines(), vec![format!("uprobe:{bin}:rup_fire"), format!("uprobe:{bin}:rup_ping")], "{some}");
    let verbose = run(&["-lv", "usdt:*:rup:*", "-p", &pid]);
    let lines = verbose.lines();
    assert_eq!(lines.len(), 2, "{verbose}");
    assert_eq!(lines[0], format!("usdt:{bin}:rup:tick"), "{verbose}");
    assert!(lines[1].starts_with("    arg0: -8@%"), "{verbose}");
}

kernel_test!(uprobe_on_an_indirect_function_counts_each_call);
/// `strlen` is an indirect function in glibc: the probe goes on the
/// implementation chosen for this CPU, so each call of a child counts once.
fn uprobe_on_an_indirect_function_counts_each_call() {
    let _g = setup();
    let listed = run(&["-l", "uprobe:libc:strlen"]);
    if !listed.stdout.contains("libc.so") {
        inconclusive("this libc has no strlen symbol");
        return;
    }
    let src = r#"
let c = map();
let r = map();
probe("uprobe:libc:strlen", |e| { c[[e.pid, e.func]] = count(); });
probe("uretprobe:libc:strlen", |e| { r[e.pid] = sum(e.retval); });
"#;
    let mut tr = Tracer::start(&["-e", src]);
    assert_eq!(tr.wait_attached(), 2);
    let text = c"twelve chars";
    let child = fork_and_wait(|| {
        for _ in 0..9 {
            unsafe { std::hint::black_box(libc::strlen(std::hint::black_box(text.as_ptr()))) };
        }
    });
    let out = tr.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let mine: Vec<String> =
        out.map_lines("c").into_iter().filter(|l| l.starts_with(&format!("@c[{child}, "))).collect();
    assert_eq!(mine, vec![format!("@c[{child}, strlen]: 9")], "{out}");
    let returned: Vec<String> =
        out.map_lines("r").into_iter().filter(|l| l.starts_with(&format!("@r[{child}]"))).collect();
    assert_eq!(returned, vec![format!("@r[{child}]: 108")], "9 calls of 12 characters each\n{out}");
}

kernel_test!(struct_names_and_definitions_from_btf, without_root);
/// `-l 'struct task_*'` lists struct names; `-lv 'struct task_struct'`
/// prints the definition, members one per line, as bpftrace does (compared
/// with bpftrace itself where it is installed).
fn struct_names_and_definitions_from_btf() {
    let _g = setup();
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        inconclusive("this kernel has no BTF");
        return;
    }
    let names = run(&["-l", "struct task_*"]);
    assert_eq!(names.code, Some(0), "{names}");
    let lines = names.lines();
    assert!(lines.contains(&"struct task_struct"), "{names}");
    assert!(lines.iter().all(|l| l.starts_with("struct task_")), "{names}");
    assert!(lines.windows(2).all(|w| w[0] < w[1]), "sorted, once each\n{names}");

    let def = run(&["-lv", "struct task_struct"]);
    assert_eq!(def.code, Some(0), "{def}");
    let lines = def.lines();
    assert_eq!(lines.first(), Some(&"struct task_struct {"), "{def}");
    for member in ["\tpid_t pid;", "\tpid_t tgid;", "\tstruct task_struct *real_parent;"] {
        assert!(lines.contains(&member), "{member:?} missing\n{def}");
    }
    assert!(def.stdout.ends_with("\n};\n\n"), "{def}");
    let skb = run(&["-lv", "struct sk_buff"]);
    assert!(skb.stdout.contains("\n\tunion {\n\t\tstruct {\n"), "nested anonymous members, indented\n{skb}");

    if on_path("bpftrace") {
        let theirs = Command::new("bpftrace").args(["-lv", "struct task_struct"]).output().unwrap();
        if theirs.status.success() && !theirs.stdout.is_empty() {
            assert_eq!(def.stdout, String::from_utf8_lossy(&theirs.stdout), "bpftrace prints it the same");
        }
    }
}
