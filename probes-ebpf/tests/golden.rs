//! Golden disassembly of representative probes. The expected listings live in
//! `tests/golden/*.txt`; run with `UPDATE_GOLDEN=1` to rewrite them after an
//! intended change to the generated code (and read the diff before keeping it).

mod support;

use std::path::PathBuf;

use probes_ebpf::disasm::disassemble;
use probes_ebpf::ir::*;
use support::*;

/// The listing: a header, then one line per instruction with the script
/// position shown where it changes.
fn render(title: &str, prog: &Program) -> String {
    let g = gen_checked(prog);
    let mut out = format!("# {title}\n# {} instructions, {} bytes of stack\n", g.insns.len(), g.stack_size);
    let mut last = None;
    for (i, text) in disassemble(&g.insns) {
        let span = g.spans[i];
        if last != Some(span) {
            out.push_str(&format!("; {span}\n"));
            last = Some(span);
        }
        out.push_str(&format!("{i:4}: {text}\n"));
    }
    out
}

/// A line diff (longest common subsequence), `-` expected, `+` actual.
fn diff(expected: &str, actual: &str) -> String {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!("  {}\n", a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        } else {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        }
    }
    out
}

fn check(name: &str, title: &str, prog: &Program) {
    let actual = render(title, prog);
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "golden", &format!("{name}.txt")].iter().collect();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1 to create it)", path.display()));
    if expected != actual {
        panic!(
            "{name}: generated code differs from {} (UPDATE_GOLDEN=1 rewrites it):\n{}",
            path.display(),
            diff(&expected, &actual)
        );
    }
}

/// `@[pid] = count()`
#[test]
fn count_by_pid() {
    let prog = program(
        vec![],
        vec![agg_map(vec![Ty::Int], AggKind::Sum)],
        vec![at(1, 1, agg(0, vec![Expr::Builtin(Builtin::Pid)], AggOp::Count, None))],
    );
    check("count_by_pid", "@[pid] = count()", &prog);
}

/// `if comm == "bash" { @bytes = hist(args.ret) }` on a syscall exit
/// tracepoint (`long ret` at offset 16).
#[test]
fn hist_with_comm_filter() {
    let prog = program(
        vec![],
        vec![agg_map(vec![], AggKind::Hist)],
        vec![at(
            1,
            1,
            if_(
                bin(BinOp::Eq, Expr::Comm, lit("bash")),
                vec![at(2, 5, agg(0, vec![], AggOp::Hist, Some(ctx_int(16, 8, true))))],
                vec![],
            ),
        )],
    );
    check("hist_with_comm_filter", "if comm == \"bash\" { @bytes = hist(args.ret) }", &prog);
}

/// `@[str(args.filename)] = count()` on sched_process_exec
/// (`__data_loc char[] filename` at offset 8).
#[test]
fn data_loc_string_key() {
    let prog = program(
        vec![],
        vec![agg_map(vec![Ty::Bytes(64)], AggKind::Sum)],
        vec![at(1, 1, agg(0, vec![Expr::CtxDataLocStr { offset: 8, max: 64 }], AggOp::Count, None))],
    );
    check("data_loc_string_key", "@[str(args.filename)] = count()", &prog);
}

/// `@[comm] = lhist(args.count, 0, 1000, 100)` (`size_t count` at offset 32).
#[test]
fn lhist_by_comm() {
    let prog = program(
        vec![],
        vec![agg_map(vec![Ty::Bytes(16)], AggKind::Hist)],
        vec![at(
            1,
            1,
            agg(0, vec![Expr::Comm], AggOp::Lhist { min: 0, max: 1000, step: 100 }, Some(ctx_int(32, 8, false))),
        )],
    );
    check("lhist_by_comm", "@[comm] = lhist(args.count, 0, 1000, 100)", &prog);
}

/// ```text
/// if pid == 1 && uid == 0 || cpu > 2 { @a[1] = 1 }
/// else if tid != 5 || !(nsecs > 100) { @a[2] += args.x }
/// else { @a[3] -= 3 }
/// ```
#[test]
fn if_else_if_logic() {
    let b = |x| Expr::Builtin(x);
    let prog = program(
        vec![],
        vec![value_map(vec![Ty::Int], Ty::Int)],
        vec![at(
            1,
            1,
            if_(
                or(
                    and(bin(BinOp::Eq, b(Builtin::Pid), int(1)), bin(BinOp::Eq, b(Builtin::Uid), int(0))),
                    bin(BinOp::Gt, b(Builtin::Cpu), int(2)),
                ),
                vec![at(1, 38, store(0, vec![int(1)], int(1)))],
                vec![at(
                    2,
                    6,
                    if_(
                        or(
                            bin(BinOp::Ne, b(Builtin::Tid), int(5)),
                            un(UnOp::Not, bin(BinOp::Gt, b(Builtin::Nsecs), int(100))),
                        ),
                        vec![at(2, 38, update(0, vec![int(2)], BinOp::Add, ctx_int(8, 8, true)))],
                        vec![at(3, 8, update(0, vec![int(3)], BinOp::Sub, int(3)))],
                    ),
                )],
            ),
        )],
    );
    check(
        "if_else_if_logic",
        "if pid == 1 && uid == 0 || cpu > 2 { @a[1] = 1 } else if tid != 5 || !(nsecs > 100) { @a[2] += args.x } else { @a[3] -= 3 }",
        &prog,
    );
}

/// `for i in 0..3 { @[i] = sum(i * args.x) }`
#[test]
fn unrolled_loop() {
    let prog = program(
        vec![Ty::Int],
        vec![agg_map(vec![Ty::Int], AggKind::Sum)],
        vec![at(
            1,
            1,
            StmtKind::Repeat {
                var: 0,
                start: 0,
                count: 3,
                body: vec![at(
                    1,
                    20,
                    agg(0, vec![local(0)], AggOp::Sum, Some(bin(BinOp::Mul, local(0), ctx_int(8, 8, true)))),
                )],
            },
        )],
    );
    check("unrolled_loop", "for i in 0..3 { @[i] = sum(i * args.x) }", &prog);
}

/// `@[1] = sum(args.a + (args.b + (args.c + (args.d + (args.e + args.f)))))`:
/// more live values than temporaries, so the innermost operands spill.
#[test]
fn spill_right_nested() {
    let field = |i: u32| ctx_int(8 * i, 8, true);
    let value = (1..6).rev().fold(field(6), |acc, i| add(field(i), acc));
    let prog = program(
        vec![],
        vec![agg_map(vec![Ty::Int], AggKind::Sum)],
        vec![at(1, 1, agg(0, vec![int(1)], AggOp::Sum, Some(value)))],
    );
    check("spill_right_nested", "@[1] = sum(args.a + (args.b + (args.c + (args.d + (args.e + args.f)))))", &prog);
}
