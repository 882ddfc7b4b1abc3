//! `lsm:` probes and `deny()` on a kernel with BPF LSM (the stock-kernel
//! VM: Debian's 6.1 lists `bpf` among its LSMs), the audit line of every
//! action, `--monitor`, and the error where the kernel refuses BPF LSM;
//! `override()` in `fmod_ret:security_*` probes where trampolines load.

use crate::common::*;

/// Whether this kernel runs BPF LSM programs (`rtrace --info` says).
fn bpf_lsm() -> bool {
    info_says_yes("lsm")
}

fn no_bpf_lsm() -> bool {
    !bpf_lsm()
}

/// A program that opens each FILE COUNT times (`opener FILE COUNT ...`)
/// and prints, per file, how many opens worked and how many failed with EPERM.
const OPENER: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    for (int a = 1; a + 1 < argc; a += 2) {
        int n = atoi(argv[a + 1]), ok = 0, eperm = 0, other = 0;
        for (int i = 0; i < n; i++) {
            int fd = open(argv[a], O_RDONLY);
            if (fd >= 0) {
                ok++;
                close(fd);
            } else if (errno == EPERM) {
                eperm++;
            } else {
                other++;
            }
        }
        printf("%s ok=%d eperm=%d other=%d\n", argv[a], ok, eperm, other);
    }
    return 0;
}
"#;

/// The opener built in `dir`, and a forbidden and an allowed file there
/// (the forbidden one's name is unique to this run).
fn opener_and_files(dir: &TempDir) -> (String, String, String, String) {
    let src = dir.write("opener.c", OPENER);
    let bin = dir.join("opener");
    let built = gcc().args(["-O1", "-o"]).arg(&bin).arg(&src).status().expect("gcc");
    assert!(built.success(), "gcc failed");
    let name = format!("rtrace-forbidden-{}", token());
    let forbidden = dir.write(&name, "x");
    let allowed = dir.write("allowed", "x");
    let path = |p: std::path::PathBuf| p.display().to_string();
    (path(bin), path(forbidden), path(allowed), name)
}

/// What the opener printed for `file`: (worked, failed with EPERM, failed otherwise).
fn opens(out: &Outcome, file: &str) -> (u64, u64, u64) {
    let line = out
        .lines()
        .into_iter()
        .find_map(|l| l.strip_prefix(&format!("{file} ")).map(str::to_string))
        .unwrap_or_else(|| panic!("the opener printed nothing for {file}\n{out}"));
    let field = |name: &str| -> u64 {
        let v = line.split_whitespace().find_map(|w| w.strip_prefix(&format!("{name}="))).unwrap_or("");
        v.parse().unwrap_or_else(|_| panic!("no {name}= in {line:?}"))
    };
    (field("ok"), field("eperm"), field("other"))
}

/// The audit lines on stderr for `action` with `result`, and the control
/// messages counted as lost (an audit that did not fit is counted there).
fn audits(out: &Outcome, action: &str, result: &str) -> (u64, u64) {
    probe_audits(out, "lsm:file_open", action, result)
}

/// [`audits`] of the action in probe `probe`.
fn probe_audits(out: &Outcome, probe: &str, action: &str, result: &str) -> (u64, u64) {
    let lines = out
        .stderr
        .lines()
        .filter(|l| {
            l.starts_with("rtrace: action: ")
                && l.contains(&format!(" {probe}: {action} on pid "))
                && l.contains("(opener)")
                && l.ends_with(&format!(": {result}"))
        })
        .count() as u64;
    let lost = kernel_control_losses(&out.stderr).iter().map(|(n, _)| n).sum::<u64>() + dropped_controls(&out.stderr);
    (lines, lost)
}

/// A script that runs `then` when a file named `name` is opened.
fn on_open_of(name: &str, then: &str) -> String {
    format!(
        r#"probe("lsm:file_open", |e| {{
    if str(e.args.file.f_path.dentry.d_name.name) == "{name}" {{ {then} }}
}});"#
    )
}

fn deny_script(name: &str) -> String {
    on_open_of(name, "deny();")
}

kernel_test!(
    deny_fails_every_open_of_one_file_and_audits_each,
    needs: Program("gcc"), Check("BPF LSM (bpf among the kernel's active LSMs)", bpf_lsm)
);
fn deny_fails_every_open_of_one_file_and_audits_each() {
    let _g = setup();
    let dir = TempDir::new();
    let (opener, forbidden, allowed, name) = opener_and_files(&dir);
    let cmd = format!("{opener} {forbidden} 10000 {allowed} 1000");
    let out = run(&["--unsafe", "-c", &cmd, "-e", &deny_script(&name)]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(opens(&out, &forbidden), (0, 10_000, 0), "every open of the forbidden file fails with EPERM\n{out}");
    assert_eq!(opens(&out, &allowed), (1000, 0, 0), "every open of the allowed file works\n{out}");
    let (lines, lost) = audits(&out, "deny(EPERM)", "denied");
    assert!(lines > 0, "denials are audited\n{out}");
    assert_eq!(lines + lost, 10_000, "each denial is audited or counted as lost\n{out}");

    // deny(ERRNO) fails the operation with that error.
    let src = on_open_of(&name, r#"deny("EACCES"); print("not reached");"#);
    let out = run(&["--unsafe", "-c", &format!("{opener} {forbidden} 3"), "-e", &src]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(opens(&out, &forbidden), (0, 0, 3), "EACCES is not EPERM\n{out}");
    assert!(!out.stdout.contains("not reached"), "deny() leaves the probe\n{out}");
    assert_eq!(audits(&out, "deny(EACCES)", "denied").0, 3, "{out}");

    // Without --unsafe nothing attaches and the command never runs.
    let out = run(&["-c", &format!("{opener} {forbidden} 3"), "-e", &deny_script(&name)]);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(out.stderr.contains("deny() makes the kernel refuse an operation and needs --unsafe"), "{out}");
    assert!(!out.stdout.contains("Attaching") && !out.stdout.contains(&forbidden), "{out}");
}

kernel_test!(
    monitor_audits_each_denial_and_denies_nothing,
    needs: Program("gcc"), Check("BPF LSM (bpf among the kernel's active LSMs)", bpf_lsm)
);
fn monitor_audits_each_denial_and_denies_nothing() {
    let _g = setup();
    let dir = TempDir::new();
    let (opener, forbidden, _, name) = opener_and_files(&dir);
    let out = run(&["--monitor", "-c", &format!("{opener} {forbidden} 100"), "-e", &deny_script(&name)]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(opens(&out, &forbidden), (100, 0, 0), "--monitor denies nothing\n{out}");
    let (lines, lost) = audits(&out, "deny(EPERM)", "not done (--monitor)");
    assert_eq!(lines + lost, 100, "each denial it would have made is audited\n{out}");

    // With -f json each audit is an "action" record.
    let src = deny_script(&name);
    let col = src.lines().nth(1).and_then(|l| l.find("deny(")).unwrap() as u64 + 1;
    let out = run(&["--monitor", "-f", "json", "-c", &format!("{opener} {forbidden} 2"), "-e", &src]);
    assert_eq!(out.code, Some(0), "{out}");
    let records: Vec<serde_json::Value> = out
        .lines()
        .into_iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "action")
        .collect();
    assert_eq!(records.len(), 2, "{out}");
    let d = &records[0]["data"];
    assert_eq!((d["probe"].as_str(), d["action"].as_str()), (Some("lsm:file_open"), Some("deny(EPERM)")), "{out}");
    assert_eq!((d["comm"].as_str(), d["result"].as_str()), (Some("opener"), Some("not done (--monitor)")), "{out}");
    assert_eq!((d["line"].as_u64(), d["col"].as_u64()), (Some(2), Some(col)), "{out}");
    assert!(d["pid"].as_u64().is_some_and(|p| p > 0), "{out}");
}

kernel_test!(
    lsm_probes_where_bpf_lsm_is_refused_say_why,
    needs: Check("a kernel that refuses BPF LSM programs (it tests the error there)", no_bpf_lsm)
);
fn lsm_probes_where_bpf_lsm_is_refused_say_why() {
    let _g = setup();
    let out = run(&["--unsafe", "-c", "true", "-e", r#"probe("lsm:file_open", |e| { deny(); });"#]);
    assert_eq!(out.code, Some(1), "{out}");
    let err = out.stderr.lines().next().unwrap_or("");
    assert!(err.starts_with("-e:1:1: error: cannot attach lsm:file_open: "), "{out}");
    assert!(err.contains("BPF LSM") && err.contains("lsm="), "says how to enable it\n{out}");
    assert!(!out.stdout.contains("Attaching"), "{out}");
}

kernel_test!(
    override_fails_every_open_of_one_file_from_fmod_ret,
    needs: Program("gcc"), Fentry
);
/// `fmod_ret:security_file_open` with `override(-13)` on one file name: its
/// 10,000 opens fail with EACCES and each is audited (or counted lost); the
/// allowed file opens every time. A function the kernel doesn't let BPF
/// modify, and override() in another probe type, are errors before attaching.
fn override_fails_every_open_of_one_file_from_fmod_ret() {
    let _g = setup();
    let dir = TempDir::new();
    let (opener, forbidden, allowed, name) = opener_and_files(&dir);
    let src = format!(
        r#"probe("fmod_ret:security_file_open", |e| {{
    if str(e.args.file.f_path.dentry.d_name.name) == "{name}" {{ override(-13); }}
}});"#
    );
    let cmd = format!("{opener} {forbidden} 10000 {allowed} 1000");
    let out = run(&["--unsafe", "-c", &cmd, "-e", &src]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(opens(&out, &forbidden), (0, 0, 10_000), "every open of the forbidden file fails (EACCES)\n{out}");
    assert_eq!(opens(&out, &allowed), (1000, 0, 0), "every open of the allowed file works\n{out}");
    let (lines, lost) = probe_audits(&out, "fmod_ret:security_file_open", "override(-13)", "overridden");
    assert!(lines > 0, "overrides are audited\n{out}");
    assert_eq!(lines + lost, 10_000, "each override is audited or counted as lost\n{out}");

    // --monitor: audited, the function runs.
    let out = run(&["--monitor", "-c", &format!("{opener} {forbidden} 5"), "-e", &src]);
    assert_eq!(opens(&out, &forbidden), (5, 0, 0), "{out}");
    let (lines, lost) = probe_audits(&out, "fmod_ret:security_file_open", "override(-13)", "not done (--monitor)");
    assert_eq!(lines + lost, 5, "{out}");

    // Without --unsafe nothing attaches and the command never runs.
    let out = run(&["-c", &format!("{opener} {forbidden} 3"), "-e", &src]);
    let line = assert_clean_error(&out);
    assert!(line.contains("override() changes what a kernel function returns and needs --unsafe"), "{line}");
    assert!(!out.stdout.contains(&forbidden), "{out}");

    // Functions BPF may not modify, and override() outside fmod_ret.
    let line = assert_clean_error(&run(&["--unsafe", "-e", r#"probe("fmod_ret:vfs_read", |e| { override(-5); });"#]));
    assert!(line.contains("only of security_* functions and of functions marked for error injection"), "{line}");
    let line = assert_clean_error(&run(&["--unsafe", "-e", r#"probe("kprobe:vfs_read", |e| { override(-5); });"#]));
    assert!(line.contains("CONFIG_BPF_KPROBE_OVERRIDE") && line.contains("fmod_ret:FN"), "{line}");
}

kernel_test!(
    deny_writes_under_a_directory_and_lets_reads_through,
    needs: Check("BPF LSM (bpf among the kernel's active LSMs)", bpf_lsm)
);
/// docs/automation.md's protect.rhai: opening for writing a file directly
/// under the protected directory fails with EPERM; reading it works, and
/// writing elsewhere works.
fn deny_writes_under_a_directory_and_lets_reads_through() {
    let _g = setup();
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/automation.md")).unwrap();
    let start = doc.find("// protect.rhai").expect("protect.rhai in docs/automation.md");
    let script = &doc[start..start + doc[start..].find("```").unwrap()];
    let dir = TempDir::new();
    let name = format!("protected-{}", token());
    let protected = dir.join(&name);
    std::fs::create_dir(&protected).unwrap();
    let file = protected.join("config");
    std::fs::write(&file, "setting=1\n").unwrap();
    let other = dir.join("other");
    let f = file.display();
    let cmd = format!(
        "sh -c 'exec 2>&1; cat {f}; echo setting=2 > {f} || echo write refused; echo x > {} && echo other written'",
        other.display()
    );
    let path = dir.write("protect.rhai", script);
    let out = run(&["--unsafe", "-c", &cmd, path.to_str().unwrap(), &name]);
    assert_eq!(out.code, Some(0), "{out}");
    let lines = out.lines();
    assert!(lines.contains(&"setting=1"), "reads work\n{out}");
    assert!(lines.contains(&"write refused"), "the write is refused\n{out}");
    assert!(out.stdout.contains("Operation not permitted"), "with EPERM\n{out}");
    assert!(lines.contains(&"other written"), "writes elsewhere work\n{out}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "setting=1\n", "the file is unchanged\n{out}");
    let denied = |l: &&str| l.contains(" lsm:file_open: deny(EPERM) on pid ") && l.ends_with("(sh): denied");
    assert_eq!(out.stderr.lines().filter(denied).count(), 1, "the denial is audited\n{out}");
}
