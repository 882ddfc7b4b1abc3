//! What every program does before the probe's own statements: leave at
//! once when tracing has stopped, and with `-p`/`-c` leave for processes
//! that aren't traced; and the two programs that keep `-c`'s followed pids.

use anyhow::{anyhow, Result};
use probes_ebpf::ir::{self, MapId, MapLayout};

use super::fields;
use crate::config::Trace;
use crate::kernel::Kernel;
use crate::plan::CompiledProgram;
use crate::probes::spec::{self, ProbeKind};
use crate::probes::{self, AttachPoint, ProbeType};

/// Put the filters first in `body`: the stop flag, then the traced process.
/// -p: every probe only sees the traced process; -c: the command and the
/// processes it starts (`follow`, the followed-pids map). Not `interval`:
/// a timer, whoever it interrupts.
pub(super) fn add(
    body: &mut Vec<ir::Stmt>,
    points: &[AttachPoint],
    follow: Option<MapId>,
    pid: Option<i32>,
    stop_map: MapId,
) {
    let current = ir::Expr::Builtin(ir::Builtin::Pid);
    let timer = points.iter().all(|p| p.name.starts_with("interval:"));
    let not_target = match (follow, pid) {
        _ if timer => None,
        (Some(map), _) => {
            Some(ir::Expr::Unary(ir::UnOp::Not, Box::new(ir::Expr::MapContains { map, key: vec![current] })))
        }
        (None, Some(target)) => {
            Some(ir::Expr::Binary(ir::BinOp::Ne, Box::new(current), Box::new(ir::Expr::Int(target as i64))))
        }
        (None, None) => None,
    };
    if let Some(cond) = not_target {
        body.insert(0, leave_if(cond));
    }
    body.insert(0, leave_if(stopped(stop_map)));
}

/// `if cond { return }`, first thing in a program.
fn leave_if(cond: ir::Expr) -> ir::Stmt {
    let leave = ir::Stmt { kind: ir::StmtKind::Return, span: ir::Span::default() };
    ir::Stmt { kind: ir::StmtKind::If { cond, then: vec![leave], otherwise: vec![] }, span: ir::Span::default() }
}

/// Tracing has stopped: every program leaves at once, while the (slow)
/// detaching happens after the output is written.
fn stopped(stop_map: MapId) -> ir::Expr {
    ir::Expr::MapGet { map: stop_map, key: vec![] }
}

/// `-c`: two programs keep the followed pids. A new process (not a thread)
/// started by a followed one is followed too; a followed process whose last
/// thread exits is dropped (its pid may be reused).
pub(super) fn follow_programs(
    map: MapId,
    stop_map: MapId,
    maps: Vec<MapLayout>,
    kernel: &dyn Kernel,
) -> Result<Vec<CompiledProgram>> {
    const CLONE_THREAD: i64 = 0x10000;
    let pid = || ir::Expr::Builtin(ir::Builtin::Pid);
    let stmt = |kind| ir::Stmt { kind, span: ir::Span::default() };
    let field = |category: &str, event: &str, name: &str| -> Result<ir::Expr> {
        let format = kernel.tracepoint_format(category, event)?;
        let f = format.field(name).ok_or_else(|| anyhow!("{category}:{event} has no {name} field"))?;
        Ok(ir::Expr::CtxInt { offset: f.offset, size: f.size, signed: f.signed })
    };
    // task_newtask runs in the parent, before the child runs.
    let followed = ir::Expr::MapContains { map, key: vec![pid()] };
    let thread = ir::Expr::Binary(
        ir::BinOp::And,
        Box::new(field("task", "task_newtask", "clone_flags")?),
        Box::new(ir::Expr::Int(CLONE_THREAD)),
    );
    let new_process =
        ir::Expr::LogicalAnd(Box::new(followed.clone()), Box::new(ir::Expr::Unary(ir::UnOp::Not, Box::new(thread))));
    let add =
        stmt(ir::StmtKind::MapStore { map, key: vec![field("task", "task_newtask", "pid")?], value: ir::Expr::Int(1) });
    let on_new = vec![stmt(ir::StmtKind::If { cond: new_process, then: vec![add], otherwise: vec![] })];
    // sched_process_exit runs in the exiting thread; drop the pid when it is the last one.
    let last_thread = match field("sched", "sched_process_exit", "group_dead") {
        Ok(group_dead) => group_dead,
        Err(_) => last_thread_exiting(kernel),
    };
    let last = ir::Expr::LogicalAnd(Box::new(followed), Box::new(last_thread));
    let drop = stmt(ir::StmtKind::MapDelete { map, key: vec![pid()] });
    let on_exit = vec![stmt(ir::StmtKind::If { cond: last, then: vec![drop], otherwise: vec![] })];

    let ptype: &'static dyn ProbeType = &probes::tracepoint::Tracepoint;
    let mut out = Vec::new();
    for (name, target, mut body) in
        [("rtrace_follow", "task:task_newtask", on_new), ("rtrace_unfollow", "sched:sched_process_exit", on_exit)]
    {
        body.insert(0, leave_if(stopped(stop_map)));
        let spec = spec::ProbeSpec { kind: ProbeKind::Tracepoint, target: target.into() };
        let points = ptype.expand(&spec, &Trace::default(), kernel)?;
        let spec = ptype.program(&points[0], false, kernel)?;
        let program = ir::Program {
            name: name.into(),
            context: spec.context,
            locals: vec![],
            maps: maps.clone(),
            body,
            possible_cpus: kernel.possible_cpus(),
            helper_checks: None,
            arith_errors: None,
        };
        let code = probes_ebpf::generate(&program).map_err(|e| anyhow!("{}", e.message))?;
        out.push(CompiledProgram {
            name: name.into(),
            probe_type: ptype,
            prog_type: spec.prog_type,
            load: spec.load,
            code,
            points,
            probe: 0,
            site_ids: vec![],
            split: vec![],
            internal: true,
            dispatch: 0,
        });
    }
    Ok(out)
}

/// At `sched_process_exit` on kernels whose tracepoint has no `group_dead`
/// field (before 6.4): the exiting thread is the process's last when
/// `current->signal->live` is 0 (do_exit counts it down before the
/// tracepoint fires); without BTF, when it is the thread-group leader.
fn last_thread_exiting(kernel: &dyn Kernel) -> ir::Expr {
    let leader = || {
        ir::Expr::Binary(
            ir::BinOp::Eq,
            Box::new(ir::Expr::Builtin(ir::Builtin::Pid)),
            Box::new(ir::Expr::Builtin(ir::Builtin::Tid)),
        )
    };
    let Some(btf) = kernel.btf() else { return leader() };
    let Some(task) = btf.struct_named("task_struct") else { return leader() };
    let base = fields::Base {
        value: ir::Expr::Builtin(ir::Builtin::CurTask),
        ty: task,
        pointee: true,
        name: "curtask".into(),
    };
    let members = ["signal".to_string(), "live".to_string(), "counter".to_string()];
    match fields::walk(btf, base, &members) {
        Ok(live) => ir::Expr::Binary(ir::BinOp::Eq, Box::new(live.expr), Box::new(ir::Expr::Int(0))),
        Err(_) => leader(),
    }
}
