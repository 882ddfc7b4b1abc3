//! `quantiles(x)`'s bucket index as generated BPF, executed in rbpf: for
//! every value tried, the kernel side puts it in the same bucket as
//! `probes_ebpf::quantile::bucket`, keyless and keyed.

mod support;

use probes_ebpf::ir::*;
use probes_ebpf::quantile;
use support::*;

/// Values around every power of two, odd ones between, the extremes.
fn values() -> Vec<i64> {
    let mut v = vec![i64::MIN, -1000, -1, 0, 1, 2, 63, 64, 65, 127, 128, 129, 255, 256, 1000, i64::MAX - 1, i64::MAX];
    for e in 1..63 {
        let p = 1i64 << e;
        v.extend([p - 1, p, p + 1, p + p / 3, p + p / 2 + 7, p + (p - 1) / 64 * 63]);
    }
    v
}

#[test]
fn kernel_buckets_match_userspace() {
    let (keyless, keyed) = (1, 2);
    let v = || Some(ctx_i64(0));
    let op = AggOp::Quantiles { unit_ns: 1 };
    let body = vec![st(agg(keyless, vec![], op, v())), st(agg(keyed, vec![Expr::Comm], op, v()))];
    let maps = vec![
        value_map(vec![Ty::Int], Ty::Int),
        agg_map(vec![], AggKind::Hist),
        agg_map(vec![Ty::Bytes(16)], AggKind::Hist),
    ];
    let prog = program(vec![], maps, body);
    gen_checked(&prog);
    for v in values() {
        let h = Harness::new(&prog);
        h.run(&mut Ctx::new(8).i64(0, v).0);
        h.run(&mut Ctx::new(8).i64(0, v).0);
        let want = quantile::bucket(v) as i64;
        assert_eq!(h.entries(keyless), vec![(ik(want), ik(2))], "quantiles({v})");
        assert_eq!(h.entries(keyed), vec![(key(&[sk("bash", 16), ik(want)]), ik(2))], "quantiles({v}) by comm");
    }
}

#[test]
fn one_map_gathers_all_buckets() {
    let op = AggOp::Quantiles { unit_ns: 0 };
    let body = vec![st(agg(1, vec![], op, Some(ctx_i64(0))))];
    let maps = vec![value_map(vec![Ty::Int], Ty::Int), agg_map(vec![], AggKind::Hist)];
    let h = Harness::new(&program(vec![], maps, body));
    let vals: Vec<i64> = (1..=2000).map(|i| i * 37).collect();
    for &v in &vals {
        h.run(&mut Ctx::new(8).i64(0, v).0);
    }
    let mut counts = vec![0u64; quantile::BUCKETS];
    for (k, c) in h.entries(1) {
        counts[i64_at(&k, 0) as usize] += i64_at(&c, 0) as u64;
    }
    for p in [50.0, 90.0, 99.0, 99.9] {
        let truth = vals[((p / 100.0) * vals.len() as f64).ceil() as usize - 1] as f64;
        let got = quantile::percentile(&counts, p).unwrap() as f64;
        assert!((got - truth).abs() / truth <= 0.01, "p{p}: {got} vs {truth}");
    }
}
