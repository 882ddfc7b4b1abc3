//! The `--explain` text of a plan: per probe, its attach points, the maps
//! with their layouts, the kernel/userspace split with each record's
//! layout, and the generated BPF with the script line each instruction came
//! from. The golden tests compare it too.

use std::fmt::Write;

use probes_ebpf::disasm;
use probes_ebpf::ir::{AggKind, Ty, ValueKind};

use super::Plan;
use crate::plan::site::RecordField;
use crate::script::Session;

fn ty_text(t: &Ty) -> String {
    match t {
        Ty::Int => "int".into(),
        Ty::Bytes(n) => format!("string[{n}]"),
    }
}

/// The source from `line:col` to the end of that line, cut at 60 characters.
fn statement_text(lines: &[&str], line: u32, col: u32) -> String {
    let Some(l) = lines.get((line as usize).wrapping_sub(1)) else { return String::new() };
    let from: String = l.chars().skip((col as usize).saturating_sub(1)).collect();
    // A trailing `// comment` isn't part of the statement.
    let from = from.split(" //").next().unwrap_or("").trim_end();
    if from.chars().count() > 60 {
        format!("{}…", from.chars().take(59).collect::<String>())
    } else {
        from.to_string()
    }
}

/// What `--explain` prints: the maps, and per probe where each statement
/// runs, each record's layout and the code.
pub fn render(session: &Session, plan: &Plan, source: &str) -> String {
    render_with(session, plan, source, true)
}

/// The same, with the code (instruction count, stack size, disassembly)
/// only when `code`: without it the text says what the split decided and
/// nothing a code generator change would move.
pub fn render_with(session: &Session, plan: &Plan, source: &str, code: bool) -> String {
    let mut out = String::new();
    let lines: Vec<&str> = source.lines().collect();
    let handles = session.registry.lock().unwrap().maps.clone();
    let _ = writeln!(out, "maps:");
    for (h, shape) in handles.iter().zip(&plan.shapes) {
        let l = &shape.layout;
        let key = if l.key.is_empty() {
            "none".to_string()
        } else {
            l.key.iter().map(ty_text).collect::<Vec<_>>().join(", ")
        };
        let value = match (&l.value, shape.agg) {
            (ValueKind::Agg(_), Some(op)) => format!("{op:?}").to_lowercase(),
            (ValueKind::Value(t), _) => ty_text(t),
            (ValueKind::Agg(AggKind::Hist), None) => "hist".into(),
            _ => "?".into(),
        };
        let kind = if l.is_array() {
            "percpu array"
        } else if l.is_percpu() {
            "percpu hash"
        } else {
            "hash"
        };
        let _ = writeln!(
            out,
            "  @{}: {kind}, key [{key}] ({} bytes), value {value} ({} bytes)",
            h.name(),
            l.key_size(),
            l.value_size()
        );
    }
    for p in &plan.begin {
        let _ = writeln!(out, "\nprobe BEGIN: runs in userspace");
        let _ = p;
    }
    for prog in &plan.programs {
        let sites: Vec<_> = plan.sites.iter().filter(|s| prog.site_ids.contains(&s.site.id)).collect();
        let place = if sites.is_empty() { "kernel only" } else { "kernel + userspace" };
        let _ = write!(out, "\nprobe {} — {} attach point(s), {place}", prog.name, prog.points.len());
        let _ = match code {
            true => writeln!(out, ", {} instructions, {} bytes of stack", prog.code.insns.len(), prog.code.stack_size),
            false => writeln!(out),
        };
        if prog.dispatch > 0 {
            let _ = writeln!(
                out,
                "  one program on {} for {} syscall{}: it branches on the syscall number (e.probe and e.args per syscall); \
                 {} or more syscall tracepoints of one direction in one probe() get one (RTRACE_SYSCALL_DISPATCH), \
                 any number when the probe reads a kernel stack",
                prog.points.first().map(|p| p.name.as_str()).unwrap_or("?"),
                prog.dispatch,
                if prog.dispatch == 1 { "" } else { "s" },
                plan.syscall_dispatch
            );
        }
        if !prog.split.is_empty() {
            let _ = writeln!(out, "  where each statement runs:");
        }
        for p in &prog.split {
            let text = statement_text(&lines, p.at.line, p.at.col);
            let indent = "  ".repeat(p.depth as usize);
            let (place, why) = match &p.userspace {
                None => ("kernel   ", String::new()),
                Some(why) => ("userspace", format!("  — {why}")),
            };
            let at = format!("{}:{}", p.at.line, p.at.col);
            let _ = writeln!(out, "    {indent}{place} {at:<6} {text}{why}");
        }
        for sp in &sites {
            let site = &sp.site;
            let layout: Vec<String> = site
                .fields
                .iter()
                .map(|(cap, ty)| {
                    let name = match cap {
                        RecordField::Event(path) => format!("e.{}", path.join(".")),
                        RecordField::Local { name, .. } => name.clone(),
                        RecordField::Emitted => "emitted".into(),
                        RecordField::EventItem { path, index } => format!("e.{}[{index}]", path.join(".")),
                        RecordField::Read { line, col } => format!("str() at {line}:{col}"),
                        RecordField::MapRead { line, col } => format!("map read at {line}:{col}"),
                        RecordField::EventKey(0) => "event cpu".into(),
                        RecordField::EventKey(_) => "event time".into(),
                        RecordField::KptrBase { ty, .. } => format!("kptr(.., \"{ty}\")"),
                        RecordField::KptrMember { path, .. } => format!("kptr(..).{}", path.join(".")),
                    };
                    format!("{name}: {}", ty_text(ty))
                })
                .collect();
            let _ = writeln!(
                out,
                "  userspace statements from {} (record #{}: u32 site, u32 pad, {})",
                site.at,
                site.id,
                if layout.is_empty() { "no fields".to_string() } else { layout.join(", ") }
            );
            let mut shown = std::collections::BTreeSet::new();
            for st in &site.stmts {
                if let Some(line) = st.position().line() {
                    if shown.insert(line) {
                        let _ =
                            writeln!(out, "    user {line}: {}", lines.get(line - 1).map(|s| s.trim()).unwrap_or(""));
                    }
                }
            }
        }
        let mut last_line = u32::MAX;
        let insns = if code { &prog.code.insns[..] } else { &[] };
        for (i, text) in disasm::disassemble(insns) {
            let span = prog.code.spans[i];
            if span.line != last_line && span.line > 0 {
                let src = lines.get(span.line as usize - 1).map(|s| s.trim()).unwrap_or("");
                let _ = writeln!(out, "  ; {}:{}  {}", span.line, span.col, src);
                last_line = span.line;
            }
            let _ = writeln!(out, "  {i:4}: {text}");
        }
    }
    for _ in &plan.end {
        let _ = writeln!(out, "\nprobe END: runs in userspace");
    }
    out
}
