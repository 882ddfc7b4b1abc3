//! Kernel functions that kprobe/kretprobe/fentry/fexit expand and list:
//! the kernel's own list of traceable functions (tracefs
//! `available_filter_functions`, modules included), or, where that list
//! can't be read, the text symbols of /proc/kallsyms.

use std::sync::OnceLock;

/// A traceable kernel function; `module` is None for vmlinux.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KernelFunction {
    pub name: String,
    pub module: Option<String>,
}

/// The running kernel's functions, sorted by name (then module), read once.
pub fn kernel_functions() -> &'static [KernelFunction] {
    static FUNCS: OnceLock<Vec<KernelFunction>> = OnceLock::new();
    FUNCS.get_or_init(|| {
        let traceable = super::tracefs::tracefs_root()
            .ok()
            .and_then(|root| std::fs::read_to_string(root.join("available_filter_functions")).ok())
            .filter(|text| !text.is_empty());
        match traceable {
            Some(text) => parse_filter_functions(&text),
            None => parse_kallsyms(&std::fs::read_to_string("/proc/kallsyms").unwrap_or_default()),
        }
    })
}

/// `available_filter_functions`: `name` or `name [module]` per line. Names
/// the kernel keeps only as placeholders (`__ftrace_invalid_address___N`)
/// are left out.
pub fn parse_filter_functions(text: &str) -> Vec<KernelFunction> {
    sorted(text.lines().filter_map(|l| {
        let mut it = l.split_whitespace();
        let name = it.next()?;
        if name.starts_with("__ftrace_invalid_address") {
            return None;
        }
        let module = it.next().map(|m| m.trim_matches(|c| c == '[' || c == ']').to_string());
        Some(KernelFunction { name: name.to_string(), module })
    }))
}

/// /proc/kallsyms: `addr kind name [module]`; text symbols only, without
/// the compiler's split-off parts (`.cold`, `.part.N`, `.isra.N`).
pub fn parse_kallsyms(text: &str) -> Vec<KernelFunction> {
    sorted(text.lines().filter_map(|l| {
        let mut it = l.split_whitespace();
        let (_, kind, name) = (it.next()?, it.next()?, it.next()?);
        if !matches!(kind, "t" | "T") || name.contains('.') {
            return None;
        }
        let module = it.next().map(|m| m.trim_matches(|c| c == '[' || c == ']').to_string());
        Some(KernelFunction { name: name.to_string(), module })
    }))
}

fn sorted(it: impl Iterator<Item = KernelFunction>) -> Vec<KernelFunction> {
    let mut v: Vec<KernelFunction> = it.collect();
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_functions_with_modules_and_placeholders() {
        let text = "vfs_read\n__ftrace_invalid_address___64\nv9fs_vfs_lookup [9p]\nvfs_read\nschedule\n";
        let f = parse_filter_functions(text);
        let names: Vec<(&str, Option<&str>)> = f.iter().map(|f| (f.name.as_str(), f.module.as_deref())).collect();
        assert_eq!(names, [("schedule", None), ("v9fs_vfs_lookup", Some("9p")), ("vfs_read", None)]);
    }

    #[test]
    fn kallsyms_text_symbols_only() {
        let text = "ffffffff81000000 T _stext\nffffffff81000010 t do_thing.cold\nffffffff81000020 D some_data\n\
                    ffffffffc0000000 t v9fs_mount\t[9p]\n";
        let f = parse_kallsyms(text);
        let names: Vec<(&str, Option<&str>)> = f.iter().map(|f| (f.name.as_str(), f.module.as_deref())).collect();
        assert_eq!(names, [("_stext", None), ("v9fs_mount", Some("9p"))]);
    }
}
