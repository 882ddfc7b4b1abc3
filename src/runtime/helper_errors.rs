//! `-k`/`-kk`: the failed-helper counters (one per-CPU slot per checked
//! call site, written by the checks codegen adds) and their reports, per
//! probe and statement, as they grow: during the run (with the loss
//! reports, at most once a second) and at exit.

use std::collections::BTreeMap;
use std::sync::Mutex;

use anyhow::{anyhow, Result};
use libbpf_rs::{MapCore, MapFlags, MapType};
use probes_ebpf::codegen::HelperSite;
use probes_ebpf::record::{decode_helper_errors, HELPER_ERROR_SIZE};

use crate::kernel::sys::map_create;
use crate::output::helper_error::{self, HelperError};
use crate::output::sink;
use crate::plan::Plan;
use crate::script::Session;

use super::Loaded;

/// The counters, one slot per checked call site of every program.
pub fn create(plan: &Plan) -> Result<libbpf_rs::MapHandle> {
    let slots = sites(plan).map(|(_, s)| s.slot + 1).max().unwrap_or(1);
    map_create(MapType::PercpuArray, "rtrace_helper_err", 4, HELPER_ERROR_SIZE, slots, 0)
        .map_err(|e| anyhow!("cannot create the failed-helper counters (-k): {e}"))
}

/// Every checked call site with the probe it belongs to.
fn sites(plan: &Plan) -> impl Iterator<Item = (usize, &HelperSite)> {
    plan.programs.iter().flat_map(|p| p.code.helper_sites.iter().map(move |s| (p.probe, s)))
}

/// The counters with their call sites, for a reader that outlives the plan's
/// borrow (`--serve`'s scrapes).
pub struct Counters {
    map: libbpf_rs::MapHandle,
    sites: Vec<(usize, HelperSite)>,
}

impl Counters {
    /// The run's counters, when it was started with `-k`/`-kk`.
    pub fn of(plan: &Plan, loaded: &Loaded) -> Result<Option<Counters>> {
        let Some(map) = &loaded.helper_errors else { return Ok(None) };
        let map = libbpf_rs::MapHandle::try_from(map).map_err(|e| anyhow!("failed-helper counters: {e}"))?;
        Ok(Some(Counters { map, sites: sites(plan).map(|(probe, s)| (probe, *s)).collect() }))
    }

    /// Failed calls so far per (probe, line, col, helper), with the last error.
    pub fn totals(&self) -> BTreeMap<Place, (u64, i64)> {
        totals_at(self.sites.iter().map(|(probe, s)| (*probe, s)), &self.map)
    }
}

/// A statement's failed calls of one helper: (probe, line, col, helper).
pub type Place = (usize, u32, u32, u32);

/// Failures already reported, per place.
static REPORTED: Mutex<BTreeMap<Place, u64>> = Mutex::new(BTreeMap::new());

/// Failed calls so far per place (call sites of one statement in several
/// programs, such as a probe expanded per point, add up), with the last error.
fn totals(plan: &Plan, map: &libbpf_rs::MapHandle) -> BTreeMap<Place, (u64, i64)> {
    totals_at(sites(plan), map)
}

fn totals_at<'a>(
    sites: impl Iterator<Item = (usize, &'a HelperSite)>,
    map: &libbpf_rs::MapHandle,
) -> BTreeMap<Place, (u64, i64)> {
    let mut out: BTreeMap<Place, (u64, i64)> = BTreeMap::new();
    for (probe, site) in sites {
        let Ok(Some(cpus)) = map.lookup_percpu(&site.slot.to_le_bytes(), MapFlags::ANY) else { continue };
        let (count, code) = decode_helper_errors(cpus.iter().map(Vec::as_slice));
        if count == 0 {
            continue;
        }
        let total = out.entry((probe, site.span.line, site.span.col, site.helper)).or_insert((0, 0));
        total.0 += count;
        total.1 = code;
    }
    out
}

/// Report the failures new since the last report: a warning line each on
/// stderr, or a `helper_error` record under `-f json`.
pub fn report_new(session: &Session, plan: &Plan, loaded: &Loaded) {
    let Some(map) = &loaded.helper_errors else { return };
    let mut reported = REPORTED.lock().unwrap_or_else(|e| e.into_inner());
    for (place, (total, retcode)) in totals(plan, map) {
        let seen = reported.entry(place).or_insert(0);
        if total <= *seen {
            continue;
        }
        let (probe, line, col, helper) = place;
        let e = HelperError {
            file: &session.file_name,
            line,
            col,
            probe: plan.probes.get(probe).map_or("", String::as_str),
            helper: probes_ebpf::helpers::name(helper),
            count: total - *seen,
            retcode,
        };
        *seen = total;
        match sink::format() {
            sink::Format::Text => sink::report(&helper_error::diagnostic(&e)),
            sink::Format::Json => sink::raw(&helper_error::format_json(&e)),
        }
    }
}
