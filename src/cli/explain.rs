//! `--explain`: per probe, its attach points, the maps with their layouts,
//! and the generated BPF with the script line each instruction came from.

use probes_ebpf::disasm;
use probes_ebpf::ir::{AggKind, Ty, ValueKind};

use crate::compile::Plan;
use crate::script::Session;

fn ty_text(t: &Ty) -> String {
    match t {
        Ty::Int => "int".into(),
        Ty::Bytes(n) => format!("string[{n}]"),
    }
}

pub fn print(session: &Session, plan: &Plan, source: &str) {
    let lines: Vec<&str> = source.lines().collect();
    let handles = session.registry.lock().unwrap().maps.clone();
    println!("maps:");
    for (h, shape) in handles.iter().zip(&plan.shapes) {
        let l = &shape.layout;
        let key = if l.key.is_empty() { "none".to_string() } else { l.key.iter().map(ty_text).collect::<Vec<_>>().join(", ") };
        let value = match (&l.value, shape.agg) {
            (ValueKind::Agg(_), Some(op)) => format!("{op:?}").to_lowercase(),
            (ValueKind::Value(t), _) => ty_text(t),
            (ValueKind::Agg(AggKind::Hist), None) => "hist".into(),
            _ => "?".into(),
        };
        let kind = if l.is_array() { "percpu array" } else if l.is_percpu() { "percpu hash" } else { "hash" };
        println!("  @{}: {kind}, key [{key}] ({} bytes), value {value} ({} bytes)", h.name(), l.key_size(), l.value_size());
    }
    for p in &plan.begin {
        println!("\nprobe BEGIN: runs in userspace");
        let _ = p;
    }
    for prog in &plan.programs {
        println!(
            "\nprobe {} — {} attach point(s), kernel only, {} instructions, {} bytes of stack",
            prog.name,
            prog.points.len(),
            prog.code.insns.len(),
            prog.code.stack_size
        );
        let mut last_line = u32::MAX;
        for (i, text) in disasm::disassemble(&prog.code.insns) {
            let span = prog.code.spans[i];
            if span.line != last_line && span.line > 0 {
                let src = lines.get(span.line as usize - 1).map(|s| s.trim()).unwrap_or("");
                println!("  ; {}:{}  {}", span.line, span.col, src);
                last_line = span.line;
            }
            println!("  {i:4}: {text}");
        }
    }
    for _ in &plan.end {
        println!("\nprobe END: runs in userspace");
    }
}
