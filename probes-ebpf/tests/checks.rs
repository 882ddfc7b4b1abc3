//! `-k` / `-kk`: failed helper calls counted per call site. Without checks
//! the code is what it always was; `-k` checks map updates and deletes,
//! `-kk` memory reads too, and a failure adds to its site's count and keeps
//! the error.

mod support;

use probes_ebpf::helpers as h;
use probes_ebpf::ir::*;
use support::*;

const OUT: MapId = 0;
const ERRORS: MapId = 1;

/// `m[1] = *(u64 *)addr; m.remove(7)` at 2:5 and 3:5, counting into map 1.
fn reads_and_deletes(addr: i64, checks: Option<HelperChecks>) -> Program {
    let read = Expr::ReadMem { addr: Box::new(int(addr)), size: 8, signed: false, mem: Memory::Kernel };
    let mut p = program(
        vec![],
        vec![value_map(vec![Ty::Int], Ty::Int), MapLayout { key: vec![], value: ValueKind::Agg(AggKind::Avg) }],
        vec![at(2, 5, store(OUT, vec![int(1)], read)), at(3, 5, StmtKind::MapDelete { map: OUT, key: vec![int(7)] })],
    );
    p.helper_checks = checks;
    p
}

fn checks(reads: bool) -> Option<HelperChecks> {
    Some(HelperChecks { map: ERRORS, first_slot: 0, reads })
}

/// Slot 0 of the counters as (count, last error).
fn slot0(h: &Harness) -> (i64, i64) {
    let v = h.value(ERRORS, &[0; 4]).expect("slot 0");
    (i64_at(&v, 0), i64_at(&v, 8))
}

#[test]
fn without_checks_nothing_is_added() {
    let plain = gen_checked(&reads_and_deletes(0, None));
    assert!(plain.helper_sites.is_empty());
    assert!(!plain.map_relocs.iter().any(|&(_, m)| m == ERRORS), "no reference to the counters");
    // -k on a program whose only fallible calls are reads and a delete of
    // a key that may be missing: the reads stay unchecked.
    let k = gen_checked(&reads_and_deletes(0, checks(false)));
    let sites: Vec<(u32, u32)> = k.helper_sites.iter().map(|s| (s.slot, s.helper)).collect();
    assert_eq!(sites, vec![(0, h::MAP_UPDATE_ELEM), (1, h::MAP_DELETE_ELEM)]);
    assert!(k.insns.len() > plain.insns.len());
    let kk = gen_checked(&reads_and_deletes(0, checks(true)));
    let sites: Vec<(u32, Span)> = kk.helper_sites.iter().map(|s| (s.helper, s.span)).collect();
    assert_eq!(
        sites,
        vec![(h::PROBE_READ_KERNEL, sp(2, 5)), (h::MAP_UPDATE_ELEM, sp(2, 5)), (h::MAP_DELETE_ELEM, sp(3, 5))]
    );
}

#[test]
fn sites_of_a_later_program_start_at_its_first_slot() {
    let g = gen_checked(&reads_and_deletes(0, Some(HelperChecks { map: ERRORS, first_slot: 5, reads: true })));
    assert_eq!(g.helper_sites.iter().map(|s| s.slot).collect::<Vec<_>>(), vec![5, 6, 7]);
}

#[test]
fn a_failed_read_is_counted_with_its_error_under_kk_only() {
    let h = Harness::new(&reads_and_deletes(0, checks(true)));
    for slot in 1..3u32 {
        h.put(ERRORS, &slot.to_le_bytes(), &[0; 16]);
    }
    h.run0();
    h.run0();
    assert_eq!(slot0(&h), (2, EFAULT), "two failed reads of address 0");
    assert_eq!(h.at(OUT, 1), 0, "a failed read gives 0");
    let v = h.value(ERRORS, &2u32.to_le_bytes()).unwrap();
    assert_eq!(i64_at(&v, 0), 0, "deleting a missing key is not a failure");
    drop(h);

    let h = Harness::new(&reads_and_deletes(0, checks(false)));
    h.run0();
    assert_eq!(slot0(&h), (0, 0), "-k leaves reads unchecked: slot 0 is the update, which worked");
}
