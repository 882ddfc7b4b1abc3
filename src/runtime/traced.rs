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
//!
//! `--repeat N` runs the command N times in a row under the same probes
//! (a run that fails ends the series); each run's status, times, peak
//! memory and instructions go to `script::command_runs`.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
use crossbeam_channel::{Receiver, Sender};

use crate::kernel::sys;
use crate::output::junit::CommandEnd;
use crate::script::command_runs::{self, CommandRun};
use crate::util::errno;

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
    /// The command's stdout goes to rtrace's stderr (`-f json` on stdout:
    /// its lines would break the records).
    stdout_to_stderr: bool,
    /// When the command was released, and when it was reaped.
    ran: (Option<Instant>, Option<Instant>),
    /// The instructions counter of this run, or why there is none.
    instructions: Result<OwnedFd, String>,
    /// `--repeat N`: how many runs in all, and how many have started.
    runs: (u32, u32),
    /// A `-c` run's exit, seen by a thread that waits for it: when it
    /// happened, and a wake-up for the event loop, so the run's time is
    /// exact and its end is noticed at once.
    exit: Arc<Mutex<Option<Instant>>>,
    exits: (Sender<()>, Receiver<()>),
}

impl TracedProcess {
    /// `-p PID`: an existing process.
    pub fn existing(pid: i32) -> Result<TracedProcess> {
        if pid <= 0
            || unsafe { libc::kill(pid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
        {
            bail!("-p {pid}: no such process");
        }
        Ok(TracedProcess::new(pid))
    }

    /// A process traced from now on, not (yet) known to be rtrace's child.
    fn new(pid: i32) -> TracedProcess {
        TracedProcess {
            pid,
            child: None,
            release: None,
            status: None,
            stopped: false,
            killed_by: None,
            command: String::new(),
            stdout_to_stderr: false,
            ran: (None, None),
            instructions: Err(String::new()),
            runs: (1, 1),
            exit: Arc::default(),
            exits: crossbeam_channel::bounded(1),
        }
    }

    /// `-c CMD`: start CMD, held before exec until [`release`](Self::release);
    /// with `stdout_to_stderr`, its stdout is rtrace's stderr.
    /// (A plain fork: `std::process::Command::spawn` waits for the exec.)
    pub fn spawn_held(cmd: &str, stdout_to_stderr: bool) -> Result<TracedProcess> {
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
                // Before the go-ahead: nothing is attached yet.
                if stdout_to_stderr {
                    libc::dup2(2, 1);
                }
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
        let instructions = sys::open_instruction_counter(pid).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV) => {
                format!("this machine has no hardware performance counters (perf_event_open: {})", errno::describe(&e))
            }
            _ => format!("the instructions counter could not be opened (perf_event_open: {})", errno::describe(&e)),
        });
        let mut traced = TracedProcess::new(pid);
        traced.child = Some(pid);
        traced.release = Some(release);
        traced.command = cmd.to_string();
        traced.stdout_to_stderr = stdout_to_stderr;
        traced.instructions = instructions;
        Ok(traced)
    }

    /// `--repeat N`: run the command N times in all.
    pub fn repeat(&mut self, n: u32) {
        self.runs.0 = n.max(1);
    }

    /// After a run ended: start the next one, held, when `--repeat` asks
    /// for more and this one succeeded; its pid, to follow before
    /// [`release`](Self::release). `None`: the series is over.
    pub fn next_run(&mut self) -> Result<Option<i32>> {
        let (total, started) = self.runs;
        if self.child.is_none() || started >= total || self.stopped || self.status != Some(0) {
            return Ok(None);
        }
        let mut next = TracedProcess::spawn_held(&self.command, self.stdout_to_stderr)?;
        next.runs = (total, started + 1);
        next.exits = self.exits.clone();
        let pid = next.pid;
        *self = next;
        Ok(Some(pid))
    }

    /// Let a held `-c` command run; a thread notes when it exits.
    pub fn release(&mut self) {
        if let Some(fd) = self.release.take() {
            let (pid, exit, wake) = (self.pid, self.exit.clone(), self.exits.0.clone());
            let last_run = self.runs.1 >= self.runs.0;
            let waiter = std::thread::Builder::new().name("rtrace-wait".into()).spawn(move || {
                // WNOWAIT: the exit is seen, the child is left for ended() to reap.
                let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                let flags = libc::WEXITED | libc::WNOWAIT;
                while unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) } != 0
                    && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
                {}
                *exit.lock().unwrap() = Some(Instant::now());
                // The run ends with the command (the last of --repeat, or one that failed).
                let succeeded = info.si_code == libc::CLD_EXITED && unsafe { info.si_status() } == 0;
                if last_run || !succeeded {
                    super::signals::request_end("the -c command exited");
                }
                let _ = wake.try_send(());
            });
            if let Err(e) = waiter {
                crate::output::sink::warn(format!("-c: cannot start the thread that waits for the command: {e}"));
            }
            self.ran.0 = Some(Instant::now());
            unsafe { libc::write(fd.as_raw_fd(), b"g".as_ptr() as *const _, 1) };
        }
    }

    /// Wakes up when a `-c` run exits (never for `-p`).
    pub fn exits(&self) -> Receiver<()> {
        self.exits.1.clone()
    }

    /// Whether the process has ended (reaping a `-c` child).
    pub fn ended(&mut self) -> bool {
        if self.status.is_some() {
            return true;
        }
        match self.child {
            Some(pid) => {
                let mut st = 0i32;
                let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
                match unsafe { libc::wait4(pid, &mut st, libc::WNOHANG, &mut usage) } {
                    0 => false,
                    r if r == pid => {
                        self.reaped(st, &usage);
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
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe {
            libc::kill(pid, sig);
            if libc::wait4(pid, &mut st, 0, &mut usage) == pid {
                self.reaped(st, &usage);
            }
        }
    }

    /// A wait status of the `-c` child and what it used; a run that was
    /// released is recorded for `command_runs()` and the reports.
    fn reaped(&mut self, st: i32, usage: &libc::rusage) {
        self.ran.1 = Some(self.exit.lock().unwrap().unwrap_or_else(Instant::now));
        self.status = Some(exit_code(st));
        self.killed_by = libc::WIFSIGNALED(st).then(|| libc::WTERMSIG(st));
        if self.ran.0.is_none() {
            return;
        }
        let Some((_, end)) = self.command_end() else { return };
        let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
        let instructions = match &self.instructions {
            Ok(fd) => sys::read_counter(fd)
                .map_err(|e| format!("the instructions counter could not be read: {}", errno::describe(&e))),
            Err(why) => Err(why.clone()),
        };
        let run = CommandRun {
            pid: self.pid,
            end,
            seconds: self.command_seconds(),
            user_ns: ns(usage.ru_utime),
            sys_ns: ns(usage.ru_stime),
            max_rss_kb: usage.ru_maxrss.max(0) as u64,
            instructions,
        };
        command_runs::record(&self.command, run, self.runs.0);
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
