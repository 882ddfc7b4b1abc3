//! The ring-buffer reader thread: polls the data and control rings and hands
//! records to the Rhai thread in batches over crossbeam channels. Control
//! messages travel on their own ring and their own channel, so a flood of
//! data records can never push them out. That channel is bounded
//! ([`CONTROL_QUEUE`]): the reader never waits on it (so it keeps draining
//! the control ring), and what doesn't fit is counted ([`Reader::lost_controls`])
//! and reported. `exit()` doesn't travel on the channel at all: the first one
//! is kept aside ([`Reader::exit_code`]), so it can't be lost behind others. Before handing anything
//! on, it applies the processes' mapping changes (`procmaps::Tracker`) and
//! reads the mappings of processes first seen in a user stack, so their
//! stacks resolve even after they exit.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use crate::symbols::procmaps;

/// A batch of data records, each stored as `u32 length` + bytes.
pub type Batch = Vec<u8>;

/// A control message from a probe.
pub type Control = probes_ebpf::record::ControlMsg;

pub struct Reader {
    pub data: Receiver<Batch>,
    pub control: Receiver<Control>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

/// Control messages waiting for the Rhai thread; more are counted as lost.
pub const CONTROL_QUEUE: usize = 4096;

/// What the reader thread tells the Rhai thread outside the channels.
#[derive(Default)]
struct Shared {
    /// The first `exit()` from a probe: (probe index, code).
    exit: Mutex<Option<(u32, i64)>>,
    lost_controls: AtomicU64,
}

/// How long the reader sleeps when no wake-up comes. A lone event does not
/// wait for it: before this sleep the reader raises the wake flag, and the
/// first record after that wakes it.
pub const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// While records keep coming, the reader collects them this long before it
/// looks again (no wake-up flag raised: the programs send without waking it,
/// unless a large backlog is pending), so a busy ring is read in large
/// batches with few wake-ups. A read that finds nothing means the ring has
/// been quiet this long: then it raises the flag and sleeps.
pub const BATCH_INTERVAL: Duration = Duration::from_millis(1);

impl Reader {
    /// `ustacks[site]`: offsets of the user-stack values in that site's
    /// records (`pid << 32 | id`).
    pub fn start(
        data_ring: libbpf_rs::MapHandle,
        control_ring: libbpf_rs::MapHandle,
        wake: libbpf_rs::MapHandle,
        tracker: Option<procmaps::Tracker>,
        ustacks: Vec<Vec<usize>>,
    ) -> anyhow::Result<Reader> {
        // A few batches of backlog at most: beyond that the reader waits, the
        // ring fills, and the kernel counts what it cannot deliver.
        let (data_tx, data_rx) = crossbeam_channel::bounded::<Batch>(16);
        let (control_tx, control_rx) = crossbeam_channel::bounded::<Control>(CONTROL_QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = stop.clone();
        let shared = Arc::new(Shared::default());
        let sh = shared.clone();
        let thread = std::thread::Builder::new().name("rtrace-reader".into()).spawn(move || {
            let controls = ControlOut { tx: control_tx, shared: sh };
            read_loop([data_ring, control_ring, wake], data_tx, controls, stop_flag, tracker, ustacks)
        })?;
        Ok(Reader { data: data_rx, control: control_rx, stop, thread: Some(thread), shared })
    }

    /// The first `exit()` a probe sent: (probe index, code).
    pub fn exit_code(&self) -> Option<(u32, i64)> {
        *self.shared.exit.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Control messages dropped because the Rhai thread fell behind.
    pub fn lost_controls(&self) -> u64 {
        self.shared.lost_controls.load(Ordering::SeqCst)
    }

    /// Ask the thread to stop after one last drain of both rings; the data
    /// channel disconnects once it has.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Wait for the thread (after the data channel disconnected).
    pub fn join(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The reader's side of the control path.
/// Control messages the reader dropped because the Rhai thread fell behind
/// (for the metrics endpoint; the reader counts them as it drops them).
pub static DROPPED_CONTROLS: AtomicU64 = AtomicU64::new(0);

struct ControlOut {
    tx: Sender<Control>,
    shared: Arc<Shared>,
}

impl ControlOut {
    fn send(&self, c: Control) {
        if c.kind == probes_ebpf::record::CONTROL_EXIT {
            self.shared.exit.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert((c.probe, c.arg));
        } else if self.tx.try_send(c).is_err() {
            self.shared.lost_controls.fetch_add(1, Ordering::SeqCst);
            DROPPED_CONTROLS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// `maps`: the data ring, the control ring and the wake flag.
fn read_loop(
    [data_ring, control_ring, wake]: [libbpf_rs::MapHandle; 3],
    data_tx: Sender<Batch>,
    control_tx: ControlOut,
    stop: Arc<AtomicBool>,
    mut tracker: Option<procmaps::Tracker>,
    ustacks: Vec<Vec<usize>>,
) {
    let batch = std::cell::RefCell::new(Vec::<u8>::with_capacity(64 * 1024));
    let controls = std::cell::RefCell::new(Vec::<Control>::new());
    let mut builder = libbpf_rs::RingBufferBuilder::new();
    let added = builder
        .add(&data_ring, |rec: &[u8]| {
            super::record::push_frame(&mut batch.borrow_mut(), rec);
            0
        })
        .and_then(|b| {
            b.add(&control_ring, |rec: &[u8]| {
                if let Some(c) = probes_ebpf::record::decode_control(rec) {
                    controls.borrow_mut().push(c);
                }
                0
            })
        });
    if let Err(e) = added {
        crate::output::sink::report(&crate::diag::Diagnostic::tool(format!("cannot read ring buffers: {e}")));
        return;
    }
    let ring = match builder.build() {
        Ok(r) => r,
        Err(e) => {
            crate::output::sink::report(&crate::diag::Diagnostic::tool(format!("cannot read ring buffers: {e}")));
            return;
        }
    };
    let mut seen = std::collections::HashSet::new();
    let mut send = || {
        // Mapping changes first: everything they report happened before the
        // events just read, whose stacks may need them.
        if let Some(t) = tracker.as_mut() {
            t.drain();
        }
        let full = std::mem::take(&mut *batch.borrow_mut());
        if !ustacks.is_empty() {
            seen.clear();
            for_each_user_stack_pid(&full, &ustacks, |pid| {
                if seen.insert(pid) {
                    procmaps::ensure(pid);
                }
            });
        }
        for c in controls.borrow_mut().drain(..) {
            control_tx.send(c);
        }
        if !full.is_empty() {
            let _ = data_tx.send(full);
        }
    };
    let mut busy = false;
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        if stopping {
            let _ = ring.consume_raw();
            send();
            break;
        }
        if busy {
            // Busy: let records gather (a large backlog still wakes us).
            let _ = ring.poll_raw(BATCH_INTERVAL);
        } else {
            // Quiet: say so, look once more (a record sent before its
            // program saw the flag brings no wake-up), then sleep until the
            // next record wakes us.
            raise_wake_flag(&wake);
            if ring.consume_raw() <= 0 {
                let _ = ring.poll_raw(POLL_INTERVAL);
            }
        }
        let _ = ring.consume_raw();
        busy = !batch.borrow().is_empty() || !controls.borrow().is_empty();
        send();
    }
}

/// Tell the programs the reader is about to sleep: the next record lowers
/// the flag and wakes it.
fn raise_wake_flag(wake: &libbpf_rs::MapHandle) {
    use libbpf_rs::MapCore;
    let _ = wake.update(&0u32.to_ne_bytes(), &1u64.to_ne_bytes(), libbpf_rs::MapFlags::ANY);
    std::sync::atomic::fence(Ordering::SeqCst);
}

/// The pid of every user-stack value in a batch of records.
fn for_each_user_stack_pid(batch: &[u8], ustacks: &[Vec<usize>], mut f: impl FnMut(u32)) {
    for rec in super::record::frames(batch).map_while(Result::ok) {
        let Some(site) = probes_ebpf::record::record_site(rec) else { continue };
        for &at in ustacks.get(site as usize).map(Vec::as_slice).unwrap_or(&[]) {
            if let Some(v) = rec.get(at..at + 8) {
                let pid = (u64::from_le_bytes(v.try_into().unwrap_or([0; 8])) >> 32) as u32;
                if pid != 0 {
                    f(pid);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(kind: u32, probe: u32, arg: i64) -> Control {
        Control { kind, probe, arg, task: None }
    }

    #[test]
    fn control_overflow_is_counted_and_exit_is_never_lost() {
        let (tx, rx) = crossbeam_channel::bounded::<Control>(CONTROL_QUEUE);
        let shared = Arc::new(Shared::default());
        let out = ControlOut { tx, shared: shared.clone() };
        for _ in 0..CONTROL_QUEUE + 5 {
            out.send(msg(probes_ebpf::record::CONTROL_PRINT, 0, 0));
        }
        out.send(msg(probes_ebpf::record::CONTROL_EXIT, 2, 7));
        out.send(msg(probes_ebpf::record::CONTROL_EXIT, 3, 9));
        assert_eq!(shared.lost_controls.load(Ordering::SeqCst), 5);
        assert_eq!(*shared.exit.lock().unwrap(), Some((2, 7)), "the first exit() wins, past a full queue");
        assert_eq!(rx.try_iter().count(), CONTROL_QUEUE);
    }

    #[test]
    fn user_stack_pids_are_found_at_their_sites_offsets() {
        let mut batch = Vec::new();
        let mut push = |site: u32, vals: &[u64]| {
            let mut rec = site.to_le_bytes().to_vec();
            rec.extend(0u32.to_le_bytes());
            for v in vals {
                rec.extend(v.to_le_bytes());
            }
            crate::runtime::record::push_frame(&mut batch, &rec);
        };
        push(0, &[7, (42 << 32) | 3]);
        push(1, &[(43 << 32) | 5]);
        push(0, &[7, 9]); // a kernel thread's stack: pid 0
        let mut pids = Vec::new();
        for_each_user_stack_pid(&batch, &[vec![16], vec![]], |p| pids.push(p));
        assert_eq!(pids, vec![42]);
    }
}
