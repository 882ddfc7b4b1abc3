//! Which kernel values are pointers (tracepoint fields declared as
//! pointers, BTF members and arguments that point to a struct or to chars,
//! `kptr()` values, `e.curtask`), so that map keys and values holding one
//! print in hex as bpftrace prints them (`plan::site::ValueMeaning::Ptr`).

use probes_ebpf::ir::{Builtin, Expr};

use super::fields::Access;
use super::lower::Lowerer;
use crate::kernel::tracepoint_format::FieldKind;

impl Lowerer<'_> {
    /// The value of a typed access, remembered as a pointer when it is one.
    pub(crate) fn typed_value(&mut self, a: Access) -> Expr {
        self.note_pointer(&a);
        a.expr
    }

    /// Remember `a`'s value as a pointer when its type is one.
    pub(crate) fn note_pointer(&mut self, a: &Access) {
        if (a.char_pointer || a.pointee.is_some()) && !self.pointers.contains(&a.expr) {
            self.pointers.push(a.expr.clone());
        }
    }

    /// Whether kernel value `e` is a pointer.
    pub(crate) fn is_pointer(&self, e: &Expr) -> bool {
        match e {
            Expr::Builtin(Builtin::CurTask) => true,
            Expr::CtxInt { offset, size: 8, .. } => self.target.event.format().is_some_and(|f| {
                f.event_fields().any(|x| x.offset == *offset && matches!(x.kind, FieldKind::Pointer { .. }))
            }),
            _ => self.pointers.contains(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::kernel::fake::FakeKernel;
    use crate::plan::site::ValueMeaning;
    use crate::plan::Plan;
    use crate::script::Session;

    fn compile(script: &str, check_helpers: u8) -> (Session, Plan) {
        let mut config = Config::defaults();
        config.check_helpers = check_helpers;
        let mut session = Session::new("t.rhai", script, &[]).expect("script");
        session.run_top_level().expect("top level");
        let plan = super::super::compile(&session, &config, &FakeKernel::from_fixtures()).expect("compiles");
        (session, plan)
    }

    const OPENS: &str = r#"let by_name = map();
let last = map();
let names = map();
probe("tracepoint:syscalls:sys_enter_openat", |e| {
    by_name[e.args.filename] = count();
    last[e.tid] = e.args.filename;
    names[e.tid] = e.args.flags;
    let s = str(e.args.filename);
    print(s);
});
"#;

    #[test]
    fn pointer_fields_print_as_pointers_in_keys_and_values() {
        let (_, plan) = compile(OPENS, 0);
        assert_eq!(plan.shapes[0].key_sems, vec![ValueMeaning::Ptr], "by_name[e.args.filename]");
        assert_eq!(
            (plan.shapes[1].key_sems[0], plan.shapes[1].value_meaning),
            (ValueMeaning::Plain, ValueMeaning::Ptr),
            "last"
        );
        assert_eq!(plan.shapes[2].value_meaning, ValueMeaning::Plain, "flags is an int");
        let (_, plan) = compile(
            r#"let total = map();
probe("tracepoint:syscalls:sys_enter_openat", |e| { total[e.tid] += e.args.flags; });
"#,
            0,
        );
        assert_eq!(plan.shapes[0].value_meaning, ValueMeaning::Plain, "a map only added to holds numbers");
    }

    #[test]
    fn helper_checks_only_with_k() {
        let (_, plain) = compile(OPENS, 0);
        assert!(plain.maps.helper_errors().is_none());
        assert!(plain.programs.iter().all(|p| p.code.helper_sites.is_empty()));
        let (_, k) = compile(OPENS, 1);
        let (_, kk) = compile(OPENS, 2);
        assert!(k.maps.helper_errors().is_some());
        let helpers = |plan: &Plan| -> Vec<(u32, &'static str)> {
            let sites = plan.programs.iter().flat_map(|p| p.code.helper_sites.iter());
            sites.map(|s| (s.span.line, probes_ebpf::helpers::name(s.helper))).collect()
        };
        assert!(helpers(&k).iter().all(|(_, h)| !h.starts_with("probe_read")), "{:?}", helpers(&k));
        assert!(helpers(&k).contains(&(6, "map_update_elem")), "{:?}", helpers(&k));
        assert!(helpers(&kk).contains(&(8, "probe_read_user_str")), "{:?}", helpers(&kk));
        let len = |plan: &Plan| plan.programs[0].code.insns.len();
        assert!(len(&plain) < len(&k) && len(&k) < len(&kk));
        // Slots are numbered across programs, from 0.
        let slots: Vec<u32> = kk.programs.iter().flat_map(|p| p.code.helper_sites.iter().map(|s| s.slot)).collect();
        assert_eq!(slots, (0..slots.len() as u32).collect::<Vec<_>>());
    }
}
