//! Printing every map (at exit, and on SIGUSR1 while tracing goes on) and
//! reporting lost events as they happen, the way bpftrace does.

use crate::output::{self, sink, MapDump, MapValue};
use crate::plan::Plan;
use crate::script::Session;

use super::Loaded;

/// Why every map is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Occasion {
    /// The end of the run: a blank-line pair first in text mode (bpftrace's layout).
    Exit,
    /// SIGUSR1: the maps now; tracing goes on.
    Signal,
}

/// Print, by name, every non-empty map, also those the script printed
/// itself. A map the script cleared prints only if written again (a keyless
/// map holding nothing but zero after its clear is left out); at exit, a map
/// printed with `print_folded()` is left to the flame-graph tool reading it.
pub fn print_all_maps(session: &Session, loaded: &Loaded, occasion: Occasion) {
    let handles = session.registry.lock().unwrap().maps.clone();
    let mut dumps: Vec<MapDump> = handles
        .iter()
        .zip(&loaded.maps)
        .filter(|(h, _)| occasion == Occasion::Signal || !h.printed_folded())
        .filter_map(|(h, m)| m.dump().ok().map(|d| (h.handled_by_script(), d)))
        .filter(|(cleared, d)| !(d.entries.is_empty() || *cleared && d.keyless && all_zero(d)))
        .map(|(_, d)| d)
        .collect();
    if dumps.is_empty() {
        return;
    }
    dumps.sort_by(|a, b| a.name.cmp(&b.name));
    if occasion == Occasion::Exit && sink::format() == sink::Format::Text {
        sink::raw("\n\n");
    }
    for d in &dumps {
        sink::map(d);
    }
    sink::flush();
}

fn all_zero(d: &MapDump) -> bool {
    d.entries.iter().all(|(_, v)| match v {
        MapValue::Int(0) => true,
        MapValue::Str(s) => s.is_empty(),
        MapValue::Hist { counts: c, .. } | MapValue::Lhist { counts: c, .. } => c.iter().all(|&n| n == 0),
        _ => false,
    })
}

/// Lost events reported so far, per probe, so each report names only what
/// is new: during the run as loss happens (at most once a second) and at exit.
static REPORTED: std::sync::Mutex<Option<std::collections::HashMap<String, u64>>> = std::sync::Mutex::new(None);

/// Report the events lost since the last report, per probe: `Lost N events
/// on probe P` on stderr, or a `lost_events` record under `-f json`.
pub fn report_new_losses(plan: &Plan, loaded: &Loaded) {
    let mut guard = REPORTED.lock().unwrap();
    let reported = guard.get_or_insert_with(Default::default);
    for (probe, total) in super::lost_counts(plan, loaded) {
        let seen = reported.entry(probe.clone()).or_insert(0);
        if total <= *seen {
            continue;
        }
        let new = total - *seen;
        *seen = total;
        match sink::format() {
            sink::Format::Text => crate::util::errln!("Lost {new} events on probe {probe}"),
            sink::Format::Json => sink::raw(&output::format_lost_events_json(&probe, new)),
        }
    }
    sink::flush();
}
