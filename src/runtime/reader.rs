//! The ring-buffer reader thread: polls the data and control rings and hands
//! records to the Rhai thread in batches over crossbeam channels. Control
//! messages travel on their own ring and their own unbounded channel, so a
//! flood of data records can never push them out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

/// A batch of data records, each stored as `u32 length` + bytes.
pub type Batch = Vec<u8>;

/// A control message from a probe: (kind, probe index, argument).
pub type Control = (u32, u32, i64);

pub struct Reader {
    pub data: Receiver<Batch>,
    pub control: Receiver<Control>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How long the reader sleeps when no wake-up comes: the bound on a lone
/// event's delivery delay.
pub const POLL_INTERVAL: Duration = Duration::from_millis(5);

impl Reader {
    pub fn start(data_ring: libbpf_rs::MapHandle, control_ring: libbpf_rs::MapHandle) -> anyhow::Result<Reader> {
        // A few batches of backlog at most: beyond that the reader waits, the
        // ring fills, and the kernel counts what it cannot deliver.
        let (data_tx, data_rx) = crossbeam_channel::bounded::<Batch>(16);
        let (control_tx, control_rx) = crossbeam_channel::unbounded::<Control>();
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("rtrace-reader".into())
            .spawn(move || read_loop(data_ring, control_ring, data_tx, control_tx, stop_flag))?;
        Ok(Reader { data: data_rx, control: control_rx, stop, thread: Some(thread) })
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

fn read_loop(
    data_ring: libbpf_rs::MapHandle,
    control_ring: libbpf_rs::MapHandle,
    data_tx: Sender<Batch>,
    control_tx: Sender<Control>,
    stop: Arc<AtomicBool>,
) {
    let batch = std::cell::RefCell::new(Vec::<u8>::with_capacity(64 * 1024));
    let mut builder = libbpf_rs::RingBufferBuilder::new();
    let added = builder
        .add(&data_ring, |rec: &[u8]| {
            let mut b = batch.borrow_mut();
            b.extend_from_slice(&(rec.len() as u32).to_le_bytes());
            b.extend_from_slice(rec);
            0
        })
        .and_then(|b| {
            b.add(&control_ring, |rec: &[u8]| {
                if rec.len() >= 16 {
                    let kind = u32::from_le_bytes(rec[0..4].try_into().unwrap_or([0; 4]));
                    let probe = u32::from_le_bytes(rec[4..8].try_into().unwrap_or([0; 4]));
                    let arg = i64::from_le_bytes(rec[8..16].try_into().unwrap_or([0; 8]));
                    let _ = control_tx.send((kind, probe, arg));
                }
                0
            })
        });
    if let Err(e) = added {
        eprintln!("rtrace: cannot read ring buffers: {e}");
        return;
    }
    let ring = match builder.build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rtrace: cannot read ring buffers: {e}");
            return;
        }
    };
    let send = || {
        let full = std::mem::take(&mut *batch.borrow_mut());
        if !full.is_empty() {
            let _ = data_tx.send(full);
        }
    };
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        // Wake-ups are batched in the kernel: poll, then also drain whatever
        // arrived without one.
        let _ = ring.poll(POLL_INTERVAL);
        let _ = ring.consume();
        send();
        if stopping {
            break;
        }
    }
}
