//! What attaching leaves behind: the owned link and perf event fds of an
//! attachment (dropping one detaches), the load attributes of BTF-attached
//! programs, and detaching everything at exit.

use std::os::fd::OwnedFd;

/// A live attachment; dropping it detaches.
pub struct Attachment {
    /// BPF links (raw tracepoints, tp_btf, perf-event links), held until
    /// the attachment is dropped: closing one detaches its program.
    _links: Vec<OwnedFd>,
    /// Perf events the programs run on, held likewise.
    _events: Vec<OwnedFd>,
}

impl Attachment {
    /// Programs attached by BPF links alone.
    pub fn new(links: Vec<OwnedFd>) -> Attachment {
        Attachment { _links: links, _events: vec![] }
    }

    /// Programs on perf events; `links` empty when they were attached
    /// without links (the program then runs until the events close).
    pub fn perf(events: Vec<OwnedFd>, links: Vec<OwnedFd>) -> Attachment {
        Attachment { _links: links, _events: events }
    }
}

/// Load attributes of programs that attach by BTF id (tp_btf, fentry).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadAttrs {
    pub expected_attach_type: u32,
    pub attach_btf_id: u32,
}

/// Detach everything. Closing a tracepoint's perf event waits for RCU grace
/// periods in the kernel (tens of milliseconds each, one close at a time);
/// closing them from several threads overlaps what can overlap.
pub fn detach_all(attachments: Vec<Attachment>) {
    const THREADS: usize = 64;
    if attachments.len() <= 2 {
        drop(attachments);
        return;
    }
    let queue = std::sync::Mutex::new(attachments);
    let next = || queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
    std::thread::scope(|s| {
        let n = THREADS.min(queue.lock().map(|q| q.len()).unwrap_or(0));
        for _ in 0..n {
            // A thread that can't start leaves its share to the others.
            let _ = std::thread::Builder::new().name("rtrace-detach".into()).spawn_scoped(s, || {
                while let Some(a) = next() {
                    drop(a);
                }
            });
        }
    });
    // Whatever no thread took (none could start) closes here.
    while let Some(a) = next() {
        drop(a);
    }
}
