//! `e.args` as a whole value in userspace: the record carries every
//! argument of the event (a tracepoint's own format fields, or the BTF-typed
//! arguments of tp_btf, raw tracepoints and fentry/fexit), and userspace
//! rebuilds them as an object map. Character pointers stay pointers, as
//! bpftrace prints `args`; `str(e.args.F)` or `e.args.F` on its own give
//! the string.
use std::collections::HashSet;

use probes_ebpf::ir::Expr;
use rhai::Position;

use super::{err, index, Lowerer, Result};
use crate::plan::site::RecordField;

impl Lowerer<'_> {
    /// The argument names a whole `e.args` holds.
    fn args_names(&self, pos: Position) -> Result<Vec<String>> {
        if let Some(params) = self.target.event.btf_args() {
            return Ok(params.iter().map(|p| p.name.clone()).collect());
        }
        if let Some(format) = self.target.event.format() {
            return Ok(format.event_fields().map(|f| f.name.clone()).collect());
        }
        err(pos, "this probe type has no named arguments, so `e.args` means nothing here; use e.arg0 .. e.arg9")
    }

    /// Replace each bare `e.args` in `wanted` by its arguments, except those
    /// the statements read by name (they keep their own meaning: a string
    /// for a `char *`). The names added are put in `raw`: shipped as they
    /// are in the event, pointers as numbers.
    pub(crate) fn expand_whole_args(
        &self,
        wanted: &mut Vec<(RecordField, Position)>,
        raw: &mut HashSet<String>,
    ) -> Result<()> {
        let Some(at) =
            wanted.iter().position(|(c, _)| matches!(c, RecordField::Event(p) if p.len() == 1 && p[0] == "args"))
        else {
            return Ok(());
        };
        let pos = wanted[at].1;
        let names = self.args_names(pos)?;
        wanted.retain(|(c, _)| !matches!(c, RecordField::Event(p) if p.len() == 1 && p[0] == "args"));
        for name in names {
            let named = wanted
                .iter()
                .any(|(c, _)| matches!(c, RecordField::Event(p) if p.len() >= 2 && p[0] == "args" && p[1] == name));
            if !named {
                raw.insert(name.clone());
                wanted.push((RecordField::Event(vec!["args".into(), name]), pos));
            }
        }
        Ok(())
    }

    /// The elements of an integer array argument of a whole `e.args`
    /// (`unsigned long args[6]`), if `field` is one.
    pub(crate) fn whole_args_items(&self, field: &str) -> Option<Vec<Expr>> {
        index::array_items(self.target.event.format()?, field)
    }

    /// The value of argument `field` in a whole `e.args`: as the event has
    /// it (no string read behind a pointer). `None` for a field probes
    /// can't read (a struct, a `__data_loc` array): it is left out.
    pub(crate) fn whole_args_value(&mut self, field: &str, pos: Position) -> Option<Expr> {
        if self.target.event.btf_args().is_some() {
            let chain = [("args".to_string(), pos), (field.to_string(), pos)];
            return self.member_chain(&chain).ok().map(|a| a.expr);
        }
        self.tracepoint_arg(field, pos).ok()
    }
}
