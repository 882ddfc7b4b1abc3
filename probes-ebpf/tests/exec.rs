//! Generated code executed in the rbpf interpreter against stubbed helpers:
//! exact results for arithmetic, conditions, strings, maps and aggregations,
//! plus the code generator's errors.

mod support;

use probes_ebpf::generate;
use probes_ebpf::insn::{Insn, BPF_ATOMIC, BPF_STX};
use probes_ebpf::ir::*;
use support::*;

/// Map 0 of most tests: `out[int] = int`, where results are written.
const OUT: MapId = 0;

fn out_map() -> MapLayout {
    value_map(vec![Ty::Int], Ty::Int)
}

/// `out[k] = e`
fn out(k: i64, e: Expr) -> Stmt {
    st(store(OUT, vec![int(k)], e))
}

// ---------------------------------------------------------------------------
// Integer arithmetic

const VALUES: [i64; 14] = [
    0,
    1,
    -1,
    2,
    -2,
    7,
    -7,
    3,
    1 << 31,
    -(1 << 31),
    0xffff_ffff,
    0x1234_5678_9abc_def0,
    -0x1234_5678_9abc_def0,
    i64::MAX,
];

const ARITH: [BinOp; 14] = [
    BinOp::Add,
    BinOp::Sub,
    BinOp::Mul,
    BinOp::Div,
    BinOp::Mod,
    BinOp::And,
    BinOp::Or,
    BinOp::Xor,
    BinOp::Eq,
    BinOp::Ne,
    BinOp::Lt,
    BinOp::Le,
    BinOp::Gt,
    BinOp::Ge,
];

/// Rhai's result for `a op b` (wrapping where Rhai would raise an overflow).
fn reference(op: BinOp, a: i64, b: i64) -> Option<i64> {
    Some(match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        BinOp::Div if b == 0 => return None,
        BinOp::Div => a.wrapping_div(b),
        BinOp::Mod if b == 0 => return None,
        BinOp::Mod => a.wrapping_rem(b),
        BinOp::And => a & b,
        BinOp::Or => a | b,
        BinOp::Xor => a ^ b,
        BinOp::Shl => a.wrapping_shl(b as u32),
        BinOp::Shr => a.wrapping_shr(b as u32),
        BinOp::Eq => (a == b) as i64,
        BinOp::Ne => (a != b) as i64,
        BinOp::Lt => (a < b) as i64,
        BinOp::Le => (a <= b) as i64,
        BinOp::Gt => (a > b) as i64,
        BinOp::Ge => (a >= b) as i64,
    })
}

/// For each op: `a op b` with both operands from the context, with `b` a
/// constant, and with `a` a constant; stores under distinct keys.
fn check_binary(ops: &[BinOp], a: i64, b: i64) {
    let (ca, cb) = (ctx_i64(0), ctx_i64(8));
    let mut body = Vec::new();
    let mut expect = Vec::new();
    for (i, &op) in ops.iter().enumerate() {
        let Some(want) = reference(op, a, b) else { continue };
        let k = i as i64 * 3;
        body.push(out(k, bin(op, ca.clone(), cb.clone())));
        body.push(out(k + 1, bin(op, ca.clone(), int(b))));
        body.push(out(k + 2, bin(op, int(a), cb.clone())));
        expect.push((k, op, want));
    }
    let h = Harness::new(&program(vec![], vec![out_map()], body));
    h.run(&mut Ctx::new(16).i64(0, a).i64(8, b).0);
    for (k, op, want) in expect {
        for (j, form) in ["ctx op ctx", "ctx op const", "const op ctx"].iter().enumerate() {
            assert_eq!(h.at(OUT, k + j as i64), want, "{a} {op:?} {b} ({form})");
        }
    }
}

#[test]
fn binary_ops_follow_i64_semantics() {
    for &a in &VALUES {
        for &b in &VALUES {
            check_binary(&ARITH, a, b);
        }
    }
}

#[test]
fn signed_division_and_modulo() {
    // Truncating division; the remainder takes the dividend's sign.
    let cases = [(7, 2, 3, 1), (-7, 2, -3, -1), (7, -2, -3, 1), (-7, -2, 3, -1), (6, -3, -2, 0), (-1, 5, 0, -1)];
    for (a, b, q, r) in cases {
        let body =
            vec![out(0, bin(BinOp::Div, ctx_i64(0), ctx_i64(8))), out(1, bin(BinOp::Mod, ctx_i64(0), ctx_i64(8)))];
        let h = Harness::new(&program(vec![], vec![out_map()], body));
        h.run(&mut Ctx::new(16).i64(0, a).i64(8, b).0);
        assert_eq!((h.at(OUT, 0), h.at(OUT, 1)), (q, r), "{a} / {b}, {a} % {b}");
    }
}

#[test]
fn shifts_are_arithmetic_right() {
    let amounts = [0, 1, 3, 31, 32, 40, 63];
    for &a in &[1i64, -1, -16, 0x1234_5678_9abc_def0, -0x1234_5678_9abc_def0, i64::MIN, 5] {
        for &b in &amounts {
            check_binary(&[BinOp::Shl, BinOp::Shr], a, b);
        }
    }
    // Spot values.
    let h = Harness::new(&program(
        vec![],
        vec![out_map()],
        vec![
            out(0, bin(BinOp::Shr, ctx_i64(0), int(2))),
            out(1, bin(BinOp::Shl, int(1), int(40))),
            out(2, bin(BinOp::Shr, ctx_i64(0), ctx_i64(8))),
        ],
    ));
    h.run(&mut Ctx::new(16).i64(0, -16).i64(8, 63).0);
    assert_eq!((h.at(OUT, 0), h.at(OUT, 1), h.at(OUT, 2)), (-4, 1 << 40, -1));
}

#[test]
fn large_constants_need_ld_imm64() {
    let consts = [
        i32::MAX as i64,
        i32::MIN as i64,
        i32::MAX as i64 + 1,
        i32::MIN as i64 - 1,
        0xffff_ffff,
        0x1234_5678_9abc_def0,
        -0x1234_5678_9abc_def0,
        i64::MAX,
        i64::MIN,
        -1,
    ];
    let body: Vec<Stmt> = consts.iter().enumerate().map(|(i, &c)| out(i as i64, int(c))).collect();
    let prog = program(vec![], vec![out_map()], body);
    let h = Harness::new(&prog);
    h.run0();
    for (i, &c) in consts.iter().enumerate() {
        assert_eq!(h.at(OUT, i as i64), c, "constant {c:#x}");
    }
    // Only the values outside i32 take the two-slot form.
    let wide = h.gen.insns.iter().filter(|x| x.is_ld_imm64() && x.src == 0).count();
    assert_eq!(wide, 7);
}

#[test]
fn unary_ops() {
    for &a in &[0i64, 1, -1, 5, -9, 0x1234_5678_9abc_def0, i64::MAX] {
        let h = Harness::new(&program(
            vec![],
            vec![out_map()],
            vec![
                out(0, un(UnOp::Neg, ctx_i64(0))),
                out(1, un(UnOp::BitNot, ctx_i64(0))),
                out(2, un(UnOp::Not, ctx_i64(0))),
                out(3, un(UnOp::Not, un(UnOp::Not, ctx_i64(0)))),
                out(4, un(UnOp::Neg, un(UnOp::BitNot, ctx_i64(0)))),
            ],
        ));
        h.run(&mut Ctx::new(8).i64(0, a).0);
        assert_eq!(h.at(OUT, 0), a.wrapping_neg(), "-{a}");
        assert_eq!(h.at(OUT, 1), !a, "~{a}");
        assert_eq!(h.at(OUT, 2), (a == 0) as i64, "!{a}");
        assert_eq!(h.at(OUT, 3), (a != 0) as i64, "!!{a}");
        assert_eq!(h.at(OUT, 4), a.wrapping_add(1), "-~{a}");
    }
}

#[test]
fn comparisons_are_signed_in_branches() {
    let ops = [BinOp::Eq, BinOp::Ne, BinOp::Lt, BinOp::Le, BinOp::Gt, BinOp::Ge];
    let pairs = [(-1, 1), (1, -1), (-1, -1), (i64::MIN, i64::MAX), (0, 0x8000_0000), (-5, -(1 << 40)), (3, 3)];
    for (a, b) in pairs {
        let mut body = Vec::new();
        for (i, &op) in ops.iter().enumerate() {
            let k = i as i64 * 2;
            body.push(st(if_(bin(op, ctx_i64(0), ctx_i64(8)), vec![out(k, int(1))], vec![out(k, int(0))])));
            body.push(st(if_(bin(op, ctx_i64(0), int(b)), vec![out(k + 1, int(1))], vec![out(k + 1, int(0))])));
        }
        let h = Harness::new(&program(vec![], vec![out_map()], body));
        h.run(&mut Ctx::new(16).i64(0, a).i64(8, b).0);
        for (i, &op) in ops.iter().enumerate() {
            let want = reference(op, a, b).unwrap();
            assert_eq!(h.at(OUT, i as i64 * 2), want, "if {a} {op:?} {b}");
            assert_eq!(h.at(OUT, i as i64 * 2 + 1), want, "if {a} {op:?} const {b}");
        }
    }
}

// ---------------------------------------------------------------------------
// Short-circuit conditions

/// A boolean tree over leaves `Leaf(i)` = `m_i[0] != 0`, each leaf in its own
/// map so the stub's lookup counts show which leaves were evaluated.
#[derive(Clone)]
enum B {
    Leaf(u32),
    /// A leaf used as a plain integer (`m_i[0]`), truthy when non-zero.
    Raw(u32),
    And(Box<B>, Box<B>),
    Or(Box<B>, Box<B>),
    Not(Box<B>),
}

fn leaf_map(i: u32) -> MapId {
    1 + i
}

impl B {
    fn expr(&self) -> Expr {
        match self {
            B::Leaf(i) => bin(BinOp::Ne, map_get(leaf_map(*i), vec![int(0)]), int(0)),
            B::Raw(i) => map_get(leaf_map(*i), vec![int(0)]),
            B::And(a, b) => and(a.expr(), b.expr()),
            B::Or(a, b) => or(a.expr(), b.expr()),
            B::Not(a) => un(UnOp::Not, a.expr()),
        }
    }
    /// Value with short-circuit evaluation, recording evaluated leaves.
    fn eval(&self, vals: &[i64], seen: &mut Vec<u32>) -> bool {
        match self {
            B::Leaf(i) | B::Raw(i) => {
                seen.push(*i);
                vals[*i as usize] != 0
            }
            B::And(a, b) => a.eval(vals, seen) && b.eval(vals, seen),
            B::Or(a, b) => a.eval(vals, seen) || b.eval(vals, seen),
            B::Not(a) => !a.eval(vals, seen),
        }
    }
}

fn bx(b: B) -> Box<B> {
    Box::new(b)
}

#[test]
fn short_circuit_skips_the_right_side() {
    use B::*;
    let trees = [
        And(bx(Leaf(0)), bx(Leaf(1))),
        Or(bx(Leaf(0)), bx(Leaf(1))),
        And(bx(Raw(0)), bx(Raw(1))),
        Or(bx(Raw(0)), bx(Not(bx(Raw(1))))),
        And(bx(Or(bx(Leaf(0)), bx(Leaf(1)))), bx(Leaf(2))),
        Or(bx(And(bx(Leaf(0)), bx(Leaf(1)))), bx(Not(bx(Leaf(2))))),
        Not(bx(And(bx(Leaf(0)), bx(Or(bx(Raw(1)), bx(Leaf(2))))))),
        Or(bx(Not(bx(Or(bx(Leaf(0)), bx(Leaf(1)))))), bx(And(bx(Leaf(2)), bx(Not(bx(Raw(0))))))),
    ];
    let leaf_values = [0i64, 5, -3];
    for (t, tree) in trees.iter().enumerate() {
        let mut maps = vec![out_map()];
        maps.extend((0..3).map(|_| value_map(vec![Ty::Int], Ty::Int)));
        // As a value, and as an if condition.
        let body = vec![out(0, tree.expr()), st(if_(tree.expr(), vec![out(1, int(11))], vec![out(1, int(22))]))];
        let prog = program(vec![], maps, body);
        for combo in 0..27 {
            let vals: Vec<i64> = (0..3).map(|i| leaf_values[(combo / 3usize.pow(i)) % 3]).collect();
            let h = Harness::new(&prog);
            for i in 0..3u32 {
                h.put(leaf_map(i), &ik(0), &ik(vals[i as usize]));
            }
            h.run0();
            let mut seen = Vec::new();
            let want = tree.eval(&vals, &mut seen);
            assert_eq!(h.at(OUT, 0), want as i64, "tree {t} value with leaves {vals:?}");
            assert_eq!(h.at(OUT, 1), if want { 11 } else { 22 }, "tree {t} branch with leaves {vals:?}");
            for i in 0..3u32 {
                // Each leaf is looked up once per evaluated occurrence, in both statements.
                let n = seen.iter().filter(|&&s| s == i).count() as u64 * 2;
                assert_eq!(h.lookups(leaf_map(i)), n, "tree {t}: lookups of leaf {i} with leaves {vals:?}");
            }
        }
    }
}

#[test]
fn short_circuit_with_side_effect_in_map() {
    // `a == 1 && m[5] == 0`: m is not looked up when a != 1.
    let body = vec![
        out(0, and(bin(BinOp::Eq, ctx_i64(0), int(1)), bin(BinOp::Eq, map_get(1, vec![int(5)]), int(0)))),
        out(1, or(bin(BinOp::Eq, ctx_i64(0), int(1)), map_contains(1, vec![int(5)]))),
    ];
    let prog = program(vec![], vec![out_map(), value_map(vec![Ty::Int], Ty::Int)], body);
    let h = Harness::new(&prog);
    h.run(&mut Ctx::new(8).i64(0, 0).0);
    assert_eq!((h.at(OUT, 0), h.at(OUT, 1)), (0, 0));
    assert_eq!(h.lookups(1), 1, "only the || evaluates its right side");
    drop(h);
    let h = Harness::new(&prog);
    h.run(&mut Ctx::new(8).i64(0, 1).0);
    assert_eq!((h.at(OUT, 0), h.at(OUT, 1)), (1, 1));
    assert_eq!(h.lookups(1), 1, "only the && evaluates its right side");
}

// ---------------------------------------------------------------------------
// If-expressions, statements, locals, loops

#[test]
fn if_expression_values() {
    let pos = |off| bin(BinOp::Gt, ctx_i64(off), int(0));
    let body = vec![
        out(0, cond(pos(0), int(10), int(-10))),
        out(
            1,
            add(
                int(1),
                bin(BinOp::Mul, cond(pos(0), cond(pos(8), int(1), int(2)), cond(pos(8), int(3), int(4))), int(100)),
            ),
        ),
        // Branches with their own temporaries and helper calls.
        out(2, cond(and(pos(0), pos(8)), add(ctx_i64(0), ctx_i64(8)), map_get(1, vec![ctx_i64(0)]))),
        out(3, cond(un(UnOp::Not, pos(0)), int(0x1234_5678_9abc), sub_expr(ctx_i64(0), ctx_i64(8)))),
    ];
    let prog = program(vec![], vec![out_map(), value_map(vec![Ty::Int], Ty::Int)], body);
    for (a, b) in [(5, 7), (5, -7), (-5, 7), (-5, -7)] {
        let h = Harness::new(&prog);
        h.put(1, &ik(a), &ik(a * 1000));
        h.run(&mut Ctx::new(16).i64(0, a).i64(8, b).0);
        let nested = match (a > 0, b > 0) {
            (true, true) => 1,
            (true, false) => 2,
            (false, true) => 3,
            (false, false) => 4,
        };
        assert_eq!(h.at(OUT, 0), if a > 0 { 10 } else { -10 });
        assert_eq!(h.at(OUT, 1), 1 + nested * 100);
        assert_eq!(h.at(OUT, 2), if a > 0 && b > 0 { a + b } else { a * 1000 });
        assert_eq!(h.at(OUT, 3), if a <= 0 { 0x1234_5678_9abc } else { a - b });
    }
}

fn sub_expr(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Sub, a, b)
}

#[test]
fn string_if_expressions() {
    let pos = || bin(BinOp::Gt, ctx_i64(0), int(0));
    let strs = 1; // int -> Bytes(16)
    let by_str = 2; // Bytes(16) -> count
    let body = vec![
        st(set_local(0, cond(pos(), lit("positive"), Expr::Comm))),
        st(store(strs, vec![int(0)], local(0))),
        st(store(strs, vec![int(1)], cond(pos(), Expr::Comm, lit("not positive")))),
        st(agg(
            by_str,
            vec![cond(pos(), lit("p"), cond(bin(BinOp::Eq, ctx_i64(0), int(0)), lit("zero"), Expr::Comm))],
            AggOp::Count,
            None,
        )),
        // The branches differ in length: the comparison sees all of each.
        out(0, str_eq(cond(pos(), lit("a"), Expr::Comm), lit("b"))),
        out(1, str_eq(cond(pos(), lit("a"), Expr::Comm), lit("bash"))),
        out(2, str_eq(cond(pos(), lit("a"), Expr::Comm), lit("a"))),
    ];
    let maps = vec![out_map(), value_map(vec![Ty::Int], Ty::Bytes(16)), agg_map(vec![Ty::Bytes(16)], AggKind::Sum)];
    let prog = program(vec![Ty::Bytes(16)], maps, body);
    for (v, s0, s1, key, eqs) in [
        (5, "positive", "bash", "p", [0, 0, 1]),
        (0, "bash", "not positive", "zero", [0, 1, 0]),
        (-5, "bash", "not positive", "bash", [0, 1, 0]),
    ] {
        let h = Harness::new(&prog);
        h.run(&mut Ctx::new(8).i64(0, v).0);
        assert_eq!(h.value(strs, &ik(0)).unwrap(), sk(s0, 16), "local, a = {v}");
        assert_eq!(h.value(strs, &ik(1)).unwrap(), sk(s1, 16), "value, a = {v}");
        assert_eq!(h.entries(by_str), vec![(sk(key, 16), ik(1))], "key, a = {v}");
        assert_eq!([h.at(OUT, 0), h.at(OUT, 1), h.at(OUT, 2)], eqs, "comparisons, a = {v}");
    }
}

#[test]
fn if_else_if_chains_and_return() {
    // if a < 0 { out[0] = 1 } else if a == 0 { out[0] = 2; return } else { out[0] = 3 }
    // out[1] = 9
    let a = || ctx_i64(0);
    let body = vec![
        st(if_(
            bin(BinOp::Lt, a(), int(0)),
            vec![out(0, int(1))],
            vec![st(if_(
                bin(BinOp::Eq, a(), int(0)),
                vec![out(0, int(2)), st(StmtKind::Return)],
                vec![out(0, int(3))],
            ))],
        )),
        out(1, int(9)),
    ];
    let prog = program(vec![], vec![out_map()], body);
    for (v, want, tail) in [(-4, 1, Some(9)), (0, 2, None), (8, 3, Some(9))] {
        let h = Harness::new(&prog);
        assert_eq!(h.run(&mut Ctx::new(8).i64(0, v).0), 0);
        assert_eq!(h.at(OUT, 0), want);
        assert_eq!(h.value(OUT, &ik(1)).map(|v| i64_at(&v, 0)), tail);
    }
}

#[test]
fn integer_locals() {
    // x = a * 2; y = x + 3; x = y - 1; out = [x, y, x * y]
    let (x, y) = (0, 1);
    let body = vec![
        st(set_local(x, bin(BinOp::Mul, ctx_i64(0), int(2)))),
        st(set_local(y, add(local(x), int(3)))),
        st(set_local(x, sub_expr(local(y), int(1)))),
        out(0, local(x)),
        out(1, local(y)),
        out(2, bin(BinOp::Mul, local(x), local(y))),
    ];
    let h = Harness::new(&program(vec![Ty::Int, Ty::Int], vec![out_map()], body));
    h.run(&mut Ctx::new(8).i64(0, -21).0);
    assert_eq!((h.at(OUT, 0), h.at(OUT, 1), h.at(OUT, 2)), (-40, -39, 1560));
}

#[test]
fn string_locals() {
    // Locals: 0 Bytes(16), 1 Bytes(8), 2 Bytes(32), 3 Bytes(8).
    let strs = 1; // map: strs[int] = Bytes(32)
    let body = vec![
        st(set_local(0, lit("hello world!!"))),
        st(set_local(0, lit("hi"))), // shorter reassignment clears the tail
        st(store(strs, vec![int(0)], local(0))),
        st(set_local(1, Expr::Comm)),
        st(store(strs, vec![int(1)], local(1))),
        st(set_local(0, lit("sixteen chars!!"))),
        st(set_local(2, local(0))), // widen 16 -> 32
        st(store(strs, vec![int(2)], local(2))),
        st(set_local(3, local(0))), // narrow 16 -> 8 (truncates)
        st(store(strs, vec![int(3)], local(3))),
        st(set_local(2, lit("a literal longer than 24 chars"))),
        st(store(strs, vec![int(4)], local(2))),
        st(store(strs, vec![int(5)], lit("direct"))),
        st(store(strs, vec![int(6)], Expr::Comm)),
    ];
    let locals = vec![Ty::Bytes(16), Ty::Bytes(8), Ty::Bytes(32), Ty::Bytes(8)];
    let h = Harness::new(&program(locals, vec![out_map(), value_map(vec![Ty::Int], Ty::Bytes(32))], body));
    h.set_comm("systemd-journal");
    h.run0();
    let v = |k| h.value(strs, &ik(k)).unwrap();
    assert_eq!(v(0), sk("hi", 32));
    assert_eq!(v(1), sk("systemd", 32), "comm into 8 bytes: 7 chars and NUL");
    assert_eq!(v(2), sk("sixteen chars!!", 32));
    assert_eq!(v(3), sk("sixteen ", 32));
    assert_eq!(v(4), sk("a literal longer than 24 chars", 32));
    assert_eq!(v(5), sk("direct", 32));
    assert_eq!(v(6), sk("systemd-journal", 32));
}

#[test]
fn unrolled_repeat() {
    let (i, j, acc) = (0, 1, 2);
    let pairs = 1;
    let body = vec![
        st(set_local(acc, int(0))),
        st(StmtKind::Repeat {
            var: i,
            start: 3,
            count: 4,
            body: vec![st(set_local(acc, add(bin(BinOp::Mul, local(acc), int(10)), local(i))))],
        }),
        out(0, local(acc)),
        out(1, local(i)),
        st(StmtKind::Repeat {
            var: i,
            start: -1,
            count: 2,
            body: vec![st(StmtKind::Repeat {
                var: j,
                start: 0,
                count: 3,
                body: vec![st(agg(pairs, vec![local(i), local(j)], AggOp::Count, None))],
            })],
        }),
        st(StmtKind::Repeat { var: i, start: 0, count: 0, body: vec![out(2, int(1))] }),
    ];
    let prog = program(vec![Ty::Int; 3], vec![out_map(), agg_map(vec![Ty::Int, Ty::Int], AggKind::Sum)], body);
    let h = Harness::new(&prog);
    h.run0();
    h.run0();
    assert_eq!(h.at(OUT, 0), 3456);
    assert_eq!(h.at(OUT, 1), 6, "the loop variable keeps its last value");
    assert!(h.value(OUT, &ik(2)).is_none(), "a zero-count loop runs nothing");
    let mut keys: Vec<(i64, i64, i64)> =
        h.entries(pairs).iter().map(|(k, v)| (i64_at(k, 0), i64_at(k, 8), i64_at(v, 0))).collect();
    keys.sort();
    let want: Vec<(i64, i64, i64)> = (-1..1).flat_map(|a| (0..3).map(move |b| (a, b, 2))).collect();
    assert_eq!(keys, want);
}

// ---------------------------------------------------------------------------
// Context reads

#[test]
fn ctx_ints_of_every_width() {
    let ctx = Ctx::new(32)
        .bytes(0, &[0xff])
        .bytes(1, &[0x7f])
        .bytes(2, &0x8001u16.to_le_bytes())
        .bytes(4, &0x8000_0002u32.to_le_bytes())
        .bytes(8, &0xffff_ffff_ffff_fffeu64.to_le_bytes())
        .bytes(16, &0x7fffu16.to_le_bytes())
        .bytes(20, &0x7fff_ffffu32.to_le_bytes())
        .bytes(24, &0x8000_0000_0000_0000u64.to_le_bytes());
    let fields: [(u32, u32, bool, i64); 16] = [
        (0, 1, false, 255),
        (0, 1, true, -1),
        (1, 1, false, 127),
        (1, 1, true, 127),
        (2, 2, false, 0x8001),
        (2, 2, true, 0x8001 - 0x10000),
        (16, 2, false, 0x7fff),
        (16, 2, true, 0x7fff),
        (4, 4, false, 0x8000_0002),
        (4, 4, true, 0x8000_0002 - 0x1_0000_0000),
        (20, 4, false, 0x7fff_ffff),
        (20, 4, true, 0x7fff_ffff),
        (8, 8, false, -2),
        (8, 8, true, -2),
        (24, 8, true, i64::MIN),
        (3, 1, true, -128), // high byte of the u16 at 2
    ];
    let body = fields.iter().enumerate().map(|(i, &(o, s, sg, _))| out(i as i64, ctx_int(o, s, sg))).collect();
    let h = Harness::new(&program(vec![], vec![out_map()], body));
    h.run(&mut ctx.0.clone());
    for (i, &(o, s, sg, want)) in fields.iter().enumerate() {
        assert_eq!(h.at(OUT, i as i64), want, "offset {o} size {s} signed {sg}");
    }
}

#[test]
fn ctx_strings() {
    // Record: 0..16 char[16] comm; 16: __data_loc u32; 24: u64 pointer;
    // 32..: dynamic area.
    let path = b"/etc/passwd\0";
    let user = std::ffi::CString::new("user string").unwrap();
    let ctx = Ctx::new(64)
        .bytes(0, b"sshd\0\0\0\0\0\0\0\0\0\0\0\0")
        .u32(16, (path.len() as u32) << 16 | 32)
        .i64(24, user.as_ptr() as i64)
        .bytes(32, path);
    let m16 = 1; // key Bytes(16) -> count
    let m32 = 2; // key Bytes(32) -> count
    let m8 = 3; // key Bytes(8) -> count
    let count = |m, e| st(agg(m, vec![e], AggOp::Count, None));
    let body = vec![
        count(m16, Expr::CtxCharArray { offset: 0, len: 16 }),
        count(m8, Expr::CtxCharArray { offset: 0, len: 16 }),
        count(m32, Expr::CtxDataLocStr { offset: 16, max: 32 }),
        count(m8, Expr::CtxDataLocStr { offset: 16, max: 64 }),
        count(m16, Expr::CtxDataLocStr { offset: 16, max: 6 }),
        count(m32, Expr::ReadStr { ptr: Box::new(ctx_int(24, 8, false)), max: 32, mem: Memory::User }),
        count(m16, Expr::ReadStr { ptr: Box::new(ctx_int(24, 8, false)), max: 5, mem: Memory::Kernel }),
    ];
    let maps = vec![
        out_map(),
        agg_map(vec![Ty::Bytes(16)], AggKind::Sum),
        agg_map(vec![Ty::Bytes(32)], AggKind::Sum),
        agg_map(vec![Ty::Bytes(8)], AggKind::Sum),
    ];
    let h = Harness::new(&program(vec![], maps, body));
    h.run(&mut ctx.0.clone());
    h.run(&mut ctx.0.clone());
    assert_eq!(h.int(m16, &sk("sshd", 16)), 2);
    assert_eq!(h.int(m8, &sk("sshd", 8)), 2);
    assert_eq!(h.int(m32, &sk("/etc/passwd", 32)), 2);
    assert_eq!(h.int(m8, &sk("/etc/pa", 8)), 2, "a data_loc string is cut to the key's length");
    assert_eq!(h.int(m16, &sk("/etc/", 16)), 2, "max 6: five chars and NUL");
    assert_eq!(h.int(m32, &sk("user string", 32)), 2);
    assert_eq!(h.int(m16, &sk("user", 16)), 2);
    assert_eq!(h.entries(m16).len(), 3);
    assert_eq!(h.entries(m8).len(), 2);
    assert_eq!(h.entries(m32).len(), 2);
}

#[test]
fn builtins() {
    let bs = [
        (Builtin::Pid, TGID),
        (Builtin::Tid, TID),
        (Builtin::Uid, UID),
        (Builtin::Gid, GID),
        (Builtin::Cpu, CPU),
        (Builtin::Nsecs, NSECS),
        (Builtin::Cgroup, CGROUP),
        (Builtin::Rand, RAND),
        (Builtin::CurTask, TASK),
    ];
    let body = bs.iter().enumerate().map(|(i, (b, _))| out(i as i64, Expr::Builtin(*b))).collect();
    let h = Harness::new(&program(vec![], vec![out_map()], body));
    h.run0();
    for (i, (b, want)) in bs.iter().enumerate() {
        assert_eq!(h.at(OUT, i as i64) as u64, *want, "{b:?}");
    }
}

// ---------------------------------------------------------------------------
// String comparison

#[test]
fn str_eq_against_literals() {
    let lits = ["bash", "bas", "bashx", "", "b", "bash-and-more-chars"];
    for comm in ["bash", "", "bas", "a-much-longer-c"] {
        let mut body = Vec::new();
        for (i, l) in lits.iter().enumerate() {
            let k = i as i64 * 4;
            body.push(out(k, str_eq(Expr::Comm, lit(l))));
            body.push(out(k + 1, str_eq(lit(l), Expr::Comm)));
            body.push(out(k + 2, bin(BinOp::Ne, Expr::Comm, lit(l))));
            body.push(st(if_(bin(BinOp::Eq, Expr::Comm, lit(l)), vec![out(k + 3, int(1))], vec![out(k + 3, int(0))])));
        }
        let h = Harness::new(&program(vec![], vec![out_map()], body));
        h.set_comm(comm);
        h.run0();
        for (i, l) in lits.iter().enumerate() {
            let k = i as i64 * 4;
            let want = (comm == *l) as i64;
            assert_eq!(h.at(OUT, k), want, "comm {comm:?} == {l:?}");
            assert_eq!(h.at(OUT, k + 1), want, "{l:?} == comm {comm:?}");
            assert_eq!(h.at(OUT, k + 2), 1 - want, "comm {comm:?} != {l:?}");
            assert_eq!(h.at(OUT, k + 3), want, "if comm {comm:?} == {l:?}");
        }
    }
}

#[test]
fn str_eq_between_strings() {
    let pairs = [
        ("abc", "abc"),
        ("ab", "abc"),
        ("abcd", "abc"),
        ("", ""),
        ("", "a"),
        ("abcdefgh", "abcdefgh"),
        ("abcdefgh", "abcdefghi"),
        ("abcdefghi", "abcdefgh"),
        ("abcdefghijklmnop", "abcdefghijklmnop"),
        ("abcdefghijklmnopq", "abcdefghijklmnop"),
        ("abcdefghijklmno", "abcdefghijklmno"),
        ("abcdefghijklmno", "abcdefghijklmnX"),
    ];
    // Locals of different widths: 0 Bytes(8), 1 Bytes(16), 2 Bytes(24).
    let widths = [8u32, 16, 24];
    for (a, b) in pairs {
        for (la, &wa) in widths.iter().enumerate() {
            for (lb, &wb) in widths.iter().enumerate() {
                if la == lb || a.len() as u32 > wa || b.len() as u32 > wb {
                    continue;
                }
                let body = vec![
                    st(set_local(la as u32, lit(a))),
                    st(set_local(lb as u32, lit(b))),
                    out(0, str_eq(local(la as u32), local(lb as u32))),
                    out(1, bin(BinOp::Ne, local(la as u32), local(lb as u32))),
                    st(if_(
                        bin(BinOp::Eq, local(la as u32), local(lb as u32)),
                        vec![out(2, int(1))],
                        vec![out(2, int(0))],
                    )),
                    out(3, str_eq(local(la as u32), lit(b))),
                    out(4, str_eq(lit(a), lit(b))),
                ];
                let locals = widths.iter().map(|&w| Ty::Bytes(w)).collect();
                let h = Harness::new(&program(locals, vec![out_map()], body));
                h.run0();
                let want = (a == b) as i64;
                let what = format!("{a:?} (Bytes({wa})) vs {b:?} (Bytes({wb}))");
                assert_eq!(h.at(OUT, 0), want, "== {what}");
                assert_eq!(h.at(OUT, 1), 1 - want, "!= {what}");
                assert_eq!(h.at(OUT, 2), want, "if == {what}");
                assert_eq!(h.at(OUT, 3), want, "== literal {what}");
                assert_eq!(h.at(OUT, 4), want, "literal == literal {what}");
            }
        }
    }
}

#[test]
fn str_eq_with_ctx_strings() {
    let ctx = Ctx::new(48).bytes(0, b"kworker/0:1\0\0\0\0\0").u32(16, 6 << 16 | 24).bytes(24, b"sda1\0\0");
    let arr = || Expr::CtxCharArray { offset: 0, len: 16 };
    let dl = || Expr::CtxDataLocStr { offset: 16, max: 16 };
    let body = vec![
        out(0, str_eq(arr(), lit("kworker/0:1"))),
        out(1, str_eq(arr(), lit("kworker"))),
        out(2, str_eq(dl(), lit("sda1"))),
        out(3, str_eq(dl(), lit("sda"))),
        out(4, str_eq(dl(), arr())),
        out(5, str_eq(Expr::Comm, arr())),
    ];
    let h = Harness::new(&program(vec![], vec![out_map()], body));
    h.set_comm("kworker/0:1");
    h.run(&mut ctx.0.clone());
    let got: Vec<i64> = (0..6).map(|k| h.at(OUT, k)).collect();
    assert_eq!(got, [1, 0, 1, 0, 0, 1]);
}

// ---------------------------------------------------------------------------
// Maps

#[test]
fn map_store_get_contains_delete() {
    let m = 1; // int -> int
    let body = vec![
        out(0, map_get(m, vec![int(5)])),      // missing: 0
        out(1, map_contains(m, vec![int(5)])), // missing: 0
        st(store(m, vec![int(5)], int(-42))),
        st(store(m, vec![int(6)], int(0x1234_5678_9abc))),
        out(2, map_get(m, vec![int(5)])),
        out(3, map_contains(m, vec![int(5)])),
        st(store(m, vec![int(5)], add(map_get(m, vec![int(5)]), int(2)))), // overwrite
        out(4, map_get(m, vec![int(5)])),
        st(StmtKind::MapDelete { map: m, key: vec![int(5)] }),
        out(5, map_contains(m, vec![int(5)])),
        out(6, map_get(m, vec![int(5)])),
        out(7, map_contains(m, vec![int(6)])),
        st(StmtKind::MapDelete { map: m, key: vec![int(99)] }), // missing: no effect
        out(8, map_get(m, vec![sub_expr(int(10), int(4))])),
    ];
    let h = Harness::new(&program(vec![], vec![out_map(), value_map(vec![Ty::Int], Ty::Int)], body));
    h.run0();
    let got: Vec<i64> = (0..9).map(|k| h.at(OUT, k)).collect();
    assert_eq!(got, [0, 0, -42, 1, -40, 0, 0, 1, 0x1234_5678_9abc]);
    assert_eq!(h.entries(m), vec![(ik(6), ik(0x1234_5678_9abc))]);
}

#[test]
fn map_string_and_tuple_keys() {
    let by_comm = 1; // Bytes(16) -> int
    let tuple = 2; // (int, Bytes(16), int) -> int
    let strval = 3; // Bytes(8) -> Bytes(16)
    let keyless = 4; // () -> int
    let body = vec![
        st(store(by_comm, vec![Expr::Comm], int(7))),
        st(store(by_comm, vec![lit("other")], int(8))),
        out(0, map_get(by_comm, vec![lit("bash")])),
        out(1, map_get(by_comm, vec![lit("bas")])),
        out(2, map_contains(by_comm, vec![lit("other")])),
        st(store(tuple, vec![Expr::Builtin(Builtin::Pid), Expr::Comm, int(-5)], int(77))),
        out(3, map_get(tuple, vec![int(TGID as i64), lit("bash"), int(-5)])),
        out(4, map_get(tuple, vec![int(TGID as i64), lit("bash"), int(5)])),
        st(StmtKind::MapDelete { map: by_comm, key: vec![lit("other")] }),
        st(store(strval, vec![lit("k")], Expr::Comm)),
        st(store(keyless, vec![], int(99))),
        out(5, map_get(keyless, vec![])),
        out(6, map_contains(keyless, vec![])),
    ];
    let maps = vec![
        out_map(),
        value_map(vec![Ty::Bytes(16)], Ty::Int),
        value_map(vec![Ty::Int, Ty::Bytes(16), Ty::Int], Ty::Int),
        value_map(vec![Ty::Bytes(8)], Ty::Bytes(16)),
        value_map(vec![], Ty::Int),
    ];
    let h = Harness::new(&program(vec![], maps, body));
    h.run0();
    let got: Vec<i64> = (0..7).map(|k| h.at(OUT, k)).collect();
    assert_eq!(got, [7, 0, 1, 77, 0, 99, 1]);
    assert_eq!(h.entries(by_comm), vec![(sk("bash", 16), ik(7))]);
    assert_eq!(h.entries(tuple), vec![(key(&[ik(TGID as i64), sk("bash", 16), ik(-5)]), ik(77))]);
    assert_eq!(h.entries(strval), vec![(sk("k", 8), sk("bash", 16))]);
    assert_eq!(h.entries(keyless), vec![(vec![0; 4], ik(99))]);
}

#[test]
fn map_compound_updates() {
    // m[k] op= v for the ops that do not use an atomic add, from a missing
    // key (starts at 0) and from existing values.
    let m = 1;
    let k = || vec![ctx_i64(0)];
    let ops: [(BinOp, i64); 9] = [
        (BinOp::Sub, 5),
        (BinOp::Mul, -3),
        (BinOp::Or, 0x100),
        (BinOp::Xor, 0x1234_5678_9abc),
        (BinOp::Div, -7),
        (BinOp::Mod, 1000),
        (BinOp::Shl, 3),
        (BinOp::Shr, 2),
        (BinOp::And, -16),
    ];
    let body = ops.iter().map(|&(op, v)| st(update(m, k(), op, int(v)))).collect();
    let h = Harness::new(&program(vec![], vec![out_map(), value_map(vec![Ty::Int], Ty::Int)], body));
    let mut want = 0i64;
    for &(op, v) in &ops {
        want = reference(op, want, v).unwrap();
    }
    h.run(&mut Ctx::new(8).i64(0, 3).0);
    assert_eq!(h.at(m, 3), want);
    // Existing value, value from the context.
    let body = vec![
        st(update(m, vec![int(1)], BinOp::Sub, ctx_i64(0))),
        st(update(m, vec![int(2)], BinOp::Mul, ctx_i64(0))),
        st(update(m, vec![int(3)], BinOp::Div, ctx_i64(0))),
        st(update(m, vec![int(4)], BinOp::Mod, ctx_i64(0))),
    ];
    drop(h);
    let h = Harness::new(&program(vec![], vec![out_map(), value_map(vec![Ty::Int], Ty::Int)], body));
    for k in 1..=4 {
        h.put(m, &ik(k), &ik(-100));
    }
    h.run(&mut Ctx::new(8).i64(0, 7).0);
    h.run(&mut Ctx::new(8).i64(0, -3).0);
    assert_eq!(h.at(m, 1), -100 - 7 + 3);
    assert_eq!(h.at(m, 2), -100 * 7 * -3);
    assert_eq!(h.at(m, 3), -100 / 7 / -3);
    let rem = |a: i64, b: i64| a % b;
    assert_eq!(h.at(m, 4), rem(rem(-100, 7), -3));
    assert_eq!(rem(rem(-100, 7), -3), -2);
}

#[test]
fn map_update_add_is_atomic() {
    let prog = program(
        vec![],
        vec![out_map(), value_map(vec![Ty::Int], Ty::Int)],
        vec![st(update(1, vec![int(1)], BinOp::Add, ctx_i64(0)))],
    );
    let g = gen_checked(&prog);
    let atomics: Vec<&Insn> = g.insns.iter().filter(|x| x.code == BPF_STX | BPF_ATOMIC | 0x18).collect();
    assert_eq!(atomics.len(), 1, "{}", listing(&g));
    assert_eq!((atomics[0].dst, atomics[0].off, atomics[0].imm), (0, 0, 0), "lock *(u64 *)(r0 +0) += rX");
}

// ---------------------------------------------------------------------------
// Aggregations

/// Run `prog` once per value, with the value at ctx offset 0.
fn run_values(h: &Harness, values: &[i64]) {
    for &v in values {
        h.run(&mut Ctx::new(8).i64(0, v).0);
    }
}

#[test]
fn count_and_sum() {
    let (total, by_pid, by_comm, by_pair, sum) = (1, 2, 3, 4, 5);
    let v = || Some(ctx_i64(0));
    let body = vec![
        st(agg(total, vec![], AggOp::Count, None)),
        st(agg(by_pid, vec![Expr::Builtin(Builtin::Pid)], AggOp::Count, None)),
        st(agg(by_comm, vec![Expr::Comm], AggOp::Count, None)),
        st(agg(by_pair, vec![Expr::Comm, Expr::Builtin(Builtin::Tid)], AggOp::Count, None)),
        st(agg(sum, vec![ctx_i64(0)], AggOp::Sum, v())),
        st(agg(sum, vec![int(-1)], AggOp::Sum, v())),
    ];
    let maps = vec![
        out_map(),
        agg_map(vec![], AggKind::Sum),
        agg_map(vec![Ty::Int], AggKind::Sum),
        agg_map(vec![Ty::Bytes(16)], AggKind::Sum),
        agg_map(vec![Ty::Bytes(16), Ty::Int], AggKind::Sum),
        agg_map(vec![Ty::Int], AggKind::Sum),
    ];
    let h = Harness::new(&program(vec![], maps, body));
    run_values(&h, &[5, -12, 3, 5]);
    assert_eq!(h.entries(total), vec![(vec![0; 4], ik(4))]);
    assert_eq!(h.entries(by_pid), vec![(ik(TGID as i64), ik(4))]);
    assert_eq!(h.entries(by_comm), vec![(sk("bash", 16), ik(4))]);
    assert_eq!(h.entries(by_pair), vec![(key(&[sk("bash", 16), ik(TID as i64)]), ik(4))]);
    assert_eq!(h.at(sum, 5), 10);
    assert_eq!(h.at(sum, -12), -12);
    assert_eq!(h.at(sum, 3), 3);
    assert_eq!(h.at(sum, -1), 1);
}

#[test]
fn min_and_max() {
    let (mn, mx) = (1, 2);
    let body = vec![
        st(agg(mn, vec![int(0)], AggOp::Min, Some(ctx_i64(0)))),
        st(agg(mx, vec![int(0)], AggOp::Max, Some(ctx_i64(0)))),
    ];
    let prog = program(
        vec![],
        vec![out_map(), agg_map(vec![Ty::Int], AggKind::Min), agg_map(vec![Ty::Int], AggKind::Max)],
        body,
    );
    let cases: [(&[i64], i64, i64); 6] = [
        (&[10], 10, 10), // first value, positive: min is not 0
        (&[-7], -7, -7), // first value, negative: max is not 0
        (&[10, 3, 7], 3, 10),
        (&[-5, -3, -9], -9, -3),
        (&[0, i64::MIN, i64::MAX], i64::MIN, i64::MAX),
        (&[4, 4], 4, 4),
    ];
    for (values, want_min, want_max) in cases {
        let h = Harness::new(&prog);
        run_values(&h, values);
        assert_eq!(h.value(mn, &ik(0)).unwrap(), key(&[ik(want_min), ik(1)]), "min of {values:?}");
        assert_eq!(h.value(mx, &ik(0)).unwrap(), key(&[ik(want_max), ik(1)]), "max of {values:?}");
    }
}

#[test]
fn min_with_string_key() {
    let prog = program(
        vec![],
        vec![out_map(), agg_map(vec![Ty::Bytes(16)], AggKind::Min)],
        vec![st(agg(1, vec![Expr::Comm], AggOp::Min, Some(ctx_i64(0))))],
    );
    let h = Harness::new(&prog);
    run_values(&h, &[3, -2]);
    h.set_comm("zsh");
    run_values(&h, &[9]);
    assert_eq!(h.entries(1), vec![(sk("bash", 16), key(&[ik(-2), ik(1)])), (sk("zsh", 16), key(&[ik(9), ik(1)]))]);
}

#[test]
fn avg_and_stats() {
    let (avg, stats) = (1, 2);
    let body = vec![
        st(agg(avg, vec![], AggOp::Avg, Some(ctx_i64(0)))),
        st(agg(stats, vec![Expr::Comm, int(2)], AggOp::Stats, Some(ctx_i64(0)))),
    ];
    let maps = vec![out_map(), agg_map(vec![], AggKind::Avg), agg_map(vec![Ty::Bytes(16), Ty::Int], AggKind::Avg)];
    let h = Harness::new(&program(vec![], maps, body));
    run_values(&h, &[5, -12, 4]);
    assert_eq!(h.entries(avg), vec![(vec![0; 4], key(&[ik(3), ik(-3)]))]);
    assert_eq!(h.entries(stats), vec![(key(&[sk("bash", 16), ik(2)]), key(&[ik(3), ik(-3)]))]);
}

#[test]
fn hist_buckets() {
    let (keyless, by_comm, by_tuple) = (1, 2, 3);
    let v = || Some(ctx_i64(0));
    let body = vec![
        st(agg(keyless, vec![], AggOp::Hist, v())),
        st(agg(by_comm, vec![Expr::Comm], AggOp::Hist, v())),
        st(agg(by_tuple, vec![int(7), Expr::Comm], AggOp::Hist, v())),
    ];
    let maps = vec![
        out_map(),
        agg_map(vec![], AggKind::Hist),
        agg_map(vec![Ty::Bytes(16)], AggKind::Hist),
        agg_map(vec![Ty::Int, Ty::Bytes(16)], AggKind::Hist),
    ];
    let cases: [(i64, i64); 14] = [
        (-5, 0),
        (i64::MIN, 0),
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 3),
        (4, 4),
        (7, 4),
        (8, 5),
        (1023, 11),
        (1024, 12),
        (1 << 40, 42),
        ((1 << 41) - 1, 42),
        (i64::MAX, 64),
    ];
    for (v, bucket) in cases {
        let h = Harness::new(&program(vec![], maps.clone(), body.clone()));
        run_values(&h, &[v, v]);
        assert_eq!(h.entries(keyless), vec![(ik(bucket), ik(2))], "hist({v})");
        assert_eq!(h.entries(by_comm), vec![(key(&[sk("bash", 16), ik(bucket)]), ik(2))], "hist({v}) by comm");
        assert_eq!(
            h.entries(by_tuple),
            vec![(key(&[ik(7), sk("bash", 16), ik(bucket)]), ik(2))],
            "hist({v}) by (7, comm)"
        );
    }
    // All together in one map.
    let h = Harness::new(&program(vec![], maps.clone(), body.clone()));
    run_values(&h, &cases.iter().map(|c| c.0).collect::<Vec<_>>());
    let mut got: Vec<(i64, i64)> = h.entries(keyless).iter().map(|(k, v)| (i64_at(k, 0), i64_at(v, 0))).collect();
    got.sort();
    assert_eq!(got, [(0, 2), (1, 1), (2, 1), (3, 2), (4, 2), (5, 1), (11, 1), (12, 1), (42, 2), (64, 1)]);
}

#[test]
fn lhist_buckets() {
    // ((min, max, step), [(value, bucket)])
    type Case<'a> = ((i64, i64, i64), &'a [(i64, i64)]);
    let cases: [Case; 3] = [
        (
            (0, 100, 10),
            &[(-1, 0), (i64::MIN, 0), (0, 1), (5, 1), (9, 1), (10, 2), (99, 10), (100, 11), (1000, 11), (i64::MAX, 11)],
        ),
        ((-50, 50, 25), &[(-51, 0), (-50, 1), (-26, 1), (-25, 2), (0, 3), (49, 4), (50, 5), (51, 5)]),
        (
            (-(1 << 40), 1 << 40, 1 << 38),
            &[(-(1 << 40) - 1, 0), (-(1 << 40), 1), (0, 5), ((1 << 40) - 1, 8), (1 << 40, 9)],
        ),
    ];
    for ((min, max, step), values) in cases {
        let op = AggOp::Lhist { min, max, step };
        let body = vec![
            st(agg(1, vec![], op, Some(ctx_i64(0)))),
            st(agg(2, vec![Expr::Comm, ctx_i64(0)], op, Some(ctx_i64(0)))),
        ];
        let maps =
            vec![out_map(), agg_map(vec![], AggKind::Hist), agg_map(vec![Ty::Bytes(16), Ty::Int], AggKind::Hist)];
        for &(v, bucket) in values {
            let h = Harness::new(&program(vec![], maps.clone(), body.clone()));
            run_values(&h, &[v]);
            let what = format!("lhist({v}, {min}, {max}, {step})");
            assert_eq!(h.entries(1), vec![(ik(bucket), ik(1))], "{what}");
            assert_eq!(h.entries(2), vec![(key(&[sk("bash", 16), ik(v), ik(bucket)]), ik(1))], "{what} keyed");
        }
    }
}

// ---------------------------------------------------------------------------
// Control messages

#[test]
fn control_records() {
    let ring = 1;
    let body = vec![
        st(StmtKind::Control { ring, lost: 0, kind: 3, probe: 7, arg: bin(BinOp::Mul, ctx_i64(0), int(2)) }),
        st(if_(
            bin(BinOp::Lt, ctx_i64(0), int(0)),
            vec![st(StmtKind::Control { ring, lost: 0, kind: 0xffff_fffe, probe: 0, arg: int(i64::MIN) })],
            vec![],
        )),
    ];
    let h = Harness::new(&program(vec![], vec![out_map(), ringbuf_map()], body));
    run_values(&h, &[21, -4]);
    let rec = |kind: u32, probe: u32, arg: i64| Record {
        map: ring,
        bytes: [kind.to_le_bytes().as_slice(), &probe.to_le_bytes(), &arg.to_le_bytes()].concat(),
        flags: 0,
    };
    assert_eq!(h.records(), vec![rec(3, 7, 42), rec(3, 7, -8), rec(0xffff_fffe, 0, i64::MIN)]);
}

#[test]
fn emit_records() {
    let (ring, lost) = (1, 2);
    let fields = vec![
        ctx_i64(0),
        Expr::Comm,
        lit("hello"),
        int(-0x1234_5678_9abc),
        bin(BinOp::Eq, Expr::Comm, lit("bash")),
        Expr::CtxCharArray { offset: 8, len: 12 },
    ];
    let body = vec![
        st(StmtKind::Emit { ring, lost, wake: None, site: 9, probe: 3, fields, wake_bytes: 4096 }),
        st(StmtKind::Emit { ring, lost, wake: None, site: 0xffff_fff0, probe: 0, fields: vec![], wake_bytes: 1 }),
    ];
    let maps = vec![out_map(), ringbuf_map(), agg_map(vec![], AggKind::Sum)];
    let h = Harness::new(&program(vec![], maps, body));
    // The lost-records array has one slot per probe.
    for p in 1..4u32 {
        h.put(lost, &p.to_le_bytes(), &ik(0));
    }
    let ctx = || Ctx::new(24).i64(0, -77).bytes(8, b"abcdefghijkl").0;
    h.set_ring(100, false);
    h.run(&mut ctx());
    h.set_ring(4096, false);
    h.run(&mut ctx());
    let first = [
        9u32.to_le_bytes().as_slice(),
        &0u32.to_le_bytes(),
        &ik(-77),
        &sk("bash", 16),
        &sk("hello", 8),
        &ik(-0x1234_5678_9abc),
        &ik(1),
        &sk("abcdefghijkl", 16),
    ]
    .concat();
    let second = [0xffff_fff0u32.to_le_bytes(), 0u32.to_le_bytes()].concat();
    let rec = |bytes: &Vec<u8>, flags| Record { map: ring, bytes: bytes.clone(), flags };
    // Below wake_bytes pending: no wake-up (1); at or above: forced (2).
    assert_eq!(h.records(), vec![rec(&first, 1), rec(&second, 2), rec(&first, 2), rec(&second, 2)]);
    assert_eq!(h.int(lost, &3u32.to_le_bytes()), 0);
    // A full ring counts the loss in lost[probe].
    h.set_ring(0, true);
    h.run(&mut ctx());
    h.run(&mut ctx());
    assert_eq!(h.records().len(), 4);
    assert_eq!(h.int(lost, &3u32.to_le_bytes()), 2);
    assert_eq!(h.int(lost, &0u32.to_le_bytes()), 2);
    assert_eq!(h.int(lost, &1u32.to_le_bytes()), 0);
}

#[test]
fn emit_wakes_a_sleeping_reader_once() {
    // The reader raised the wake flag before sleeping: the first record
    // lowers it and forces a wake-up; the next ones are batched again (no
    // wake-up below wake_bytes) until the flag is raised anew.
    let (ring, lost, wake) = (1, 2, 3);
    let body =
        vec![st(StmtKind::Emit { ring, lost, wake: Some(wake), site: 5, probe: 0, fields: vec![], wake_bytes: 4096 })];
    let maps = vec![out_map(), ringbuf_map(), agg_map(vec![], AggKind::Sum), value_map(vec![], Ty::Int)];
    let h = Harness::new(&program(vec![], maps, body));
    h.put(lost, &0u32.to_le_bytes(), &ik(0));
    h.set_ring(100, false);
    h.run0();
    h.put(wake, &0u32.to_le_bytes(), &ik(1));
    h.run0();
    assert_eq!(h.int(wake, &0u32.to_le_bytes()), 0);
    h.run0();
    h.set_ring(4096, false);
    h.run0();
    assert_eq!(h.int(wake, &0u32.to_le_bytes()), 0);
    let flags: Vec<u64> = h.records().iter().map(|r| r.flags).collect();
    assert_eq!(flags, vec![1, 2, 1, 2]);
}

// ---------------------------------------------------------------------------
// Register pressure

/// `m[1] + (m[2] + (... + m[n]))`
fn right_nested(op: BinOp, n: i64) -> Expr {
    let leaf = |i| map_get(1, vec![int(i)]);
    (1..n).rev().fold(leaf(n), |acc, i| bin(op, leaf(i), acc))
}

#[test]
fn deep_expressions_spill() {
    let vals: Vec<i64> = (1..=10).map(|i| i * 1000 + i).collect();
    let body = vec![
        out(0, right_nested(BinOp::Add, 10)),
        out(1, right_nested(BinOp::Sub, 10)),
        out(2, right_nested(BinOp::Mul, 6)),
        // Left-nested: no pressure.
        out(3, (2..=10).fold(map_get(1, vec![int(1)]), |acc, i| add(acc, map_get(1, vec![int(i)])))),
        // Division (uses r1/r2 as scratch) and comparisons deep in the tree.
        out(
            4,
            add(
                map_get(1, vec![int(1)]),
                add(
                    map_get(1, vec![int(2)]),
                    add(
                        map_get(1, vec![int(3)]),
                        add(
                            bin(BinOp::Div, map_get(1, vec![int(10)]), map_get(1, vec![int(2)])),
                            add(
                                bin(BinOp::Lt, map_get(1, vec![int(4)]), map_get(1, vec![int(5)])),
                                cond(
                                    bin(BinOp::Gt, map_get(1, vec![int(6)]), map_get(1, vec![int(7)])),
                                    int(100),
                                    bin(BinOp::Mod, map_get(1, vec![int(9)]), map_get(1, vec![int(8)])),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    ];
    let h = Harness::new(&program(vec![], vec![out_map(), value_map(vec![Ty::Int], Ty::Int)], body));
    for (i, v) in vals.iter().enumerate() {
        h.put(1, &ik(i as i64 + 1), &ik(*v));
    }
    h.run0();
    let m = |i: usize| vals[i - 1];
    let sum: i64 = vals.iter().sum();
    let alt = (1..=10).rev().fold(0, |acc, i| m(i) - acc);
    let prod = (1..=6).rev().fold(1i64, |acc, i| m(i).wrapping_mul(acc));
    assert_eq!(h.at(OUT, 0), sum);
    assert_eq!(h.at(OUT, 1), alt);
    assert_eq!(h.at(OUT, 2), prod);
    assert_eq!(h.at(OUT, 3), sum);
    let tail = if m(6) > m(7) { 100 } else { m(9) % m(8) };
    assert_eq!(h.at(OUT, 4), m(1) + m(2) + m(3) + m(10) / m(2) + (m(4) < m(5)) as i64 + tail);
}

#[test]
fn deep_conditions_spill() {
    // if m[1] + (m[2] + (... + m[8])) == sum && m[1] < m[2] + (m[3] + (m[4] + m[5]))
    let body = vec![st(if_(
        and(
            bin(BinOp::Eq, right_nested(BinOp::Add, 8), int(36)),
            bin(
                BinOp::Lt,
                map_get(1, vec![int(1)]),
                add(
                    map_get(1, vec![int(2)]),
                    add(map_get(1, vec![int(3)]), add(map_get(1, vec![int(4)]), map_get(1, vec![int(5)]))),
                ),
            ),
        ),
        vec![out(0, int(1))],
        vec![out(0, int(0))],
    ))];
    let h = Harness::new(&program(vec![], vec![out_map(), value_map(vec![Ty::Int], Ty::Int)], body));
    for i in 1..=8 {
        h.put(1, &ik(i), &ik(i));
    }
    h.run0();
    assert_eq!(h.at(OUT, 0), 1);
}

// ---------------------------------------------------------------------------
// Errors

#[test]
fn too_much_stack_is_reported_at_the_statement() {
    let big = 1;
    let prog = program(
        vec![Ty::Int],
        vec![out_map(), agg_map(vec![Ty::Bytes(600)], AggKind::Sum)],
        vec![
            at(1, 1, set_local(0, int(1))),
            at(
                6,
                1,
                if_(
                    bin(BinOp::Eq, local(0), int(1)),
                    vec![at(7, 3, agg(big, vec![lit("x")], AggOp::Count, None))],
                    vec![],
                ),
            ),
        ],
    );
    let err = generate(&prog).unwrap_err();
    assert_eq!(err.span, sp(7, 3));
    assert!(err.message.contains("512 bytes"), "{}", err.message);
    assert!(err.to_string().starts_with("7:3: "), "{err}");

    // A string key that fits on its own but not next to another buffer.
    let prog = program(
        vec![Ty::Bytes(256)],
        vec![out_map(), value_map(vec![Ty::Bytes(256)], Ty::Int)],
        vec![at(3, 5, store(1, vec![local(0)], int(1)))],
    );
    assert_eq!(generate(&prog).unwrap_err().span, sp(3, 5));
}

#[test]
fn aggregation_errors_carry_the_span() {
    let maps = vec![out_map(), agg_map(vec![], AggKind::Hist), agg_map(vec![], AggKind::Min)];
    for (op, map) in [(AggOp::Hist, 1), (AggOp::Lhist { min: 0, max: 10, step: 1 }, 1), (AggOp::Min, 2)] {
        let prog = program(vec![], maps.clone(), vec![at(4, 9, agg(map, vec![], op, None))]);
        let err = generate(&prog).unwrap_err();
        assert_eq!(err.span, sp(4, 9), "{op:?} without a value: {err}");
    }
    for (min, max, step) in [(0, 10, 0), (10, 0, 1), (5, 5, 1), (0, 10, -1)] {
        let op = AggOp::Lhist { min, max, step };
        let prog = program(vec![], maps.clone(), vec![at(2, 4, agg(1, vec![], op, Some(int(1))))]);
        let err = generate(&prog).unwrap_err();
        assert_eq!(err.span, sp(2, 4), "{op:?}: {err}");
    }
}

#[test]
fn key_arity_mismatch_is_an_error() {
    let prog = program(
        vec![],
        vec![out_map(), value_map(vec![Ty::Int, Ty::Int], Ty::Int)],
        vec![at(2, 2, store(1, vec![int(1)], int(1)))],
    );
    assert_eq!(generate(&prog).unwrap_err().span, sp(2, 2));
}

#[test]
fn too_long_jumps_are_errors() {
    // An if whose body is longer than a 16-bit jump offset.
    let body = vec![at(
        3,
        1,
        if_(
            bin(BinOp::Eq, ctx_i64(0), int(1)),
            vec![st(StmtKind::Repeat { var: 0, start: 0, count: 2500, body: vec![out(0, local(0))] })],
            vec![],
        ),
    )];
    let prog = program(vec![Ty::Int], vec![out_map()], body);
    // Reported at the if, rather than wrapping the 16-bit offset.
    let err = generate(&prog).unwrap_err();
    assert_eq!(err.span, sp(3, 1), "{err}");
    assert!(err.message.contains("jump"), "{err}");
}

#[test]
fn unrolled_loops_are_bounded() {
    let body = vec![at(5, 2, StmtKind::Repeat { var: 0, start: 0, count: 100_000, body: vec![out(0, local(0))] })];
    let err = generate(&program(vec![Ty::Int], vec![out_map()], body)).unwrap_err();
    assert_eq!(err.span, sp(5, 2));
}

// ---------------------------------------------------------------------------
// Rhai's arithmetic errors (Program::arith_errors)

/// Rhai's result of `a op b`, `None` where Rhai raises an error.
fn rhai_checked(op: BinOp, a: i64, b: i64) -> Option<i64> {
    match op {
        BinOp::Add => a.checked_add(b),
        BinOp::Sub => a.checked_sub(b),
        BinOp::Mul => a.checked_mul(b),
        BinOp::Div => a.checked_div(b),
        BinOp::Mod => a.checked_rem(b),
        _ => unreachable!(),
    }
}

#[test]
fn checked_arithmetic_stores_rhais_result_or_reports_its_error() {
    use probes_ebpf::record::{decode_arith_error, CONTROL_ERROR};
    let values = [
        0,
        1,
        -1,
        2,
        -3,
        7,
        1 << 31,
        -(1 << 31),
        3_037_000_499,
        3_037_000_500,
        -3_037_000_500,
        i64::MAX,
        i64::MIN,
        i64::MAX / 2,
        i64::MIN / 2 - 1,
    ];
    let ops = [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Mod];
    let (ring, lost) = (1, 2);
    for &a in &values {
        for &b in &values {
            for &op in &ops {
                // Each form in a program of its own: an error ends the program.
                let forms = [bin(op, ctx_i64(0), ctx_i64(8)), bin(op, ctx_i64(0), int(b)), bin(op, int(a), ctx_i64(8))];
                for (j, e) in forms.into_iter().enumerate() {
                    if j == 1 && i32::try_from(b).is_err() {
                        continue;
                    }
                    let body = vec![at(3, 5, store(OUT, vec![int(0)], e))];
                    let mut prog = program(vec![], vec![out_map(), ringbuf_map(), value_map(vec![], Ty::Int)], body);
                    prog.arith_errors = Some((ring, lost, 4));
                    let h = Harness::new(&prog);
                    h.run(&mut Ctx::new(16).i64(0, a).i64(8, b).0);
                    let what = format!("{a} {op:?} {b} (form {j})");
                    match rhai_checked(op, a, b) {
                        Some(want) => {
                            assert_eq!(h.at(OUT, 0), want, "{what}");
                            assert!(h.records().is_empty(), "{what}: {:?}", h.records());
                        }
                        None => {
                            assert!(h.entries(OUT).is_empty(), "{what}: stored {:?}", h.entries(OUT));
                            let recs = h.records();
                            assert_eq!(recs.len(), 1, "{what}");
                            let b = &recs[0].bytes;
                            assert_eq!(u32::from_le_bytes(b[0..4].try_into().unwrap()), CONTROL_ERROR, "{what}");
                            assert_eq!(u32::from_le_bytes(b[4..8].try_into().unwrap()), 4, "{what}");
                            let (text, line, col) = decode_arith_error(i64_at(b, 8));
                            assert_eq!((line, col), (3, 5), "{what}");
                            let expected = match op {
                                BinOp::Add => "Addition overflow",
                                BinOp::Sub => "Subtraction overflow",
                                BinOp::Mul => "Multiplication overflow",
                                BinOp::Div if b_is_zero(&what) => "Division by zero",
                                BinOp::Div => "Division overflow",
                                _ => "Modulo division by zero or overflow",
                            };
                            assert_eq!(text, expected, "{what}");
                        }
                    }
                }
            }
        }
    }
}

fn b_is_zero(what: &str) -> bool {
    what.split(' ').nth(2) == Some("0")
}
