//! Generated code has no unreachable instructions (the verifier rejects
//! them): `return;` at the end of a probe, before other statements, in both
//! branches of an `if`, or in a loop body.

mod support;

use probes_ebpf::insn::{Insn, BPF_DW, BPF_IMM, BPF_JMP, BPF_JMP32, BPF_LD};
use probes_ebpf::ir::*;
use support::*;

/// Indexes of instructions no path from the entry reaches.
fn unreachable(insns: &[Insn]) -> Vec<usize> {
    let n = insns.len();
    let mut seen = vec![false; n];
    let mut second_half = vec![false; n];
    let mut todo = vec![0usize];
    while let Some(i) = todo.pop() {
        if i >= n || seen[i] {
            continue;
        }
        seen[i] = true;
        let c = insns[i].code;
        if c == BPF_LD | BPF_DW | BPF_IMM {
            if i + 1 < n {
                second_half[i + 1] = true;
            }
            todo.push(i + 2);
            continue;
        }
        let class = c & 0x07;
        if class == BPF_JMP || class == BPF_JMP32 {
            let target = (i as i64 + 1 + insns[i].off as i64) as usize;
            match c & 0xf0 {
                0x90 => {}                                     // exit
                0x80 => todo.push(i + 1),                      // call
                0x00 if class == BPF_JMP => todo.push(target), // ja
                _ => {
                    todo.push(i + 1);
                    todo.push(target);
                }
            }
            continue;
        }
        todo.push(i + 1);
    }
    (0..n).filter(|&i| !seen[i] && !second_half[i]).collect()
}

fn check(body: Vec<Stmt>) {
    let prog = program(vec![Ty::Int], vec![value_map(vec![Ty::Int], Ty::Int)], body);
    let g = gen_checked(&prog);
    let dead = unreachable(&g.insns);
    assert!(dead.is_empty(), "unreachable instructions {dead:?}\n{}", listing(&g));
}

fn ret() -> Stmt {
    st(StmtKind::Return)
}

fn write() -> Stmt {
    st(store(0, vec![int(1)], int(2)))
}

#[test]
fn return_at_the_end() {
    check(vec![write(), ret()]);
}

#[test]
fn return_before_other_statements() {
    check(vec![write(), ret(), write(), write()]);
}

#[test]
fn return_in_both_branches() {
    let c = bin(BinOp::Gt, ctx_i64(0), int(3));
    check(vec![st(if_(c.clone(), vec![ret()], vec![write(), ret()])), write()]);
    check(vec![st(if_(c.clone(), vec![ret()], vec![write()])), write()]);
    check(vec![st(if_(c, vec![write(), ret(), write()], vec![])), ret()]);
}

#[test]
fn return_in_a_loop_body() {
    check(vec![st(StmtKind::Repeat { var: 0, start: 0, count: 4, body: vec![write(), ret()] }), write()]);
    check(vec![st(StmtKind::Repeat { var: 0, start: 0, count: 0, body: vec![ret()] }), write()]);
}
