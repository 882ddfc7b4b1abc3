//! Statements after a `return` (and `exit()`, which lowers to a control
//! message and a return) get no code: the kernel verifier refuses
//! unreachable instructions, and they must not run.

mod support;

use probes_ebpf::ir::*;
use support::*;

fn out(k: i64) -> Stmt {
    st(store(0, vec![int(k)], int(k)))
}

fn ret() -> Stmt {
    st(StmtKind::Return)
}

fn run(body: Vec<Stmt>) -> Vec<i64> {
    let h = Harness::new(&program(vec![Ty::Int], vec![value_map(vec![Ty::Int], Ty::Int)], body));
    h.run0();
    h.entries(0).into_iter().map(|(k, _)| i64_at(&k, 0)).collect()
}

#[test]
fn nothing_after_a_return_runs_or_is_generated() {
    assert_eq!(run(vec![out(1), ret(), out(2), out(3)]), vec![1]);
}

#[test]
fn an_if_whose_branches_both_return_ends_the_block() {
    let c = bin(BinOp::Eq, ctx_i64(0), int(0));
    let body = vec![st(if_(c, vec![out(1), ret()], vec![out(2), ret()])), out(3)];
    assert_eq!(run(body), vec![1]);
}

#[test]
fn a_return_in_one_branch_leaves_the_other_running_on() {
    let c = bin(BinOp::Ne, ctx_i64(0), int(0));
    let body = vec![st(if_(c, vec![out(1), ret()], vec![out(2)])), out(3)];
    assert_eq!(run(body), vec![2, 3]);
}

#[test]
fn a_loop_that_returns_is_unrolled_once() {
    let body = vec![st(StmtKind::Repeat { var: 0, start: 0, count: 4, body: vec![out(1), ret()] }), out(2)];
    assert_eq!(run(body), vec![1]);
}
