//! Statements in the kernel: `let`, assignments to locals and maps, `if`,
//! constant `for` ranges, `return`, `exit()`, `emit()`, `print/clear/zero(m)`, `m.remove(k)`.
use super::*;

impl Lowerer<'_> {
    pub(crate) fn stmt(&mut self, s: &RStmt, out: &mut Vec<Stmt>) -> Result<()> {
        let pos = s.position();
        let mut push = |kind: StmtKind| out.push(Stmt { kind, span: span(pos) });
        match s {
            RStmt::Noop(_) | RStmt::Share(_) => {}
            RStmt::Var(x, _, pos) => {
                let (ident, init, _) = x.as_ref();
                if matches!(init, RExpr::Unit(_)) {
                    return err(*pos, format!("`let {}` needs a value in a probe", ident.name));
                }
                // A typed pointer keeps its struct type (`let t = e.curtask;`).
                let typed = match init {
                    RExpr::Dot(x, _, dpos) => self.pointer_access(&x.lhs, &x.rhs, *dpos),
                    RExpr::FnCall(c, _) if c.name == "kptr" && c.args.len() == 2 => Some(self.kptr(&c.args)),
                    _ => None,
                };
                let (value, pointee) = match typed {
                    Some(access) => access.map(|a| {
                        self.note_pointer(&a);
                        (a.expr, a.pointee)
                    })?,
                    None => (self.expr(init)?, None),
                };
                let ty = match (self.ty(&value), self.widths.get(&span(*pos))) {
                    (Ty::Bytes(n), Some(w)) => Ty::Bytes(n.max(*w)),
                    (ty, _) => ty,
                };
                let sem = if self.is_bool(init) { ValueMeaning::Bool } else { self.sem(&value) };
                let id = self.new_local(ident.name.as_str(), ty);
                self.local_decl.insert(id, span(*pos));
                if sem != ValueMeaning::Plain {
                    self.local_sems.insert(id, sem);
                }
                if let Some(p) = pointee {
                    self.local_btf.insert(id, p);
                    if self.user_struct_pointer(init) {
                        self.local_user.insert(id);
                    }
                }
                push(StmtKind::SetLocal(id, value));
            }
            RStmt::Assignment(x) => {
                let (op, bin) = x.as_ref();
                let compound = op.get_op_assignment_info().map(|info| info.5);
                for k in self.assignment(&bin.lhs, &bin.rhs, compound, op.position())? {
                    push(k);
                }
            }
            RStmt::If(fc, _) => {
                let cond = self.cond(&fc.expr)?;
                let then = self.block(fc.body.statements())?;
                let otherwise = self.block(fc.branch.statements())?;
                push(StmtKind::If { cond, then, otherwise });
            }
            RStmt::For(x, pos) => {
                let (var, counter, fc) = x.as_ref();
                if counter.is_some() {
                    return err(*pos, "a counter variable in `for` isn't supported in probes; use `for i in 0..N`");
                }
                let (start, count) = self.const_range(&fc.expr)?;
                self.scopes.push(Vec::new());
                let id = self.new_local(var.name.as_str(), Ty::Int);
                let body = self.block(fc.body.statements())?;
                self.scopes.pop();
                push(StmtKind::Repeat { var: id, start, count, body });
            }
            RStmt::Block(b) => {
                let inner = self.block(b.statements())?;
                out.extend(inner);
            }
            RStmt::Return(value, _, _) => {
                if value.is_some() {
                    return err(pos, "probes can't return a value; write `return;`");
                }
                push(StmtKind::Return);
            }
            RStmt::FnCall(call, pos) => {
                let k = self.call_stmt(call.name.as_str(), &call.args, *pos)?;
                push_call(&mut push, k);
            }
            RStmt::Expr(e) => match e.as_ref() {
                RExpr::FnCall(call, pos) => {
                    let k = self.call_stmt(call.name.as_str(), &call.args, *pos)?;
                    push_call(&mut push, k);
                }
                RExpr::Dot(x, _, pos) => {
                    let k = self.method_stmt(&x.lhs, &x.rhs, *pos)?;
                    push(k);
                }
                RExpr::Stmt(block) => {
                    let inner = self.block(block.statements())?;
                    out.extend(inner);
                }
                other => {
                    // A bare expression: evaluate only for its checks; no effect.
                    self.expr(other)?;
                }
            },
            RStmt::While(..) | RStmt::Do(..) => {
                return err(pos, "while/loop can't run in the kernel: use `for i in 0..N` with a constant N");
            }
            RStmt::BreakLoop(..) => return err(pos, "break/continue aren't supported in probes yet"),
            RStmt::Switch(..) => return err(pos, "switch isn't supported in probes; use if / else if"),
            RStmt::TryCatch(..) => return Err(userspace_only("try/catch", pos)),
            _ => return Err(userspace_only("this statement", pos)),
        }
        Ok(())
    }

    /// `for i in A..B` / `A..=B` with constant bounds: (start, count).
    pub(crate) fn const_range(&self, e: &RExpr) -> Result<(i64, u32)> {
        let pos = e.position();
        if let RExpr::FnCall(call, _) = e {
            if (call.name == ".." || call.name == "..=") && call.args.len() == 2 {
                let a = self.const_int(&call.args[0]);
                let b = self.const_int(&call.args[1]);
                if let (Some(a), Some(b)) = (a, b) {
                    let end = if call.name == "..=" { b + 1 } else { b };
                    let count = (end - a).max(0);
                    if count > 4096 {
                        return err(
                            pos,
                            format!("loop of {count} iterations is too long for the kernel (at most 4096)"),
                        );
                    }
                    return Ok((a, count as u32));
                }
            }
        }
        err(pos, "loops in probes need a constant range, e.g. `for i in 0..8`")
    }

    pub(crate) fn assignment(
        &mut self,
        lhs: &RExpr,
        rhs: &RExpr,
        compound: Option<&str>,
        pos: Position,
    ) -> Result<Vec<StmtKind>> {
        // Map target: `m[k] = ...` or keyless `m = ...`.
        let (map, key) = match lhs {
            RExpr::Index(x, _, _) => match self.map_of(&x.lhs) {
                Some(m) => (Some(m), Some(&x.rhs)),
                None => return err(lhs.position(), "only maps declared with map() can be indexed in a probe"),
            },
            other => (self.map_of(other), None),
        };
        if let Some(map) = map {
            let is_agg = matches!(rhs, RExpr::FnCall(c, _) if is_aggregation(c.name.as_str()));
            let key = match key {
                Some(k) => self.key(k).map_err(|e| if is_agg { kernel_needs(e) } else { e })?,
                None => Vec::new(),
            };
            let agg = self.aggregation(rhs).map_err(kernel_needs)?;
            if let Some(agg) = agg {
                if compound.is_some() {
                    return err(pos, "an aggregation is assigned with `=`, e.g. `m[k] = count()`");
                }
                let (op, value) = agg;
                self.record_use(&map, &key, UseKind::Aggregate(op), pos);
                return Ok(vec![StmtKind::Aggregate { map: map.id(), key, op, value }]);
            }
            let value = self.expr(rhs)?;
            return Ok(vec![match compound {
                None => {
                    let ty = self.ty(&value);
                    self.record_use(&map, &key, UseKind::Store(ty), pos);
                    let meaning = self.sem(&value);
                    if let Some(u) = self.uses.last_mut() {
                        u.value_meaning = meaning;
                    }
                    StmtKind::MapStore { map: map.id(), key, value }
                }
                Some(op) => {
                    let op = bin_op(op).ok_or_else(|| LowerError {
                        pos,
                        message: format!("`{op}=` isn't supported on maps"),
                        userspace: false,
                    })?;
                    self.record_use(&map, &key, UseKind::Update, pos);
                    StmtKind::MapUpdate { map: map.id(), key, op, value }
                }
            }]);
        }
        // Local target.
        let RExpr::Variable(v, _, vpos) = lhs else {
            return err(lhs.position(), "this assignment target can't be written in a probe");
        };
        let name = v.1.as_str();
        let Some(id) = self.lookup_local(name) else {
            if self.userspace_vars.contains_key(name) {
                return Err(userspace_only(&format!("assigning `{name}`"), *vpos));
            }
            if self.captures.contains_key(name) {
                return Err(LowerError {
                    pos: *vpos,
                    message: format!(
                        "`{name}` is a top-level variable: a probe can't assign it in the kernel; keep state in a map (e.g. `let {name} = map();`)"
                    ),
                    userspace: false,
                });
            }
            return err(*vpos, format!("unknown variable `{name}`"));
        };
        let mut value = self.expr(rhs)?;
        if let Some(op) = compound {
            let op = bin_op(op).ok_or_else(|| LowerError {
                pos,
                message: format!("`{op}=` isn't supported"),
                userspace: false,
            })?;
            self.check_div(op, &value, pos)?;
            value = Expr::Binary(op, Box::new(Expr::Local(id)), Box::new(value));
        }
        let (want, got) = (self.locals[id as usize], self.ty(&value));
        if matches!(want, Ty::Int) != matches!(got, Ty::Int) {
            return err(pos, format!("`{name}` holds a {} but is assigned a {}", ty_name(want), ty_name(got)));
        }
        if let (Ty::Bytes(w), Ty::Bytes(g), Some(decl)) = (want, got, self.local_decl.get(&id)) {
            if g > w {
                let need = self.wanted_widths.entry(*decl).or_insert(0);
                *need = (*need).max(g);
            }
        }
        Ok(vec![StmtKind::SetLocal(id, value)])
    }

    pub(crate) fn int_expr(&mut self, e: &RExpr) -> Result<Expr> {
        let v = self.expr(e)?;
        if self.ty(&v) != Ty::Int {
            return err(e.position(), "a string is used where a number is expected");
        }
        Ok(v)
    }

    /// A kernel action (`signal`, `deny`) runs with `--unsafe` (or is only
    /// audited, with `--monitor`); else it is refused here, before attaching.
    fn may_act(&self, name: &str, pos: Position) -> Result<()> {
        let settings = self.target.settings;
        if settings.allow_unsafe || settings.monitor {
            return Ok(());
        }
        err(pos, crate::script::system::needs_unsafe(name))
    }

    /// A kernel action at `pos`, audited; only audited under `--monitor`.
    fn act(&self, action: KernelAction, pos: Position) -> StmtKind {
        let perform = !self.target.settings.monitor;
        let (line, col) = (pos.line().unwrap_or(0) as u32, pos.position().unwrap_or(0) as u32);
        StmtKind::Act {
            action,
            ring: self.target.control_ring(),
            lost: self.target.lost_map(),
            probe: self.target.probe_index,
            code: action_code(action, !perform, line, col),
            perform,
        }
    }

    /// Statement-level function calls: `exit()`, `print(m)`.
    pub(crate) fn call_stmt(&mut self, name: &str, args: &[RExpr], pos: Position) -> Result<StmtKind> {
        let control = |s: &Self, kind: u32, arg: Expr| StmtKind::Control {
            ring: s.target.control_ring(),
            lost: s.target.lost_map(),
            kind,
            probe: s.target.probe_index,
            arg,
        };
        match (builtin_call_with(name, args.len()), args.len()) {
            (Some(Call::Exit), 0) => Ok(control(self, CONTROL_EXIT, Expr::Int(0))),
            (Some(Call::Exit), _) => {
                let code = self.int_expr(&args[0])?;
                Ok(control(self, CONTROL_EXIT, code))
            }
            (Some(Call::Signal), _) => {
                self.may_act("signal", pos)?;
                let sig = match &args[0] {
                    RExpr::StringConstant(s, _) => signals::number(s),
                    other => self.const_int(other).and_then(signals::from_number),
                };
                let Some(sig) = sig else {
                    return err(
                        args[0].position(),
                        "signal() takes a constant signal: a name (\"KILL\", \"SIGTERM\") or a number from 1 to 64",
                    );
                };
                Ok(self.act(KernelAction::Signal(sig as u32), pos))
            }
            (Some(Call::Deny), _) => {
                match self.target.verdict {
                    Verdict::Errno => {}
                    Verdict::Void => {
                        let why =
                            format!("{} returns nothing, so its operation can't be denied", self.target.probe_name);
                        return err(pos, why);
                    }
                    Verdict::Ignored | Verdict::Return => {
                        return err(
                            pos,
                            "deny() fails the operation of an lsm: hook (lsm:file_open, ...); this probe has none \
                             (signal() stops a process from any probe; override() sets an fmod_ret: function's \
                             return value)",
                        );
                    }
                }
                self.may_act("deny", pos)?;
                let errno = match args.first() {
                    None => Some(libc::EPERM),
                    Some(RExpr::StringConstant(s, _)) => errno::number(s),
                    Some(other) => self.const_int(other).and_then(errno::from_number),
                };
                let Some(errno) = errno else {
                    return err(
                        args[0].position(),
                        "deny() takes a constant error: a name (\"EACCES\", \"EPERM\") or a number from 1 to 4095",
                    );
                };
                Ok(self.act(KernelAction::Deny(errno as u32), pos))
            }
            (Some(Call::Override), _) => {
                if self.target.verdict != Verdict::Return {
                    return err(
                        pos,
                        "override() sets a kernel function's return value in an fmod_ret:FN probe (FN a security_* \
                         function, or one marked for error injection); rtrace does not override from kprobes \
                         (bpf_override_return needs CONFIG_BPF_KPROBE_OVERRIDE and CONFIG_FUNCTION_ERROR_INJECTION, \
                         which Debian's kernels lack): write fmod_ret:FN",
                    );
                }
                self.may_act("override", pos)?;
                let Some(value) = self.const_int(&args[0]).and_then(|v| i16::try_from(v).ok()) else {
                    return err(
                        args[0].position(),
                        "override() takes a constant return value from -32768 to 32767 (an error is negative: -13)",
                    );
                };
                Ok(self.act(KernelAction::Override(value), pos))
            }
            (Some(Call::Emit), _) => {
                let parts: Vec<&RExpr> = match &args[0] {
                    RExpr::Array(items, _) => items.iter().collect(),
                    one => vec![one],
                };
                let mut fields = Vec::new();
                let mut exprs = Vec::new();
                let mut sems = Vec::new();
                for p in parts {
                    let v = self.expr(p).map_err(|mut e| {
                        if e.userspace {
                            e.userspace = false;
                            e.message = format!("emit() sends kernel values: {}", e.message);
                        }
                        e
                    })?;
                    fields.push((RecordField::Emitted, self.ty(&v)));
                    // A comparison is a bool in the callback, as it would be run whole.
                    sems.push(if self.is_bool(p) { ValueMeaning::Bool } else { self.sem(&v) });
                    exprs.push(v);
                }
                let id = self.next_site;
                self.next_site += 1;
                self.sites.push(Site {
                    id,
                    stmts: Vec::new(),
                    fields,
                    sems,
                    scope: Vec::new(),
                    decls: Vec::new(),
                    own: Vec::new(),
                    carry: false,
                    at: at(pos),
                    emit: true,
                    emit_array: matches!(args[0], RExpr::Array(..)),
                });
                Ok(self.emit_stmt(id, exprs))
            }
            (Some(c @ (Call::Print | Call::Clear | Call::Zero)), _) if self.map_of(&args[0]).is_some() => {
                let m = self.map_of(&args[0]).unwrap();
                let kind = match c {
                    Call::Print => CONTROL_PRINT,
                    Call::Clear => CONTROL_CLEAR,
                    _ => CONTROL_ZERO,
                };
                Ok(control(self, kind, Expr::Int(m.id() as i64)))
            }
            _ => Err(userspace_only(&format!("`{name}(...)`"), pos)),
        }
    }

    /// Statement-level method calls: `m.remove(k)`, `m.clear()`, `m.zero()`, `print(m)`.
    pub(crate) fn method_stmt(&mut self, lhs: &RExpr, rhs: &RExpr, pos: Position) -> Result<StmtKind> {
        if let (Some(map), RExpr::MethodCall(call, mpos)) = (self.map_of(lhs), rhs) {
            match (call.name.as_str(), call.args.len()) {
                ("remove", 1) => {
                    let key = self.key(&call.args[0])?;
                    self.record_use(&map, &key, UseKind::Delete, *mpos);
                    return Ok(StmtKind::MapDelete { map: map.id(), key });
                }
                ("clear", 0) | ("zero", 0) => {
                    let kind = if call.name == "clear" { CONTROL_CLEAR } else { CONTROL_ZERO };
                    return Ok(StmtKind::Control {
                        ring: self.target.control_ring(),
                        lost: self.target.lost_map(),
                        kind,
                        probe: self.target.probe_index,
                        arg: Expr::Int(map.id() as i64),
                    });
                }
                (other, _) => {
                    return err(
                        *mpos,
                        format!("map method `{other}` isn't available in probes (remove, clear, zero are)"),
                    );
                }
            }
        }
        Err(userspace_only("this method call", pos))
    }

    pub(crate) fn check_div(&self, op: BinOp, rhs: &Expr, pos: Position) -> Result<()> {
        if matches!(op, BinOp::Div | BinOp::Mod) && *rhs == Expr::Int(0) {
            return err(pos, "division by zero");
        }
        Ok(())
    }
}

/// A statement-level call; `exit()` also ends the probe at once (as in
/// bpftrace), so none of its later statements run.
pub(crate) fn push_call(push: &mut impl FnMut(StmtKind), k: StmtKind) {
    let exit = matches!(k, StmtKind::Control { kind: CONTROL_EXIT, .. });
    push(k);
    if exit {
        push(StmtKind::Return);
    }
}
