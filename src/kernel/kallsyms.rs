//! Kernel function names, from the text symbols of /proc/kallsyms: what
//! kprobe/kretprobe/fentry/fexit expand and list.

use std::sync::OnceLock;

/// Function names from /proc/kallsyms (text symbols), sorted and
/// deduplicated, read once.
pub fn kernel_functions() -> &'static [String] {
    static FUNCS: OnceLock<Vec<String>> = OnceLock::new();
    FUNCS.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        let mut v: Vec<String> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let (_, kind, name) = (it.next()?, it.next()?, it.next()?);
                (matches!(kind, "t" | "T") && it.next().is_none()).then(|| name.to_string())
            })
            .collect();
        v.sort();
        v.dedup();
        v
    })
}
