//! Many syscall tracepoints on one program. A probe() whose specs cover
//! many syscall tracepoints of one direction (`tracepoint:syscalls:sys_enter_*`,
//! `sys_exit_*`, a comma list, a mix) has them lowered as usual (once per syscall when the
//! body reads `e.probe` or `e.args`, with that syscall's name and format
//! fields), and the result becomes one program on
//! `tracepoint:raw_syscalls:sys_enter` (or `sys_exit`) that branches on the
//! syscall number (a binary search, about log2(N) comparisons). Attaching
//! and detaching cost one tracepoint instead of N. The records line up: a
//! `sys_enter_NAME` record is `{common header, int __syscall_nr, unsigned
//! long args...}` at offsets 8, 16, ... and the `raw_syscalls:sys_enter`
//! record `{common header, long id, unsigned long args[6]}`, so each body
//! reads its fields at the same offsets; likewise `ret` at 16 on exit.

use probes_ebpf::ir::{BinOp, Expr, Stmt, StmtKind};

use super::pending::Pending;
use crate::kernel::Kernel;
use crate::probes::spec::{ProbeKind, ProbeSpec};
use crate::probes::{tracepoint, AttachPoint, ProgramSpec};

/// The attach points of one probe() call that get programs together: the
/// points of one spec (`kind`, `name`), or a set of syscall tracepoints of
/// one direction gathered from its specs that go on `raw`.
pub struct Unit {
    pub kind: ProbeKind,
    pub name: String,
    pub points: Vec<AttachPoint>,
    pub raw: Option<AttachPoint>,
}

/// Cut one probe() call's expanded specs into units: the syscall
/// tracepoints of each direction, wherever they come from (a wildcard, a
/// comma list, both), join one dispatch unit when there are at least `min`
/// distinct syscalls with known numbers (`min` 0: never); a point repeated
/// by another spec keeps its own tracepoint, as does a syscall without a
/// known number. The other points stay with their spec.
pub fn units(specs: &[ProbeSpec], expanded: Vec<Vec<AttachPoint>>, min: usize, k: &dyn Kernel) -> Vec<Unit> {
    // Per direction: (first spec, contributing specs, points, raw point).
    let mut taken: Vec<Vec<bool>> = expanded.iter().map(|pts| vec![false; pts.len()]).collect();
    let mut groups: Vec<(usize, Vec<usize>, Vec<AttachPoint>, AttachPoint)> = Vec::new();
    for dir in ["enter", "exit"] {
        if min == 0 {
            break;
        }
        let mut seen = std::collections::HashSet::new();
        let mut at = Vec::new();
        for (i, pts) in expanded.iter().enumerate() {
            if specs[i].kind != ProbeKind::Tracepoint {
                continue;
            }
            for (j, p) in pts.iter().enumerate() {
                let syscall = tracepoint::syscall_of(p);
                if syscall.is_some_and(|(d, nr)| d == dir && seen.insert(nr)) {
                    at.push((i, j));
                }
            }
        }
        if at.len() < min {
            continue;
        }
        let Some(raw) = tracepoint::raw_syscalls(dir, k) else { continue };
        let mut from: Vec<usize> = at.iter().map(|&(i, _)| i).collect();
        from.dedup();
        let points = at.iter().map(|&(i, j)| expanded[i][j].clone()).collect();
        for &(i, j) in &at {
            taken[i][j] = true;
        }
        groups.push((from[0], from, points, raw));
    }
    let mut units = Vec::new();
    for (i, pts) in expanded.into_iter().enumerate() {
        for (first, from, points, raw) in groups.iter_mut() {
            if *first == i {
                let names: Vec<String> = from.iter().map(|&s| specs[s].full_name()).collect();
                units.push(Unit {
                    kind: ProbeKind::Tracepoint,
                    name: names.join(","),
                    points: std::mem::take(points),
                    raw: Some(raw.clone()),
                });
            }
        }
        let rest: Vec<AttachPoint> = pts.into_iter().zip(&taken[i]).filter(|(_, t)| !**t).map(|(p, _)| p).collect();
        if !rest.is_empty() {
            units.push(Unit { kind: specs[i].kind, name: specs[i].full_name(), points: rest, raw: None });
        }
    }
    units
}

/// The syscall number of a `syscalls:sys_{enter,exit}_NAME` point.
fn number(p: &AttachPoint) -> Option<i64> {
    tracepoint::syscall_of(p).map(|(_, nr)| nr)
}

/// Join the programs `pending[first..]` into one on `raw` (loaded as
/// `program`): per-syscall programs (the body reads `e.probe` or `e.args`)
/// become the arms of a branch on the syscall number; a single program for
/// every point (the same body for all) gets a test that the number is one
/// of its syscalls. Per-syscall programs stay apart when their locals
/// differ in type (an `e.args` field a string for one syscall, a number for
/// another).
pub fn merge(pending: &mut Vec<Pending>, first: usize, raw: AttachPoint, name: String, program: ProgramSpec) {
    let group = &pending[first..];
    if group.is_empty() || group.iter().any(|p| p.lowered.locals != group[0].lowered.locals) {
        return;
    }
    let mut group: Vec<Pending> = pending.drain(first..).collect();
    let syscalls = group.iter().map(|p| p.points.len()).sum();
    let body = if group.len() == 1 {
        let mut nrs: Vec<i64> = group[0].points.iter().filter_map(number).collect();
        nrs.sort_unstable();
        nrs.dedup();
        let mut body = member(&nrs);
        body.append(&mut group[0].lowered.body);
        body
    } else {
        let mut arms: Vec<(i64, Vec<Stmt>)> = Vec::with_capacity(group.len());
        for p in &mut group {
            let nr = p.points.first().and_then(number).unwrap_or(-1);
            arms.push((nr, std::mem::take(&mut p.lowered.body)));
        }
        arms.sort_by_key(|a| a.0);
        tree(&arms)
    };
    let mut uses = Vec::new();
    let mut sites = Vec::new();
    for p in &mut group {
        uses.append(&mut p.lowered.uses);
        sites.append(&mut p.lowered.sites);
    }
    let head = group.swap_remove(0);
    let mut lowered = head.lowered;
    lowered.body = body;
    lowered.uses = uses;
    lowered.sites = sites;
    pending.push(Pending {
        lowered,
        name,
        ptype: head.ptype,
        program,
        points: vec![raw],
        probe: head.probe,
        pos: head.pos,
        unplaced_source: head.unplaced_source,
        dispatch: syscalls,
        unfiltered: head.unfiltered,
    });
}

/// The syscall number: `long id` at offset 8 of both raw_syscalls records.
fn id() -> Box<Expr> {
    Box::new(Expr::CtxInt { offset: 8, size: 8, signed: true })
}

fn stmt(kind: StmtKind) -> Stmt {
    Stmt { kind, span: Default::default() }
}

/// Leave unless the syscall number is one of `nrs` (sorted): a binary
/// search over the runs of consecutive numbers (`sys_enter_*` is a handful
/// of runs, so the verifier walks a few dozen paths, not one per syscall).
fn member(nrs: &[i64]) -> Vec<Stmt> {
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for &nr in nrs {
        match runs.last_mut() {
            Some((_, hi)) if *hi + 1 == nr => *hi = nr,
            _ => runs.push((nr, nr)),
        }
    }
    in_runs(&runs)
}

fn in_runs(runs: &[(i64, i64)]) -> Vec<Stmt> {
    let leave_if = |op, bound| {
        stmt(StmtKind::If {
            cond: Expr::Binary(op, id(), Box::new(Expr::Int(bound))),
            then: vec![stmt(StmtKind::Return)],
            otherwise: vec![],
        })
    };
    match runs {
        [] => vec![stmt(StmtKind::Return)],
        [(lo, hi)] if lo == hi => vec![leave_if(BinOp::Ne, *lo)],
        [(lo, hi)] => vec![leave_if(BinOp::Lt, *lo), leave_if(BinOp::Gt, *hi)],
        _ => {
            let mid = runs.len() / 2;
            vec![stmt(StmtKind::If {
                cond: Expr::Binary(BinOp::Lt, id(), Box::new(Expr::Int(runs[mid].0))),
                then: in_runs(&runs[..mid]),
                otherwise: in_runs(&runs[mid..]),
            })]
        }
    }
}

/// `if id < pivot { left } else { right }` down to `if id == nr { body }`.
fn tree(arms: &[(i64, Vec<Stmt>)]) -> Vec<Stmt> {
    match arms {
        [] => vec![],
        [(nr, body)] => vec![stmt(StmtKind::If {
            cond: Expr::Binary(BinOp::Eq, id(), Box::new(Expr::Int(*nr))),
            then: body.clone(),
            otherwise: vec![],
        })],
        _ => {
            let mid = arms.len() / 2;
            vec![stmt(StmtKind::If {
                cond: Expr::Binary(BinOp::Lt, id(), Box::new(Expr::Int(arms[mid].0))),
                then: tree(&arms[..mid]),
                otherwise: tree(&arms[mid..]),
            })]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the statements leave (reach a `Return`) for syscall `nr`.
    fn leaves(body: &[Stmt], nr: i64) -> bool {
        body.iter().any(|s| match &s.kind {
            StmtKind::Return => true,
            StmtKind::If { cond: Expr::Binary(op, _, bound), then, otherwise } => {
                let Expr::Int(b) = **bound else { panic!("a bound is a constant") };
                let taken = match op {
                    BinOp::Eq => nr == b,
                    BinOp::Ne => nr != b,
                    BinOp::Lt => nr < b,
                    BinOp::Gt => nr > b,
                    _ => panic!("unexpected comparison"),
                };
                leaves(if taken { then } else { otherwise }, nr)
            }
            _ => false,
        })
    }

    #[test]
    fn the_member_test_keeps_exactly_the_listed_syscalls() {
        let sets: [&[i64]; 5] = [&[], &[5], &[0, 1, 2, 3], &[1, 2, 3, 7, 9, 10, 11, 40], &[0, 2, 4, 6, 8, 10, 12]];
        for nrs in sets {
            let body = member(nrs);
            for nr in -2..50 {
                assert_eq!(leaves(&body, nr), !nrs.contains(&nr), "syscall {nr} with {nrs:?}");
            }
        }
        // Consecutive numbers are one run: two comparisons, whatever their count.
        let all: Vec<i64> = (0..400).collect();
        assert_eq!(member(&all).len(), 2);
    }
}
