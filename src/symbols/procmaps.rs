//! Executable mappings per process, kept so that user addresses still
//! resolve after the process has exited. While tracing, one perf
//! mmap-tracking event per CPU reports every exec, fork, exit and executable
//! mmap as it happens (the kernel writes them synchronously, so a process
//! that exits right after an event is covered); processes that were already
//! running are read from `/proc/PID/maps` when first seen. At most
//! [`MAX_PROCS`] processes are kept, exited ones dropped first.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, LazyLock, Mutex};

/// Processes whose mappings are kept.
pub const MAX_PROCS: usize = 16384;

/// One executable mapping: `[start, end)` maps `path` from file offset `pgoff`.
#[derive(Clone, Debug, PartialEq)]
pub struct Range {
    pub start: u64,
    pub end: u64,
    pub pgoff: u64,
    /// Inode of the mapped file (0: unknown), to tell a replaced file.
    pub ino: u64,
    pub path: Arc<str>,
}

#[derive(Default)]
struct Proc {
    ranges: Vec<Range>,
    /// Changes whenever the table is replaced (exec, fork, snapshot), so
    /// symbols cached for an older table are not reused.
    generation: u64,
    exited: bool,
}

#[derive(Default)]
struct Tables {
    procs: HashMap<u32, Proc>,
    paths: HashSet<Arc<str>>,
    next_generation: u64,
}

static TABLES: LazyLock<Mutex<Tables>> = LazyLock::new(|| Mutex::new(Tables::default()));

fn tables() -> std::sync::MutexGuard<'static, Tables> {
    TABLES.lock().unwrap_or_else(|e| e.into_inner())
}

impl Tables {
    fn intern(&mut self, path: &str) -> Arc<str> {
        if let Some(p) = self.paths.get(path) {
            return p.clone();
        }
        let p: Arc<str> = Arc::from(path);
        self.paths.insert(p.clone());
        p
    }

    /// Replace `pid`'s table.
    fn set(&mut self, pid: u32, ranges: Vec<Range>, exited: bool) {
        self.next_generation += 1;
        self.procs.insert(pid, Proc { ranges, generation: self.next_generation, exited });
        if self.procs.len() > MAX_PROCS {
            self.evict();
        }
    }

    /// Drop a quarter of the tables: exited processes first, oldest first.
    fn evict(&mut self) {
        let mut order: Vec<(bool, u64, u32)> =
            self.procs.iter().map(|(&pid, p)| (!p.exited, p.generation, pid)).collect();
        order.sort_unstable();
        for (_, _, pid) in order.into_iter().take(MAX_PROCS / 4) {
            self.procs.remove(&pid);
        }
        self.paths.retain(|p| Arc::strong_count(p) > 1);
    }

    fn apply(&mut self, ev: Event) {
        match ev {
            Event::Exec { pid } => self.set(pid, Vec::new(), false),
            Event::Fork { pid, ppid } => match self.procs.get(&ppid) {
                Some(parent) => {
                    let ranges = parent.ranges.clone();
                    self.set(pid, ranges, false);
                }
                // An untracked parent: its child is read from /proc if seen.
                None => {
                    self.procs.remove(&pid);
                }
            },
            Event::Exit { pid } => {
                if let Some(p) = self.procs.get_mut(&pid) {
                    p.exited = true;
                }
            }
            Event::Mmap { pid, start, len, pgoff, ino, path } => {
                if !path.starts_with('/') {
                    return; // anonymous code, [vdso]...
                }
                let path = self.intern(&path);
                // Only complete tables (from an exec or a fork) take mmaps.
                if let Some(p) = self.procs.get_mut(&pid) {
                    let end = start.saturating_add(len);
                    p.ranges.retain(|r| r.end <= start || r.start >= end);
                    p.ranges.push(Range { start, end, pgoff, ino, path });
                }
            }
        }
    }
}

/// Where `addr` of process `pid` lies: the mapping and its table's generation.
pub fn lookup(pid: u32, addr: u64) -> Option<(Range, u64)> {
    let t = tables();
    let p = t.procs.get(&pid)?;
    let r = p.ranges.iter().find(|r| r.start <= addr && addr < r.end)?;
    Some((r.clone(), p.generation))
}

/// The generation of `pid`'s table (0: none).
pub fn generation(pid: u32) -> u64 {
    tables().procs.get(&pid).map(|p| p.generation).unwrap_or(0)
}

/// Make sure `pid` has a table: read `/proc/PID/maps` now if it has none
/// (an empty table if the process is gone, so it is not read again).
pub fn ensure(pid: u32) {
    if pid == 0 || tables().procs.contains_key(&pid) {
        return;
    }
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mut t = tables();
    if t.procs.contains_key(&pid) {
        return;
    }
    let ranges: Vec<Range> = text.lines().filter_map(|l| parse_maps_line(l, &mut t)).collect();
    let exited = ranges.is_empty();
    t.set(pid, ranges, exited);
}

/// One line of `/proc/PID/maps`.
#[derive(Debug, PartialEq)]
pub struct MapsLine<'a> {
    pub start: u64,
    pub end: u64,
    pub exec: bool,
    pub pgoff: u64,
    /// (major, minor) of the file's device.
    pub dev: (u64, u64),
    pub ino: u64,
    /// The path, `[vdso]`-style names, or empty for anonymous memory.
    pub path: &'a str,
}

/// `7f..-7f.. r-xp 00028000 fd:01 1234   /usr/lib/x86_64-linux-gnu/libc.so.6`.
pub fn parse_line(line: &str) -> Option<MapsLine<'_>> {
    let mut it = line.splitn(6, ' ');
    let (range, perms, off, dev, ino) = (it.next()?, it.next()?, it.next()?, it.next()?, it.next()?);
    let path = it.next().unwrap_or("").trim_start();
    let (start, end) = range.split_once('-')?;
    let (major, minor) = dev.split_once(':')?;
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    Some(MapsLine {
        start: hex(start)?,
        end: hex(end)?,
        exec: perms.as_bytes().get(2) == Some(&b'x'),
        pgoff: hex(off)?,
        dev: (hex(major)?, hex(minor)?),
        ino: ino.parse().ok()?,
        path,
    })
}

/// An executable, file-backed line of `/proc/PID/maps`.
fn parse_maps_line(line: &str, t: &mut Tables) -> Option<Range> {
    let m = parse_line(line)?;
    if !m.exec || !m.path.starts_with('/') {
        return None;
    }
    Some(Range { start: m.start, end: m.end, pgoff: m.pgoff, ino: m.ino, path: t.intern(m.path) })
}

#[derive(Debug, PartialEq)]
enum Event {
    Exec { pid: u32 },
    Fork { pid: u32, ppid: u32 },
    Exit { pid: u32 },
    Mmap { pid: u32, start: u64, len: u64, pgoff: u64, ino: u64, path: String },
}

const PERF_RECORD_MMAP2: u32 = 10;
const PERF_RECORD_COMM: u32 = 3;
const PERF_RECORD_EXIT: u32 = 4;
const PERF_RECORD_FORK: u32 = 7;
const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_MISC_COMM_EXEC: u16 = 1 << 13;
const PERF_RECORD_MISC_MMAP_BUILD_ID: u16 = 1 << 14;

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// One perf record (header included) as an event with its time (the
/// `sample_id_all` trailer); `None` for records of no interest.
fn parse_record(rec: &[u8]) -> Option<(u64, Event)> {
    let kind = u32_at(rec, 0)?;
    let misc = u16::from_le_bytes(rec.get(4..6)?.try_into().ok()?);
    let time = u64_at(rec, rec.len().checked_sub(8)?)?;
    let pid = u32_at(rec, 8)?;
    let ev = match kind {
        PERF_RECORD_COMM if misc & PERF_RECORD_MISC_COMM_EXEC != 0 => Event::Exec { pid },
        PERF_RECORD_FORK => {
            let ppid = u32_at(rec, 12)?;
            if pid == ppid {
                return None; // a new thread
            }
            Event::Fork { pid, ppid }
        }
        PERF_RECORD_EXIT => {
            if u32_at(rec, 16)? != pid {
                return None; // a thread other than the leader
            }
            Event::Exit { pid }
        }
        PERF_RECORD_MMAP2 => {
            let name = rec.get(72..rec.len() - 8)?;
            let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
            let ino = if misc & PERF_RECORD_MISC_MMAP_BUILD_ID != 0 { 0 } else { u64_at(rec, 48)? };
            Event::Mmap {
                pid,
                start: u64_at(rec, 16)?,
                len: u64_at(rec, 24)?,
                pgoff: u64_at(rec, 32)?,
                ino,
                path: String::from_utf8_lossy(&name[..end]).into_owned(),
            }
        }
        _ => return None,
    };
    Some((time, ev))
}

/// The perf ring of one CPU's tracking event.
struct Ring {
    _fd: OwnedFd,
    base: *mut u8,
    len: usize,
    data_off: usize,
    data_size: usize,
}

impl Drop for Ring {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// Mapping-change records the kernel dropped because a tracking ring was
/// full (reported at exit: some user stacks may then print as addresses).
pub static TRACKING_LOST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Reads the mmap-tracking events into the tables; owned by the reader thread.
pub struct Tracker {
    rings: Vec<Ring>,
}

// The rings are only touched by the thread that owns the tracker.
unsafe impl Send for Tracker {}

/// Data pages per CPU ring (a power of two): 64 KiB with 4 KiB pages.
const RING_PAGES: usize = 16;

impl Tracker {
    /// Start tracking on every CPU; `None` (and the reason) when it can't.
    pub fn start() -> Result<Tracker, String> {
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let ncpus = libbpf_rs::num_possible_cpus().map_err(|e| e.to_string())?;
        let mut rings = Vec::new();
        let mut last_err = None;
        for cpu in 0..ncpus {
            let fd = match crate::kernel::sys::open_mmap_tracking(cpu as i32) {
                Ok(fd) => fd,
                Err(e) => {
                    last_err = Some(e); // an offline CPU
                    continue;
                }
            };
            let len = page * (1 + RING_PAGES);
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if base == libc::MAP_FAILED {
                return Err(format!("cannot map a perf ring: {}", std::io::Error::last_os_error()));
            }
            let base = base as *mut u8;
            let meta = base as *const crate::kernel::sys::PerfEventMmapPage;
            let (off, size) = unsafe { ((*meta).data_offset as usize, (*meta).data_size as usize) };
            let (data_off, data_size) = if size == 0 { (page, page * RING_PAGES) } else { (off, size) };
            rings.push(Ring { _fd: fd, base, len, data_off, data_size });
        }
        if rings.is_empty() {
            return Err(last_err.map(|e| e.to_string()).unwrap_or_else(|| "no CPUs".into()));
        }
        Ok(Tracker { rings })
    }

    /// Apply everything the kernel has reported so far, in time order.
    pub fn drain(&mut self) {
        let mut events = Vec::new();
        for ring in &self.rings {
            let meta = ring.base as *mut crate::kernel::sys::PerfEventMmapPage;
            let head = unsafe { std::ptr::read_volatile(&(*meta).data_head) };
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            let mut tail = unsafe { std::ptr::read_volatile(&(*meta).data_tail) };
            let data = unsafe { std::slice::from_raw_parts(ring.base.add(ring.data_off), ring.data_size) };
            let mut rec = Vec::new();
            while tail < head {
                let at = (tail % ring.data_size as u64) as usize;
                let byte = |i: usize| data[(at + i) % ring.data_size];
                let size = u16::from_le_bytes([byte(6), byte(7)]) as usize;
                if size < 8 {
                    break;
                }
                rec.clear();
                rec.extend((0..size).map(byte));
                if u32_at(&rec, 0) == Some(PERF_RECORD_LOST) {
                    TRACKING_LOST.fetch_add(u64_at(&rec, 16).unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
                } else if let Some(ev) = parse_record(&rec) {
                    events.push(ev);
                }
                tail += size as u64;
            }
            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            unsafe { std::ptr::write_volatile(&mut (*meta).data_tail, tail) };
        }
        if events.is_empty() {
            return;
        }
        events.sort_by_key(|(time, _)| *time);
        let mut t = tables();
        for (_, ev) in events {
            t.apply(ev);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u32, misc: u16, body: &[u8], time: u64) -> Vec<u8> {
        let size = (8 + body.len() + 8) as u16;
        let mut r = kind.to_le_bytes().to_vec();
        r.extend(misc.to_le_bytes());
        r.extend(size.to_le_bytes());
        r.extend(body);
        r.extend(time.to_le_bytes());
        r
    }

    #[test]
    fn parses_exec_fork_exit_and_mmap2_records() {
        let mut comm = 7u32.to_le_bytes().to_vec();
        comm.extend(7u32.to_le_bytes());
        comm.extend(b"prog\0\0\0\0");
        assert_eq!(
            parse_record(&record(PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC, &comm, 5)),
            Some((5, Event::Exec { pid: 7 }))
        );
        assert_eq!(parse_record(&record(PERF_RECORD_COMM, 0, &comm, 5)), None, "a comm change that is not an exec");

        let ids = |a: u32, b: u32, c: u32, d: u32| {
            [a, b, c, d].iter().flat_map(|v| v.to_le_bytes()).chain(9u64.to_le_bytes()).collect::<Vec<u8>>()
        };
        assert_eq!(
            parse_record(&record(PERF_RECORD_FORK, 0, &ids(8, 7, 8, 7), 6)),
            Some((6, Event::Fork { pid: 8, ppid: 7 }))
        );
        assert_eq!(parse_record(&record(PERF_RECORD_FORK, 0, &ids(7, 7, 9, 7), 6)), None, "a new thread");
        assert_eq!(parse_record(&record(PERF_RECORD_EXIT, 0, &ids(8, 7, 8, 7), 7)), Some((7, Event::Exit { pid: 8 })));
        assert_eq!(parse_record(&record(PERF_RECORD_EXIT, 0, &ids(8, 7, 10, 7), 7)), None, "a thread's exit");

        let mut m = Vec::new();
        for v in [8u32, 8] {
            m.extend(v.to_le_bytes());
        }
        for v in [0x1000u64, 0x2000, 0x3000] {
            m.extend(v.to_le_bytes());
        }
        m.extend([0u8; 8]); // maj, min
        m.extend(42u64.to_le_bytes()); // ino
        m.extend(0u64.to_le_bytes()); // ino generation
        m.extend([0u8; 8]); // prot, flags
        m.extend(b"/bin/true\0\0\0\0\0\0\0");
        assert_eq!(
            parse_record(&record(PERF_RECORD_MMAP2, 0, &m, 8)),
            Some((
                8,
                Event::Mmap { pid: 8, start: 0x1000, len: 0x2000, pgoff: 0x3000, ino: 42, path: "/bin/true".into() }
            ))
        );
    }

    #[test]
    fn tables_follow_exec_fork_and_mmap() {
        let mut t = Tables::default();
        let mmap =
            |pid, start, path: &str| Event::Mmap { pid, start, len: 0x1000, pgoff: 0x2000, ino: 1, path: path.into() };
        // No table yet (a process from before tracing): mmaps are not enough.
        t.apply(mmap(100, 0x1000, "/a"));
        assert!(!t.procs.contains_key(&100));
        t.apply(Event::Exec { pid: 100 });
        t.apply(mmap(100, 0x1000, "/a"));
        t.apply(mmap(100, 0x5000, "[vdso]"));
        t.apply(Event::Fork { pid: 101, ppid: 100 });
        t.apply(mmap(101, 0x1000, "/b")); // replaces the child's copy of /a
        let ranges =
            |t: &Tables, pid| t.procs[&pid].ranges.iter().map(|r| (r.start, r.path.to_string())).collect::<Vec<_>>();
        assert_eq!(ranges(&t, 100), vec![(0x1000, "/a".to_string())]);
        assert_eq!(ranges(&t, 101), vec![(0x1000, "/b".to_string())]);
        t.apply(Event::Exit { pid: 100 });
        assert!(t.procs[&100].exited && !t.procs[&101].exited);
        assert_ne!(t.procs[&100].generation, t.procs[&101].generation);
    }

    #[test]
    fn eviction_keeps_the_table_count_bounded_and_drops_exited_first() {
        let mut t = Tables::default();
        t.set(1, Vec::new(), false);
        for pid in 2..=MAX_PROCS as u32 + 1 {
            t.set(pid, Vec::new(), true);
        }
        assert!(t.procs.len() <= MAX_PROCS);
        assert!(t.procs.contains_key(&1), "the live process was dropped before exited ones");
    }

    #[test]
    fn maps_lines_keep_executable_files_only() {
        let mut t = Tables::default();
        let r = parse_maps_line("55d0c0a1b000-55d0c0a1c000 r-xp 00001000 fe:01 1234   /tmp/my prog", &mut t).unwrap();
        assert_eq!(
            (r.start, r.end, r.pgoff, r.ino, &*r.path),
            (0x55d0c0a1b000, 0x55d0c0a1c000, 0x1000, 1234, "/tmp/my prog")
        );
        assert!(parse_maps_line("55d0c0a1b000-55d0c0a1c000 r--p 00000000 fe:01 1234 /tmp/prog", &mut t).is_none());
        assert!(parse_maps_line("7ffc1000-7ffc3000 r-xp 00000000 00:00 0 [vdso]", &mut t).is_none());
    }

    #[test]
    fn maps_lines() {
        let l =
            parse_line("7f12a000-7f12b000 r-xp 00028000 fd:01 1234                       /usr/lib/libc.so.6").unwrap();
        assert_eq!(
            l,
            MapsLine {
                start: 0x7f12a000,
                end: 0x7f12b000,
                exec: true,
                pgoff: 0x28000,
                dev: (0xfd, 1),
                ino: 1234,
                path: "/usr/lib/libc.so.6"
            }
        );
        let anon = parse_line("7ffd000-7ffe000 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!((anon.path, anon.exec), ("", false));
        assert!(parse_line("garbage").is_none());
    }
}
