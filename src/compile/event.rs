//! The event `e` in the kernel: builtins (`e.pid` … `e.rand`, `e.comm`,
//! `e.elapsed`, `e.probe`), stacks, `e.curtask` and BTF member chains, and
//! what the attach point's `EventContext` says about `e.argN`, `e.args.X`,
//! `e.retval`, `e.func`.
use probes_ebpf::ir::{BinOp, Builtin, ContextKind, Expr, LocalId, Memory};
use rhai::{Expr as RExpr, Position};

use super::fields;
use super::lower::{err, property_chain, str_literal, userspace_only, LowerError, Lowerer, Result};
use super::syntax::indexed_arg;
use crate::builtins::Field;
use crate::kernel::btf::Shape;
use crate::kernel::tracepoint_format::{c_int_width, FieldKind};
use crate::probes::event::btf_slot;
use crate::symbols::stacks::StackMode;

impl Lowerer<'_> {
    /// `e.args.X` (a `__user` pointer field) or a local holding one.
    pub(crate) fn user_struct_pointer(&self, e: &RExpr) -> bool {
        if let RExpr::Variable(v, _, _) = e {
            return self.lookup_local(v.1.as_str()).is_some_and(|id| self.local_user.contains(&id));
        }
        let RExpr::Dot(x, _, _) = e else { return false };
        let (chain, rest) = property_chain(&x.rhs);
        !rest && chain.len() == 2 && chain[0].0 == "args" && self.user_field(&chain[1].0)
    }

    /// `e.args.X` where X is a `__user` pointer field.
    /// The memory `str(e)` / `buf(e, n)` read: user memory for user
    /// pointers (uprobes, syscall arguments, `__user` fields, `uptr(x)`),
    /// kernel memory for `kptr(x)`, else what the probe's pointer arguments
    /// point to (a kernel function's: kernel, then user memory).
    pub(crate) fn pointer_memory(&self, e: &RExpr) -> Memory {
        if let RExpr::FnCall(call, _) = e {
            match (call.name.as_str(), call.args.len()) {
                ("uptr", 1) => return Memory::User,
                ("kptr", 1) => return Memory::Kernel,
                _ => {}
            }
        }
        match self.is_user_pointer(e) {
            true => Memory::User,
            false => self.target.event.pointer_memory(),
        }
    }

    fn is_user_pointer(&self, e: &RExpr) -> bool {
        if self.target.event.user_memory() {
            return true;
        }
        // A syscall's pointers are the caller's memory, also once saved in a
        // map or a local (`str(path[e.tid])` at sys_exit_openat).
        if self.target.event.format().is_some_and(|f| f.category == "syscalls") && !matches!(e, RExpr::Dot(..)) {
            return true;
        }
        let (Some(format), RExpr::Dot(x, _, _)) = (self.target.event.format(), e) else { return false };
        if let Some((field, _, _)) = indexed_arg(&x.rhs) {
            return self.user_field(field);
        }
        if let RExpr::Dot(inner, _, _) = &x.rhs {
            if let (RExpr::Property(a, _), RExpr::Property(f, _)) = (&inner.lhs, &inner.rhs) {
                if a.2.as_str() == "args" {
                    return matches!(
                        format.field(f.2.as_str()).map(|f| &f.kind),
                        Some(FieldKind::Pointer { user: true, .. })
                    );
                }
            }
        }
        false
    }

    /// A typed kernel value reached by a property chain: `e.curtask`,
    /// `e.args.X...`, `e.curtask.X...`, or `t.X...` of a local holding a BTF
    /// struct pointer. `None` for every other property access.
    pub(crate) fn pointer_access(&mut self, lhs: &RExpr, rhs: &RExpr, pos: Position) -> Option<Result<fields::Access>> {
        if let RExpr::FnCall(c, _) = lhs {
            // `kptr(v, "struct sock").member`.
            return (c.name == "kptr" && c.args.len() == 2).then(|| self.kptr_member(&c.args, rhs, pos));
        }
        let RExpr::Variable(v, _, _) = lhs else { return None };
        let (chain, rest) = property_chain(rhs);
        if rest || chain.is_empty() {
            return None;
        }
        let name = v.1.as_str();
        if let Some((id, to)) = self.btf_local(name) {
            // `t.pid` where `let t = e.curtask;`: members through BTF.
            let Some(btf) = self.target.btf else { return Some(err(pos, "this kernel has no BTF")) };
            let names: Vec<String> = chain.iter().map(|c| c.0.clone()).collect();
            let base = fields::Base { value: Expr::Local(id), ty: to, pointee: true, name: name.to_string() };
            let user = self.local_user.contains(&id);
            return Some(fields::walk(btf, base, &names).map(|a| user_access(a, user)).map_err(|(i, msg)| {
                let at = chain.get(i).or(chain.last()).map(|c| c.1).unwrap_or(pos);
                LowerError { pos: at, message: msg, userspace: false }
            }));
        }
        if Some(name) != self.event.as_deref() || self.lookup_local(name).is_some() {
            return None;
        }
        match chain[0].0.as_str() {
            "curtask" if chain.len() == 1 => Some(Ok(fields::Access {
                expr: Expr::Builtin(Builtin::CurTask),
                char_pointer: false,
                pointee: self.target.btf.and_then(|b| b.struct_named("task_struct")),
            })),
            "curtask" | "args" if chain.len() >= 2 => Some(self.member_chain(&chain)),
            _ => None,
        }
    }

    /// A kernel local holding a BTF struct pointer: its id and struct type.
    pub(crate) fn btf_local(&self, name: &str) -> Option<(LocalId, u32)> {
        let id = self.lookup_local(name)?;
        self.local_btf.get(&id).map(|to| (id, *to))
    }

    /// `e.FIELD`, `e.args.FIELD`.
    pub(crate) fn dot(&mut self, lhs: &RExpr, rhs: &RExpr, pos: Position) -> Result<Expr> {
        if let Some(access) = self.pointer_access(lhs, rhs, pos) {
            return access.map(|a| self.typed_value(a));
        }
        if let RExpr::Variable(v, _, _) = lhs {
            if self.btf_local(v.1.as_str()).is_some() {
                return Err(userspace_only(&format!("`{}...`", v.1), pos));
            }
        }
        let is_event = matches!(lhs, RExpr::Variable(v, _, _) if Some(v.1.as_str()) == self.event.as_deref() && self.lookup_local(v.1.as_str()).is_none());
        if let (true, Some((field, fpos, ix))) = (is_event, indexed_arg(rhs)) {
            return self.arg_element(field, fpos, ix).map(|(e, _)| e);
        }
        if !is_event {
            if let RExpr::MethodCall(call, _) = rhs {
                return Err(userspace_only(&format!("`.{}()`", call.name), pos));
            }
            return Err(userspace_only("this property access", pos));
        }
        match rhs {
            RExpr::Property(p, ppos) => self.event_field(p.2.as_str(), *ppos),
            RExpr::Dot(..) => {
                let (chain, rest) = property_chain(rhs);
                let names: Vec<String> = chain.iter().map(|c| c.0.clone()).collect();
                match (names.first().map(String::as_str), rest) {
                    (Some("args"), _) if names.len() == 1 => {
                        err(chain[0].1, "`e.args` needs a field name, e.g. `e.args.filename`")
                    }
                    // e.g. `e.comm.len()`: string work on a captured field.
                    (Some(first), _) => {
                        Err(userspace_only(&format!("`{}.{}...`", self.event.as_deref().unwrap_or("e"), first), pos))
                    }
                    _ => err(pos, "unsupported field access"),
                }
            }
            RExpr::MethodCall(call, mpos) if crate::builtins::is_stack(call.name.as_str()) => {
                let mut words = Vec::new();
                for a in call.args.iter() {
                    match self.const_arg(a) {
                        Some(w) => words.push(w),
                        None => {
                            return err(
                                a.position(),
                                "stack arguments are a constant limit and/or a mode: \"bpftrace\", \"perf\", \"raw\"",
                            );
                        }
                    }
                }
                let mut path = vec![call.name.to_string()];
                path.extend(words);
                self.stack_expr(&path, *mpos)
            }
            RExpr::MethodCall(call, mpos) => err(
                *mpos,
                format!(
                    "`{}.{}()` isn't available on this kernel side yet",
                    self.event.as_deref().unwrap_or("e"),
                    call.name
                ),
            ),
            _ => err(pos, "unsupported field access"),
        }
    }

    /// `e.kstack`, `e.ustack(8)`, `e.kstack("perf", 3)`: `path` is the name
    /// followed by the arguments as text.
    pub(crate) fn stack_expr(&mut self, path: &[String], pos: Position) -> Result<Expr> {
        let user = path[0] == "ustack";
        let mut depth = self.target.settings.stack_depth;
        let mut mode = StackMode::Bpftrace;
        for arg in &path[1..] {
            if let Ok(n) = arg.parse::<u32>() {
                if n == 0 || n > 127 {
                    return err(pos, "a stack limit must be from 1 to 127 frames");
                }
                depth = n;
            } else if let Some(m) = StackMode::parse(arg) {
                mode = m;
            } else {
                return err(pos, format!("unknown stack mode \"{arg}\" (bpftrace, perf, raw)"));
            }
        }
        if self.target.context == ContextKind::RawTracepoint && !user {
            // Raw tracepoints have no pt_regs for the kernel walker to start from.
        }
        let map = self.target.stack_map(depth, user, mode);
        let skip = if user { 0 } else { self.target.event.kernel_stack_skip() };
        Ok(Expr::StackId { map, user, lost: self.target.stack_lost(), skip })
    }

    pub(crate) fn event_field(&mut self, name: &str, pos: Position) -> Result<Expr> {
        let Some((field, _)) = crate::builtins::event_field(name) else {
            let known: Vec<&str> = crate::builtins::field_names().collect();
            return err(pos, format!("unknown event field `{name}` (known: {} argN)", known.join(" ")));
        };
        let unavailable = || err(pos, format!("`e.{name}` isn't available for this probe type yet"));
        Ok(match field {
            Field::Pid => Expr::Builtin(Builtin::Pid),
            Field::Tid => Expr::Builtin(Builtin::Tid),
            Field::Uid => Expr::Builtin(Builtin::Uid),
            Field::Gid => Expr::Builtin(Builtin::Gid),
            Field::Cpu => Expr::Builtin(Builtin::Cpu),
            Field::Nsecs => self.event_nsecs(),
            Field::Cgroup => Expr::Builtin(Builtin::Cgroup),
            Field::Rand => self.event_rand(),
            Field::Comm => Expr::Comm,
            Field::Elapsed => Expr::Binary(
                BinOp::Sub,
                Box::new(self.event_nsecs()),
                Box::new(Expr::Int(self.target.settings.start_ns)),
            ),
            Field::Probe => str_literal(self.target.probe_name),
            Field::Args => return err(pos, "`e.args` needs a field name, e.g. `e.args.filename`"),
            Field::Arg(i) => match self.target.event.arg(i, self.target.probe_name) {
                // BTF-typed arguments (fentry, tp_btf, lsm) read at their
                // width and sign, as `e.args.NAME` does: an `int` -1 is -1.
                Some(Ok(x)) => match (self.target.event.btf_args(), self.target.btf) {
                    (Some(params), Some(btf)) if (i as usize) < params.len() => btf_slot(btf, i, params[i as usize].ty),
                    _ => x,
                },
                Some(Err(m)) => return err(pos, m),
                None => {
                    return err(
                        pos,
                        format!("`{name}` isn't available for this probe type (tracepoints use e.args.NAME)"),
                    );
                }
            },
            Field::Retval => match self.target.event.retval() {
                Some(x) => x,
                None => return unavailable(),
            },
            Field::Func => match self.target.event.func() {
                Some(f) => str_literal(f),
                None => return unavailable(),
            },
            Field::Kstack | Field::Ustack => return self.stack_expr(&[name.to_string()], pos),
            Field::Curtask => Expr::Builtin(Builtin::CurTask),
            Field::Jiffies => Expr::Builtin(Builtin::Jiffies),
            Field::Usermode => self.usermode(),
            Field::NsPid | Field::NsTid => return self.ns_id(field == Field::NsPid, name, pos),
        })
    }

    /// `e.usermode`: 1 when the event interrupted user mode (the saved
    /// registers' code segment is a user one), as bpftrace's `usermode`.
    /// Uprobes and USDT always are; kprobes read their registers (0: they
    /// are in the kernel); perf events read the interrupted registers;
    /// tracepoints, raw tracepoints, fentry/fexit and LSM hooks run in the
    /// kernel, so 0.
    fn usermode(&self) -> Expr {
        if self.target.event.user_memory() {
            return Expr::Int(1);
        }
        match self.target.context {
            ContextKind::PtRegs | ContextKind::PerfEvent => {
                // `struct pt_regs` (first in `bpf_perf_event_data`): cs, whose
                // low two bits are the privilege level (3: user).
                let cs = Expr::CtxInt { offset: crate::kernel::arch::CS, size: 8, signed: false };
                let rpl = Expr::Binary(BinOp::And, Box::new(cs), Box::new(Expr::Int(3)));
                Expr::Binary(BinOp::Eq, Box::new(rpl), Box::new(Expr::Int(3)))
            }
            ContextKind::Tracepoint | ContextKind::RawTracepoint => Expr::Int(0),
        }
    }

    /// `e.ns_pid` / `e.ns_tid`: `task->thread_pid` (of the thread group
    /// leader for the pid), then `numbers[level].nr`: the id in the
    /// innermost pid namespace the task is in.
    fn ns_id(&self, process: bool, name: &str, pos: Position) -> Result<Expr> {
        let missing =
            |what: &str| err(pos, format!("`e.{name}` reads {what} through BTF, which this kernel doesn't describe"));
        let Some(btf) = self.target.btf else { return missing("the task's pid") };
        let Some(task) = btf.struct_named("task_struct") else { return missing("task_struct") };
        let Some(pid) = btf.struct_named("pid") else { return missing("struct pid") };
        let Some(upid) = btf.struct_named("upid") else { return missing("struct upid") };
        let (Some(numbers), Some(nr), Some(ns)) =
            (btf.member(pid, "numbers"), btf.member(upid, "nr"), btf.member(upid, "ns"))
        else {
            return missing("struct pid's numbers");
        };
        let base =
            fields::Base { value: Expr::Builtin(Builtin::CurTask), ty: task, pointee: true, name: "task".into() };
        let path: Vec<String> =
            if process { vec!["group_leader".into(), "thread_pid".into()] } else { vec!["thread_pid".into()] };
        let walked =
            fields::walk(btf, base, &path).map_err(|(_, m)| LowerError { pos, message: m, userspace: false })?;
        // The level and the number both start from the `struct pid` pointer.
        let pid_ptr = walked.expr;
        let level_base = fields::Base { value: pid_ptr.clone(), ty: pid, pointee: true, name: "pid".into() };
        let level = fields::walk(btf, level_base, &["level".to_string()])
            .map_err(|(_, m)| LowerError { pos, message: m, userspace: false })?
            .expr;
        // `struct upid` is { int nr; struct pid_namespace *ns; }: ns is its last member.
        let upid_size = (ns.bit_offset / 8 + 8) as i64;
        let index = if upid_size.count_ones() == 1 {
            Expr::Binary(BinOp::Shl, Box::new(level), Box::new(Expr::Int(upid_size.trailing_zeros() as i64)))
        } else {
            Expr::Binary(BinOp::Mul, Box::new(level), Box::new(Expr::Int(upid_size)))
        };
        let offset = Expr::Int((numbers.bit_offset / 8 + nr.bit_offset / 8) as i64);
        let addr = Expr::Binary(
            BinOp::Add,
            Box::new(Expr::Binary(BinOp::Add, Box::new(pid_ptr), Box::new(offset))),
            Box::new(index),
        );
        Ok(Expr::ReadMem { addr: Box::new(addr), size: 4, signed: true, mem: Memory::Kernel })
    }

    /// `e.args.A.B...` and `e.curtask.A...`: a typed start, then struct
    /// members through BTF.
    pub(crate) fn member_chain(&mut self, chain: &[(String, Position)]) -> Result<fields::Access> {
        let ev = self.event.clone().unwrap_or_else(|| "e".into());
        let no_btf =
            |pos| err(pos, "this kernel has no BTF (/sys/kernel/btf/vmlinux), so struct members can't be read");
        let mut user = false;
        let (base, rest) = match chain[0].0.as_str() {
            "curtask" => {
                let Some(btf) = self.target.btf else { return no_btf(chain[0].1) };
                let Some(task) = btf.struct_named("task_struct") else { return no_btf(chain[0].1) };
                let name = format!("{ev}.curtask");
                (fields::Base { value: Expr::Builtin(Builtin::CurTask), ty: task, pointee: true, name }, &chain[1..])
            }
            _ => {
                let (field, fpos) = (&chain[1].0, chain[1].1);
                let name = format!("{ev}.args.{field}");
                if let Some(params) = self.target.event.btf_args() {
                    let Some(i) = params.iter().position(|p| &p.name == field) else {
                        let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
                        return err(
                            fpos,
                            format!(
                                "{} has no argument `{field}` (arguments: {})",
                                self.target.probe_name,
                                names.join(", ")
                            ),
                        );
                    };
                    let Some(btf) = self.target.btf else { return no_btf(fpos) };
                    let value = btf_slot(btf, i as u32, params[i].ty);
                    if chain.len() == 2 {
                        let (char_pointer, pointee) = match btf.shape(params[i].ty) {
                            Shape::Pointer { to } => (btf.is_char(to), fields::composite(btf, to)),
                            _ => (false, None),
                        };
                        return Ok(fields::Access { expr: value, char_pointer, pointee });
                    }
                    (fields::Base { value, ty: params[i].ty, pointee: false, name }, &chain[2..])
                } else {
                    let value = self.tracepoint_arg(field, fpos)?;
                    let c_type = self
                        .target
                        .event
                        .format()
                        .and_then(|f| f.field(field))
                        .map(|f| f.c_type.clone())
                        .unwrap_or_default();
                    // A tracepoint field that points to a struct (`struct mm_struct *mm`,
                    // `const struct __kernel_timespec *rqtp`); a system call's
                    // pointers lead to user memory.
                    user = self.user_field(field);
                    let unqualified: Vec<&str> =
                        c_type.split_whitespace().filter(|w| !matches!(*w, "const" | "volatile" | "__user")).collect();
                    let unqualified = unqualified.join(" ");
                    let struct_name =
                        unqualified.strip_prefix("struct ").and_then(|t| t.strip_suffix('*')).map(str::trim);
                    let pointee = struct_name.and_then(|n| self.target.btf?.struct_named(n));
                    if chain.len() == 2 {
                        return Ok(fields::Access { expr: value, char_pointer: false, pointee });
                    }
                    let Some(id) = pointee else {
                        if self.target.btf.is_none() {
                            return no_btf(fpos);
                        }
                        return err(chain[2].1, format!("`{name}` is `{c_type}`, not a pointer to a struct"));
                    };
                    (fields::Base { value, ty: id, pointee: true, name }, &chain[2..])
                }
            }
        };
        let Some(btf) = self.target.btf else { return no_btf(chain[0].1) };
        let names: Vec<String> = rest.iter().map(|c| c.0.clone()).collect();
        fields::walk(btf, base, &names).map(|a| user_access(a, user)).map_err(|(i, msg)| {
            let pos = rest.get(i).or(rest.last()).map(|c| c.1).unwrap_or(chain[0].1);
            LowerError { pos, message: msg, userspace: false }
        })
    }

    /// Tracepoint field `field` is a `__user` pointer.
    pub(crate) fn user_field(&self, field: &str) -> bool {
        matches!(
            self.target.event.format().and_then(|f| f.field(field)).map(|f| &f.kind),
            Some(FieldKind::Pointer { user: true, .. })
        )
    }

    pub(crate) fn tracepoint_arg(&mut self, field: &str, pos: Position) -> Result<Expr> {
        if self.target.event.btf_args().is_some() {
            let chain = [("args".to_string(), pos), (field.to_string(), pos)];
            return self.member_chain(&chain).map(|a| self.typed_value(a));
        }
        let Some(format) = self.target.event.format() else {
            return err(pos, "`e.args` is only available for tracepoint probes (raw tracepoints use e.arg0..)");
        };
        let Some(f) = format.field(field) else {
            let names: Vec<&str> = format.event_fields().map(|f| f.name.as_str()).collect();
            return err(
                pos,
                format!(
                    "tracepoint {}:{} has no field `{field}` (fields: {})",
                    format.category,
                    format.name,
                    names.join(", ")
                ),
            );
        };
        Ok(match &f.kind {
            FieldKind::Int if f.size == 8 && c_int_width(&f.c_type).is_some() => {
                // Syscall formats widen every argument to 8 bytes, unsigned;
                // the C type says what the value really is (`int dfd` = -100).
                let (size, signed) = c_int_width(&f.c_type).unwrap_or((8, f.signed));
                Expr::CtxInt { offset: f.offset, size, signed }
            }
            FieldKind::Int | FieldKind::Pointer { .. } if f.size <= 8 && f.size.is_power_of_two() => Expr::CtxInt {
                offset: f.offset,
                size: f.size,
                signed: f.signed && !matches!(f.kind, FieldKind::Pointer { .. }),
            },
            FieldKind::CharArray => Expr::CtxCharArray { offset: f.offset, len: f.size },
            FieldKind::DataLocString => Expr::CtxDataLocStr { offset: f.offset, max: self.target.settings.str_max },
            _ => return err(pos, format!("field `{field}` has type `{}`, which probes can't read yet", f.c_type)),
        })
    }
}

/// A member chain's reads, from user memory when `user`.
pub(crate) fn user_access(mut a: fields::Access, user: bool) -> fields::Access {
    if user {
        a.expr = fields::in_user_memory(a.expr);
    }
    a
}
