//! The kernel's BTF as compile sees it: parsed on the first question, not
//! when a program is lowered. Parsing vmlinux BTF (about 140,000 types)
//! costs a few milliseconds and over 1 MiB of memory for the whole run,
//! which a script that never reads a kernel struct (most tracepoint and
//! syscall scripts) should not pay.

use std::path::Path;

use super::btf::{kernel, BtfTypes, Member, Param, Shape};

/// Answers from [`kernel`], loading it on first use; an unparsable BTF file
/// answers like one without the type asked for.
struct OnFirstUse;

/// The kernel's types when it has BTF (`/sys/kernel/btf/vmlinux` exists),
/// without parsing them yet.
pub fn types() -> Option<&'static dyn BtfTypes> {
    static LAZY: OnFirstUse = OnFirstUse;
    Path::new(super::btf::VMLINUX_BTF).exists().then_some(&LAZY as &dyn BtfTypes)
}

impl BtfTypes for OnFirstUse {
    fn struct_named(&self, name: &str) -> Option<u32> {
        kernel()?.struct_named(name)
    }
    fn union_named(&self, name: &str) -> Option<u32> {
        kernel()?.union_named(name)
    }
    fn tracepoint_id(&self, event: &str) -> Option<u32> {
        kernel()?.tracepoint_id(event)
    }
    fn function_id(&self, name: &str) -> Option<u32> {
        kernel()?.function_id(name)
    }
    fn tracepoint_params(&self, event: &str) -> Option<Vec<Param>> {
        kernel()?.tracepoint_params(event)
    }
    fn function_params(&self, name: &str) -> Option<(Vec<Param>, u32)> {
        kernel()?.function_params(name)
    }
    fn tracepoint_names(&self) -> Vec<String> {
        kernel().map(|b| b.tracepoint_names()).unwrap_or_default()
    }
    fn function_names(&self, prefix: &str) -> Vec<String> {
        kernel().map(|b| b.function_names(prefix)).unwrap_or_default()
    }
    fn shape(&self, id: u32) -> Shape {
        kernel().map_or(Shape::Other, |b| b.shape(id))
    }
    fn is_char(&self, id: u32) -> bool {
        kernel().is_some_and(|b| b.is_char(id))
    }
    fn member(&self, id: u32, name: &str) -> Option<Member> {
        kernel()?.member(id, name)
    }
    fn member_names(&self, id: u32) -> Vec<String> {
        kernel().map(|b| b.member_names(id)).unwrap_or_default()
    }
    fn starts_with(&self, outer: u32, inner: u32) -> bool {
        kernel().is_some_and(|b| b.starts_with(outer, inner))
    }
    fn type_name(&self, id: u32) -> String {
        kernel().map(|b| b.type_name(id)).unwrap_or_default()
    }
}
