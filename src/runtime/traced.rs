//! The traced process of `-p PID` or `-c CMD`. A `-c` command is started
//! before anything is attached but held (blocked on a pipe before `exec`)
//! until every probe is in place, so none of its early events are missed.
//!
//! The held command never runs unless rtrace releases it: the child execs
//! only after reading the go-ahead byte, so when rtrace fails (a compile
//! error, a privilege refusal, a verifier or attach error, a panic) the
//! pipe closes without it and the child exits instead; dropping a held
//! process kills it without releasing it; and the child has
//! `PR_SET_PDEATHSIG` so it dies with rtrace.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::{anyhow, bail, Result};

use crate::output::junit::CommandEnd;

pub struct TracedProcess {
    pub pid: i32,
    /// Pid of a `-c` child to reap.
    child: Option<i32>,
    /// Write end of the pipe the held child waits on.
    release: Option<OwnedFd>,
    /// Exit status of the command, once it ended.
    pub status: Option<i32>,
    /// rtrace ended the command itself (end of tracing), so its status is
    /// not the command's own.
    stopped: bool,
    /// The signal that killed the command, if one did.
    killed_by: Option<i32>,
    /// `-c`'s text.
    command: String,
    /// When the command was released, and when it was reaped.
    ran: (Option<std::time::Instant>, Option<std::time::Instant>),
}

impl TracedProcess {
    /// `-p PID`: an existing process.
    pub fn existing(pid: i32) -> Result<TracedProcess> {
        if pid <= 0
            || unsafe { libc::kill(pid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
        {
            bail!("-p {pid}: no such process");
        }
        Ok(TracedProcess {
            pid,
            child: None,
            release: None,
            status: None,
            stopped: false,
            killed_by: None,
            command: String::new(),
            ran: (None, None),
        })
    }

    /// `-c CMD`: start CMD, held before exec until [`release`](Self::release).
    /// (A plain fork: `std::process::Command::spawn` waits for the exec.)
    pub fn spawn_held(cmd: &str) -> Result<TracedProcess> {
        // Quotes or shell syntax: let sh parse it, then exec in place (same pid).
        let needs_shell = cmd.contains(|c: char| "'\"$`|&;<>(){}*?~\\".contains(c));
        let shell_cmd = format!("exec {cmd}");
        let argv_text: Vec<&str> =
            if needs_shell { vec!["/bin/sh", "-c", &shell_cmd] } else { cmd.split_whitespace().collect() };
        let words: Vec<CString> = argv_text
            .into_iter()
            .map(|w| CString::new(w).map_err(|_| anyhow!("-c: the command contains a NUL byte")))
            .collect::<Result<_>>()?;
        if words.is_empty() {
            bail!("-c needs a command");
        }
        let mut argv: Vec<*const libc::c_char> = words.iter().map(|w| w.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut fds = [0i32; 2];
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            bail!("-c: cannot create a pipe: {}", std::io::Error::last_os_error());
        }
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            bail!("-c: cannot fork: {}", std::io::Error::last_os_error());
        }
        if pid == 0 {
            // Child: die with rtrace; wait for the go-ahead, then become
            // CMD. No go-ahead (rtrace failed or died, also before the
            // prctl: the pipe then reads end-of-file): exit, never exec.
            // No syscall here may be one the script traces (no getppid):
            // the probes may already be attached.
            unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
                libc::close(fds[1]);
                let mut byte = 0u8;
                let n = loop {
                    let n = libc::read(fds[0], &mut byte as *mut u8 as *mut _, 1);
                    if n < 0 && *libc::__errno_location() == libc::EINTR {
                        continue;
                    }
                    break n;
                };
                if n != 1 || byte != b'g' {
                    libc::_exit(127);
                }
                libc::execvp(argv[0], argv.as_ptr());
                let msg = b"rtrace: -c: cannot run the command\n";
                libc::write(2, msg.as_ptr() as *const _, msg.len());
                libc::_exit(127);
            }
        }
        unsafe { libc::close(fds[0]) };
        let release = unsafe { OwnedFd::from_raw_fd(fds[1]) };
        Ok(TracedProcess {
            pid,
            child: Some(pid),
            release: Some(release),
            status: None,
            stopped: false,
            killed_by: None,
            command: cmd.to_string(),
            ran: (None, None),
        })
    }

    /// Let a held `-c` command run.
    pub fn release(&mut self) {
        if let Some(fd) = self.release.take() {
            self.ran.0 = Some(std::time::Instant::now());
            unsafe { libc::write(fd.as_raw_fd(), b"g".as_ptr() as *const _, 1) };
        }
    }

    /// Whether the process has ended (reaping a `-c` child).
    pub fn ended(&mut self) -> bool {
        if self.status.is_some() {
            return true;
        }
        match self.child {
            Some(pid) => {
                let mut st = 0i32;
                match unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) } {
                    0 => false,
                    r if r == pid => {
                        self.reaped(st);
                        true
                    }
                    _ => true,
                }
            }
            None => {
                let gone = (unsafe { libc::kill(self.pid, 0) } != 0
                    && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH))
                    || is_zombie(self.pid);
                if gone {
                    self.status = Some(0);
                }
                gone
            }
        }
    }

    /// End a `-c` command that is still running when tracing stops. One
    /// still held is killed without ever being released.
    pub fn stop(&mut self) {
        let Some(pid) = self.child else { return };
        if self.status.is_some() || self.ended() {
            return;
        }
        let sig = if self.release.is_some() { libc::SIGKILL } else { libc::SIGTERM };
        self.release = None;
        self.stopped = true;
        let mut st = 0i32;
        unsafe {
            libc::kill(pid, sig);
            if libc::waitpid(pid, &mut st, 0) == pid {
                self.reaped(st);
            }
        }
    }

    /// A wait status of the `-c` child.
    fn reaped(&mut self, st: i32) {
        self.ran.1 = Some(std::time::Instant::now());
        self.status = Some(exit_code(st));
        self.killed_by = libc::WIFSIGNALED(st).then(|| libc::WTERMSIG(st));
    }

    /// How the `-c` command ended (`None` for `-p`, or while it runs), and its text.
    /// How long the `-c` command ran, in seconds (0 when it never ran).
    pub fn command_seconds(&self) -> f64 {
        match self.ran {
            (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64(),
            (Some(a), None) => a.elapsed().as_secs_f64(),
            _ => 0.0,
        }
    }

    pub fn command_end(&self) -> Option<(&str, CommandEnd)> {
        self.child?;
        let end = match (self.stopped, self.killed_by, self.status?) {
            (true, _, _) => CommandEnd::EndedByRtrace,
            (false, Some(sig), _) => CommandEnd::Killed(sig),
            (false, None, code) => CommandEnd::Exited(code),
        };
        Some((&self.command, end))
    }

    /// The command's own exit status: `None` while running, for `-p`, and
    /// when rtrace ended it (`-d`, Ctrl-C, `exit()`).
    pub fn command_status(&self) -> Option<i32> {
        self.child.and(self.status).filter(|_| !self.stopped)
    }
}

impl Drop for TracedProcess {
    /// Every error path drops the process: a held command is killed, never released.
    fn drop(&mut self) {
        self.stop();
    }
}

/// A wait status as a shell would report it.
fn exit_code(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}

/// An exited process its parent has not reaped yet (state `Z`).
fn is_zombie(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the parenthesised comm, which may contain spaces.
    stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()).is_some_and(|st| st == "Z" || st == "X")
}
