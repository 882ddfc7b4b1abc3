//! The records of userspace statements: lowering a block keeps the kernel
//! statements the split chose and turns each run of userspace statements
//! into one record (a `Site`) carrying what they read.
use probes_ebpf::ir::{BinOp, Expr, LocalId, Memory, Span, Stmt, StmtKind, Ty};
use rhai::{ASTNode, Expr as RExpr, Position, Stmt as RStmt};

use super::{
    at, builtin_call, err, event_path, index, is_aggregation, property_chain, span, strings, LowerError, Lowerer,
    Result,
};
use crate::compile::maps::UseKind;
use crate::compile::split::{Place, Why};
use crate::kernel::tracepoint_format::FieldKind;
use crate::plan::site::{RecordField, Site, ValueMeaning};

/// The node at the end of `path` is the left side of a `.` (`e` in `e.pid`).
fn is_dot_lhs(path: &[ASTNode]) -> bool {
    let (Some(ASTNode::Expr(me)), Some(ASTNode::Expr(RExpr::Dot(x, _, _)))) =
        (path.last(), path.len().checked_sub(2).and_then(|i| path.get(i)))
    else {
        return false;
    };
    std::ptr::eq(&x.lhs, *me)
}

/// The split put a statement in the kernel but lowering found something
/// only userspace can do: say so, as a compile error.
fn in_kernel(mut e: LowerError) -> LowerError {
    if e.userspace {
        e.userspace = false;
        e.message = format!("{}, but this statement runs in the kernel", e.message);
    }
    e
}

impl Lowerer<'_> {
    /// Lower a block: kernel statements become IR; each run of consecutive
    /// userspace statements becomes one record emitted at that point.
    pub(crate) fn block(&mut self, stmts: &[RStmt]) -> Result<Vec<Stmt>> {
        self.scopes.push(Vec::new());
        let mut out = Vec::new();
        let mut run: Vec<RStmt> = Vec::new();
        let mut run_id = 0u32;
        for s in stmts {
            match self.split.place(s).clone() {
                Place::Kernel => {
                    let declared_before = self.scopes.last().map_or(0, Vec::len);
                    let mut lowered = Vec::new();
                    self.stmt(s, &mut lowered).map_err(in_kernel)?;
                    // The pending userspace run comes before this statement:
                    // the locals it just declared are not in the run's scope.
                    let declared: Vec<_> = self.scopes.last_mut().map_or(vec![], |sc| sc.split_off(declared_before));
                    self.flush_site(&mut run, run_id, &mut out)?;
                    if let Some(sc) = self.scopes.last_mut() {
                        sc.extend(declared);
                    }
                    out.extend(lowered);
                }
                Place::User(why) => {
                    if run.is_empty() {
                        run_id = self.next_site;
                        self.next_site += 1;
                    }
                    self.check_userspace_stmt(s, run_id, &why)?;
                    run.push(s.clone());
                }
            }
        }
        self.flush_site(&mut run, run_id, &mut out)?;
        self.scopes.pop();
        Ok(out)
    }

    /// A statement classified userspace must not hold kernel-only work, and
    /// the variables it declares are userspace values from now on.
    pub(crate) fn check_userspace_stmt(&mut self, s: &RStmt, run_id: u32, why: &str) -> Result<()> {
        if let Some(Why(msg, pos)) = self.split.order_errors.get(&span(s.position())) {
            return err(*pos, msg.clone());
        }
        if let Some(Why(part, pos)) = self.split.aggregate_errors.get(&span(s.position())) {
            return err(
                *pos,
                format!("this aggregation runs in the kernel, but {part} (kernel code can't use userspace values)"),
            );
        }
        let mut bad: Option<(String, Position)> = None;
        let mut acts: Option<(String, Position)> = None;
        let no_split = self.target.settings.no_split;
        s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
            if let Some(ASTNode::Expr(RExpr::FnCall(call, pos))) = path.last() {
                let kernel_only = (is_aggregation(call.name.as_str()) && !no_split)
                    || (strings::reads_kernel_memory(call) && !strings::member_read(path));
                if kernel_only && bad.is_none() {
                    bad = Some((call.name.to_string(), *pos));
                }
                // emit(), signal(), deny(): only the kernel does them, at the
                // event (the split keeps them there when it can; they have no
                // userspace form).
                let kernel_act = builtin_call(call.name.as_str()).is_some_and(|r| r.kernel_only_statement());
                if kernel_act && acts.is_none() {
                    acts = Some((call.name.to_string(), *pos));
                }
            }
            true
        });
        if let Some((name, pos)) = acts {
            if no_split {
                return err(
                    pos,
                    format!(
                        "{name}() happens in the kernel at the event and has no userspace form, so --no-split can't run this probe"
                    ),
                );
            }
            return err(
                pos,
                format!(
                    "{name}() happens in the kernel at the event, but the statement at {} around it runs in userspace ({why}); decide it from event fields, maps or constants, which the kernel can",
                    at(s.position())
                ),
            );
        }
        if let Some((name, pos)) = bad.clone().filter(|(n, _)| !is_aggregation(n)) {
            return err(
                pos,
                format!(
                    "{name}() reads kernel memory, but the statement at {} around it runs in userspace; read it in a kernel `let` first (`let v = {name}(...);`) and use `v` here",
                    at(s.position())
                ),
            );
        }
        if let Some((name, pos)) = bad {
            return err(
                pos,
                format!(
                    "{name}() runs in the kernel, but the statement at {} around it runs in userspace ({why}); compute it from event fields, maps or constants",
                    at(s.position())
                ),
            );
        }
        self.userspace_map_writes(s);
        if let RStmt::Var(x, _, pos) = s {
            self.userspace_vars.insert(x.0.name.to_string(), (*pos, Some(run_id)));
            let decl = self.new_decl();
            self.scopes.last_mut().unwrap().push((x.0.name.to_string(), None, decl));
        }
        Ok(())
    }

    /// Map writes in a userspace statement give the map's layout like kernel
    /// ones: a key (and value) the kernel could compute has the type it
    /// would have there (`names[e.comm] = n` has string keys).
    fn userspace_map_writes(&mut self, s: &RStmt) {
        let mut writes: Vec<(RExpr, RExpr, RExpr, bool, Position)> = Vec::new();
        s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
            if let Some(ASTNode::Stmt(RStmt::Assignment(x))) = path.last() {
                if let RExpr::Index(ix, _, pos) = &x.1.lhs {
                    let compound = x.0.is_op_assignment();
                    writes.push((ix.lhs.clone(), ix.rhs.clone(), x.1.rhs.clone(), compound, *pos));
                }
            }
            true
        });
        for (map, key, value, compound, pos) in writes {
            let Some(map) = self.map_of(&map) else { continue };
            let Ok(key) = self.key(&key) else { continue };
            let kind = match self.expr(&value) {
                _ if compound => UseKind::Update,
                Ok(v) => UseKind::Store(self.ty(&v)),
                Err(_) => UseKind::Read,
            };
            self.record_use(&map, &key, kind, pos);
        }
    }

    /// Emit the record for a run of userspace statements: collect what the
    /// statements read from the kernel side, check that it can be shipped,
    /// lay out the record, and keep the run as a [`Site`].
    pub(crate) fn flush_site(&mut self, run: &mut Vec<RStmt>, id: u32, out: &mut Vec<Stmt>) -> Result<()> {
        if run.is_empty() {
            return Ok(());
        }
        let stmts = std::mem::take(run);
        let first_pos = stmts[0].position();
        let mut reads = self.collect_reads(&stmts)?;
        if reads.whole {
            self.add_whole_event(&mut reads.wanted, first_pos);
        }
        let mut raw_args = std::collections::HashSet::new();
        self.expand_whole_args(&mut reads.wanted, &mut raw_args)?;
        one_value_per_path(&reads.wanted, self.event.as_deref())?;
        // Locals visible before the run: the run's own `let`s (the last entries
        // of the innermost scope) are created when it runs.
        let mut visible: Vec<(String, Option<LocalId>, u32)> = self.scopes.iter().flatten().cloned().collect();
        let own = stmts.iter().filter(|s| matches!(s, RStmt::Var(..))).count();
        let own_decls: Vec<u32> =
            visible.split_off(visible.len().saturating_sub(own)).into_iter().map(|d| d.2).collect();
        let carry = self.split.carries();
        let layout = self.lay_out(reads, &raw_args, &visible, carry)?;
        out.push(Stmt { kind: self.emit_stmt(id, layout.exprs), span: span(first_pos) });
        let decls = visible.iter().map(|(_, local, decl)| (*decl, local.is_some())).collect();
        let scope = visible.into_iter().map(|(n, _, _)| n).collect();
        self.sites.push(Site {
            id,
            stmts,
            fields: layout.fields,
            sems: layout.sems,
            scope,
            decls,
            own: own_decls,
            carry,
            at: at(first_pos),
            emit: false,
            emit_array: false,
        });
        Ok(())
    }

    /// What a run of userspace statements reads from the kernel side:
    /// event fields, kernel locals, `str()` reads and map reads shipped at
    /// the event, members of `kptr()`s; an error for a use that can't be
    /// shipped (a kernel pointer's members, a stack with computed arguments).
    fn collect_reads(&self, stmts: &[RStmt]) -> Result<Reads> {
        let event = self.event.clone();
        let mut wanted: Vec<(RecordField, Position)> = Vec::new();
        let mut problem: Option<LowerError> = None;
        let reads = &self.split.memory_reads;
        let mut read_args: Vec<(Span, Vec<RExpr>, Position)> = Vec::new();
        let mut whole = false;
        let mut kptr_uses: Vec<(RExpr, RExpr, Position)> = Vec::new();
        let mut map_reads: Vec<(Span, RExpr)> = Vec::new();
        let shipped = &self.split.map_reads;
        for s in stmts {
            s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
                let is_read = |n: &ASTNode| {
                    matches!(n, ASTNode::Expr(RExpr::FnCall(c, p)) if c.name == "str" && reads.contains(&span(*p)))
                };
                match path.last() {
                    Some(ASTNode::Expr(e @ RExpr::Index(_, _, p))) if shipped.contains(&span(*p)) => {
                        let at = span(*p);
                        wanted.push((RecordField::MapRead { line: at.line, col: at.col }, *p));
                        map_reads.push((at, (*e).clone()));
                    }
                    Some(ASTNode::Expr(RExpr::FnCall(c, p))) if is_read(&path[path.len() - 1]) => {
                        let at = span(*p);
                        wanted.push((RecordField::Read { line: at.line, col: at.col }, *p));
                        read_args.push((at, c.args.to_vec(), *p));
                    }
                    Some(ASTNode::Expr(RExpr::Variable(v, _, _)))
                        if Some(v.1.as_str()) == event.as_deref()
                            && self.lookup_local(v.1.as_str()).is_none()
                            && !is_dot_lhs(path) =>
                    {
                        whole = true;
                    }
                    Some(ASTNode::Expr(RExpr::Dot(x, _, pos))) => {
                        if strings::is_kptr(&x.lhs) {
                            kptr_uses.push((x.lhs.clone(), x.rhs.clone(), *pos));
                        }
                        if let RExpr::Variable(v, _, _) = &x.lhs {
                            let name = v.1.as_str();
                            if let (Some(id), None) = (self.lookup_local(name), &problem) {
                                if self.local_btf.contains_key(&id) && matches!(x.rhs, RExpr::Property(..) | RExpr::Dot(..)) {
                                    problem = Some(LowerError {
                                        pos: *pos,
                                        message: format!(
                                            "`{name}` is a kernel pointer: read its members in a kernel statement first, e.g. `let x = {name}.{};`, then use `x` here",
                                            property_chain(&x.rhs).0.iter().map(|c| c.0.as_str()).collect::<Vec<_>>().join(".")
                                        ),
                                        userspace: false,
                                    });
                                }
                            }
                            if Some(v.1.as_str()) == event.as_deref() {
                                match (event_path(&x.rhs, &|a| self.const_arg(a)), &x.rhs) {
                                    (Some(p), _) => wanted.push((RecordField::Event(p), *pos)),
                                    (None, RExpr::MethodCall(call, cpos))
                                        if crate::builtins::is_stack(call.name.as_str()) && problem.is_none() =>
                                    {
                                        problem = Some(LowerError {
                                            pos: *cpos,
                                            message: "stack arguments are a constant limit and/or a mode (\"bpftrace\", \"perf\", \"raw\"), literals or top-level constants".into(),
                                            userspace: false,
                                        });
                                    }
                                    _ => {}
                                }
                            }
                        }
                    }
                    Some(ASTNode::Expr(RExpr::Variable(v, _, pos))) => {
                        let name = v.1.as_str();
                        if self.lookup_local(name).is_some() {
                            wanted.push((RecordField::Local { name: name.to_string(), slot: 0 }, *pos));
                        }
                    }
                    _ => {}
                }
                true
            });
        }
        match problem {
            Some(p) => Err(p),
            None => Ok(Reads { wanted, read_args, kptr_uses, map_reads, whole }),
        }
    }

    /// `e` used as a whole value: the fields the closure (and the functions
    /// it passes `e` to) read, and the common ones.
    fn add_whole_event(&self, wanted: &mut Vec<(RecordField, Position)>, first_pos: Position) {
        let common = crate::builtins::FIELDS.iter().filter(|f| f.common).map(|f| vec![f.name.to_string()]);
        // Every argument too: where `e` goes (an alias, a closure, a
        // method call) its reads can't always be followed.
        let has_args = self.target.event.format().is_some() || self.target.event.btf_args().is_some();
        let args = has_args.then(|| vec!["args".to_string()]);
        for path in common.into_iter().chain(self.split.whole_event.iter().cloned()).chain(args) {
            // A whole `e.args` is expanded below, next to the fields read by name.
            let clash = path != ["args"]
                && wanted.iter().any(|(c, _)| match c {
                    RecordField::Event(p) => p.starts_with(&path) || path.starts_with(p),
                    _ => false,
                });
            if !clash {
                wanted.push((RecordField::Event(path), first_pos));
            }
        }
    }

    /// The record for what the run reads: each field's type, meaning and the
    /// kernel expression that fills it (the event's CPU and time first when
    /// the run's values are carried between runs).
    fn lay_out(
        &mut self,
        reads: Reads,
        raw_args: &std::collections::HashSet<String>,
        visible: &[(String, Option<LocalId>, u32)],
        carry: bool,
    ) -> Result<Layout> {
        let Reads { wanted, read_args, kptr_uses, map_reads, .. } = reads;
        let mut fields: Vec<(RecordField, Ty)> = Vec::new();
        let mut sems = Vec::new();
        let mut exprs = Vec::new();
        if carry {
            // Which event: its CPU and its time (read once at the start).
            let key = [Expr::Builtin(probes_ebpf::ir::Builtin::Cpu), self.event_nsecs()];
            for (i, e) in key.into_iter().enumerate() {
                fields.push((RecordField::EventKey(i as u8), Ty::Int));
                sems.push(ValueMeaning::Plain);
                exprs.push(e);
            }
        }
        for (mut cap, pos) in wanted {
            if let RecordField::Local { name, slot } = &mut cap {
                // The innermost declaration of the name is the one in use.
                *slot = visible.iter().rposition(|(n, _, _)| n == name).unwrap_or(0);
            }
            if fields.iter().any(|f| f.0 == cap) {
                continue;
            }
            if let RecordField::Event(path) = &cap {
                let raw = match path.as_slice() {
                    [a, f] if a == "args" && raw_args.contains(f) => Some(f.as_str()),
                    _ => None,
                };
                let items = match raw {
                    Some(f) => self.whole_args_items(f),
                    None => self.string_array(path, pos)?,
                };
                if let (Some(f), None) = (raw, &items) {
                    // A bare `e.args`: the field as the event has it.
                    if let Some(expr) = self.whole_args_value(f, pos) {
                        fields.push((cap.clone(), self.ty(&expr)));
                        sems.push(self.sem(&expr));
                        exprs.push(expr);
                    }
                    continue;
                }
                if let Some(items) = items {
                    for (index, e) in items.into_iter().enumerate() {
                        fields.push((RecordField::EventItem { path: path.clone(), index }, self.ty(&e)));
                        sems.push(ValueMeaning::Plain);
                        exprs.push(e);
                    }
                    fields.push((cap, Ty::Int));
                    sems.push(ValueMeaning::Plain);
                    exprs.push(Expr::Int(0));
                    continue;
                }
            }
            let expr = match &cap {
                RecordField::Read { line, col } => {
                    let Some((_, args, at)) = read_args.iter().find(|r| r.0 == Span { line: *line, col: *col }) else {
                        continue;
                    };
                    self.call_expr("str", args, *at)?
                }
                RecordField::Local { slot, .. } => Expr::Local(visible[*slot].1.unwrap_or(0)),
                RecordField::MapRead { line, col } => {
                    let Some((_, e)) = map_reads.iter().find(|r| r.0 == Span { line: *line, col: *col }) else {
                        continue;
                    };
                    self.expr(e)?
                }
                RecordField::Event(path) => self.event_capture(path, pos)?,
                RecordField::Emitted
                | RecordField::EventItem { .. }
                | RecordField::KptrBase { .. }
                | RecordField::KptrMember { .. }
                | RecordField::EventKey(_) => continue,
            };
            fields.push((cap, self.ty(&expr)));
            sems.push(self.sem(&expr));
            exprs.push(expr);
        }
        for (i, (call, rhs, pos)) in kptr_uses.iter().enumerate() {
            for (cap, expr) in self.kptr_fields(i, call, rhs, *pos)? {
                fields.push((cap, self.ty(&expr)));
                sems.push(self.sem(&expr));
                exprs.push(expr);
            }
        }
        Ok(Layout { fields, sems, exprs })
    }

    /// For a `char **` tracepoint field (`e.args.argv`): reads of its first
    /// strings (env RTRACE_JOIN_MAX, default 6, each up to 48 bytes), so
    /// userspace gets an array (for `join()`).
    pub(crate) fn string_array(&mut self, path: &[String], pos: Position) -> Result<Option<Vec<Expr>>> {
        let [args, field] = path else { return Ok(None) };
        if args != "args" {
            return Ok(None);
        }
        let Some(format) = self.target.event.format() else { return Ok(None) };
        let Some(f) = format.field(field) else { return Ok(None) };
        if let Some(items) = index::array_items(format, field) {
            // An array of integers (`unsigned long args[6]`): every element.
            return Ok(Some(items));
        }
        if !(f.c_type.contains("char") && f.c_type.matches('*').count() == 2) {
            return Ok(None);
        }
        let count = self.target.settings.join_max as i64;
        let base = self.tracepoint_arg(field, pos)?;
        Ok(Some(
            (0..count)
                .map(|i| {
                    let slot = Expr::Binary(BinOp::Add, Box::new(base.clone()), Box::new(Expr::Int(8 * i)));
                    let ptr = Expr::ReadMem { addr: Box::new(slot), size: 8, signed: false, mem: Memory::User };
                    Expr::ReadStr { ptr: Box::new(ptr), max: 48, mem: Memory::User }
                })
                .collect(),
        ))
    }

    /// The statement sending the record of site `id`.
    pub(crate) fn emit_stmt(&self, id: u32, fields: Vec<Expr>) -> StmtKind {
        StmtKind::Emit {
            ring: self.target.data_ring(),
            lost: self.target.lost_map(),
            wake: Some(self.target.wake_map()),
            site: id,
            probe: self.target.probe_index,
            fields,
            wake_bytes: self.target.settings.wake_bytes(),
        }
    }

    /// The kernel value shipped for `e.PATH` in a record. Character pointers
    /// are shipped as the strings they point to.
    pub(crate) fn event_capture(&mut self, path: &[String], pos: Position) -> Result<Expr> {
        if crate::builtins::is_stack(path[0].as_str()) {
            return self.stack_expr(path, pos);
        }
        match path {
            [field] => self.event_field(field, pos),
            [args, field] if args == "args" && self.target.event.btf_args().is_none() => {
                let v = self.tracepoint_arg(field, pos)?;
                let pointer = self.target.event.format().and_then(|f| f.field(field)).map(|f| f.kind.clone());
                Ok(match pointer {
                    Some(FieldKind::Pointer { user, to_char: true }) => {
                        Expr::ReadStr { ptr: Box::new(v), max: self.target.settings.str_max, mem: Memory::user(user) }
                    }
                    _ => v,
                })
            }
            [first, ..] if matches!(first.as_str(), "args" | "curtask") => {
                let chain: Vec<(String, Position)> = path.iter().map(|n| (n.clone(), pos)).collect();
                let a = self.member_chain(&chain)?;
                Ok(if a.char_pointer {
                    Expr::ReadStr {
                        ptr: Box::new(a.expr),
                        max: self.target.settings.str_max,
                        mem: self.target.event.pointer_memory(),
                    }
                } else {
                    a.expr
                })
            }
            _ => err(pos, "unsupported event field"),
        }
    }
}

/// What a run of userspace statements reads, as [`Lowerer::collect_reads`]
/// finds it: the record fields in first-use order, and the expressions the
/// `str()` reads, map reads and `kptr()` members are computed from.
struct Reads {
    wanted: Vec<(RecordField, Position)>,
    read_args: Vec<(Span, Vec<RExpr>, Position)>,
    kptr_uses: Vec<(RExpr, RExpr, Position)>,
    map_reads: Vec<(Span, RExpr)>,
    /// `e` is used as a whole value.
    whole: bool,
}

/// A record's fields, their meanings, and the kernel expressions that fill
/// them, in order.
struct Layout {
    fields: Vec<(RecordField, Ty)>,
    sems: Vec<ValueMeaning>,
    exprs: Vec<Expr>,
}

/// `e.curtask` arrives as an object map when its members are used too, so
/// it can't also be a number in the same run.
fn one_value_per_path(wanted: &[(RecordField, Position)], event: Option<&str>) -> Result<()> {
    for (a, _) in wanted {
        for (b, bpos) in wanted {
            if let (RecordField::Event(short), RecordField::Event(long)) = (a, b) {
                if long.len() > short.len() && long.starts_with(short) && !crate::builtins::is_stack(short[0].as_str())
                {
                    let ev = event.unwrap_or("e");
                    return err(
                        *bpos,
                        format!(
                            "`{ev}.{}` and `{ev}.{}` are both used here; in userspace one value can't be both: keep one in a `let` first (`let x = {ev}.{};`)",
                            short.join("."),
                            long.join("."),
                            long.join(".")
                        ),
                    );
                }
            }
        }
    }
    Ok(())
}
