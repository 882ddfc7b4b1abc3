//! Kernel reads of aggregation maps (`let v = m[k]`) combine the per-CPU
//! slots the way userspace prints them: sums for count/sum, the average for
//! avg/stats (signed), the best seen value for min/max.

mod support;

use probes_ebpf::generate;
use probes_ebpf::ir::*;
use support::*;

const OUT: MapId = 0;

/// `{count, total}` / `{value, seen}` slots.
fn pair(a: i64, b: i64) -> Vec<u8> {
    key(&[ik(a), ik(b)])
}

fn reader(maps: Vec<MapLayout>, reads: &[(i64, MapId, Vec<Expr>)]) -> Program {
    let mut all = vec![value_map(vec![Ty::Int], Ty::Int)];
    all.extend(maps);
    let body = reads.iter().map(|(k, m, key)| st(store(OUT, vec![int(*k)], map_get(*m, key.clone())))).collect();
    program(vec![], all, body)
}

#[test]
fn sums_and_counts_add_every_cpu() {
    let prog = reader(
        vec![agg_map(vec![Ty::Int], AggKind::Sum), agg_map(vec![], AggKind::Sum)],
        &[(1, 1, vec![int(7)]), (2, 1, vec![int(8)]), (3, 2, vec![])],
    );
    let h = Harness::new(&prog);
    h.put(1, &ik(7), &ik(5));
    h.put_cpu1(1, &ik(7), &ik(-2));
    h.put_cpu1(1, &ik(8), &ik(4)); // only on the second CPU
    h.put(2, &[0; 4], &ik(3));
    h.put_cpu1(2, &[0; 4], &ik(9));
    h.run0();
    assert_eq!((h.at(OUT, 1), h.at(OUT, 2), h.at(OUT, 3)), (3, 4, 12));
}

#[test]
fn averages_are_signed_and_combined() {
    let prog = reader(
        vec![agg_map(vec![], AggKind::Avg), agg_map(vec![Ty::Int], AggKind::Avg)],
        &[(1, 1, vec![]), (2, 2, vec![int(1)]), (3, 2, vec![int(99)])],
    );
    let h = Harness::new(&prog);
    // avg(-1), avg(-1) on one CPU, avg(-10) on the other: -12 / 3 = -4.
    h.put(1, &[0; 4], &pair(2, -2));
    h.put_cpu1(1, &[0; 4], &pair(1, -10));
    // 7 / 2 = 3 (truncated, as printed).
    h.put(2, &ik(1), &pair(1, 3));
    h.put_cpu1(2, &ik(1), &pair(1, 4));
    h.run0();
    assert_eq!(h.at(OUT, 1), -4);
    assert_eq!(h.at(OUT, 2), 3);
    assert_eq!(h.at(OUT, 3), 0, "a missing key reads 0");
}

#[test]
fn min_and_max_take_the_best_seen_slot() {
    let prog = reader(
        vec![agg_map(vec![Ty::Int], AggKind::Min), agg_map(vec![Ty::Int], AggKind::Max)],
        &[(1, 1, vec![int(0)]), (2, 2, vec![int(0)]), (3, 1, vec![int(1)]), (4, 2, vec![int(1)]), (5, 1, vec![int(2)])],
    );
    let h = Harness::new(&prog);
    h.put(1, &ik(0), &pair(-3, 1));
    h.put_cpu1(1, &ik(0), &pair(-8, 1));
    h.put(2, &ik(0), &pair(-3, 1));
    h.put_cpu1(2, &ik(0), &pair(-8, 1));
    // A slot that saw nothing (zeroed) doesn't count: min stays 5, max 5.
    h.put(1, &ik(1), &pair(0, 0));
    h.put_cpu1(1, &ik(1), &pair(5, 1));
    h.put(2, &ik(1), &pair(5, 1));
    h.put_cpu1(2, &ik(1), &pair(0, 0));
    h.run0();
    assert_eq!((h.at(OUT, 1), h.at(OUT, 2)), (-8, -3));
    assert_eq!((h.at(OUT, 3), h.at(OUT, 4)), (5, 5));
    assert_eq!(h.at(OUT, 5), 0, "nothing seen reads 0");
}

#[test]
fn one_lookup_per_possible_cpu() {
    let mut prog = reader(vec![agg_map(vec![Ty::Int], AggKind::Sum)], &[(1, 1, vec![int(1)])]);
    prog.possible_cpus = 4;
    let h = Harness::new(&prog);
    h.put(1, &ik(1), &ik(2));
    h.put_cpu1(1, &ik(1), &ik(3));
    h.run0();
    assert_eq!(h.at(OUT, 1), 5);
    assert_eq!(h.lookups(1), 4);
}

#[test]
fn histograms_are_not_numbers() {
    let prog = reader(vec![agg_map(vec![Ty::Int], AggKind::Hist)], &[(1, 1, vec![int(1)])]);
    let e = generate(&prog).unwrap_err();
    assert!(e.message.contains("histogram"), "{e}");
}
