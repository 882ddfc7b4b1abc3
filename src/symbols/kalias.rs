//! Kernel functions with several names at one address (`__do_sys_getppid`,
//! `__ia32_sys_getppid`, `__x64_sys_getppid`): the name perf shows. perf
//! keeps a global symbol over a local one and, among equals, the one
//! /proc/kallsyms lists last (the others get a zero size). `__pfx_`/`__cfi_`
//! padding labels are never chosen over a real name.

use std::collections::HashMap;
use std::sync::OnceLock;

static ALIASES: OnceLock<HashMap<u64, String>> = OnceLock::new();

/// The preferred name of the kernel symbol starting at `addr`, when
/// kallsyms has more than one name there.
pub fn preferred(addr: u64) -> Option<&'static str> {
    ALIASES.get_or_init(load).get(&addr).map(String::as_str)
}

fn load() -> HashMap<u64, String> {
    std::fs::read_to_string("/proc/kallsyms").map(|t| parse(&t)).unwrap_or_default()
}

/// One kallsyms line: (address, global, name).
fn line(l: &str) -> Option<(u64, bool, &str)> {
    let mut w = l.split_ascii_whitespace();
    let addr = u64::from_str_radix(w.next()?, 16).ok()?;
    let ty = w.next()?.chars().next()?;
    let name = w.next()?;
    Some((addr, ty.is_ascii_uppercase(), name))
}

fn padding(name: &str) -> bool {
    name.starts_with("__pfx_") || name.starts_with("__cfi_")
}

pub fn parse(text: &str) -> HashMap<u64, String> {
    let mut out = HashMap::new();
    let mut group: Vec<(bool, &str)> = Vec::new();
    let mut at = 0u64;
    let mut flush = |at: u64, group: &mut Vec<(bool, &str)>| {
        if group.len() > 1 {
            if let Some(best) = choose(group) {
                out.insert(at, best.to_string());
            }
        }
        group.clear();
    };
    for (addr, global, name) in text.lines().filter_map(line) {
        if addr == 0 {
            continue;
        }
        if addr != at {
            flush(at, &mut group);
            at = addr;
        }
        group.push((global, name));
    }
    flush(at, &mut group);
    out
}

fn choose<'a>(names: &[(bool, &'a str)]) -> Option<&'a str> {
    let real: Vec<(bool, &str)> = names.iter().copied().filter(|(_, n)| !padding(n)).collect();
    let pool = if real.is_empty() { names.to_vec() } else { real };
    let best = pool.iter().rev().find(|(global, _)| *global).or_else(|| pool.last())?;
    Some(best.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_and_last_listed_win_as_in_perf() {
        let text = "ffffffff81377d30 t __pfx___do_sys_getppid\n\
                    ffffffff81377d30 T __pfx___ia32_sys_getppid\n\
                    ffffffff81377d30 T __pfx___x64_sys_getppid\n\
                    ffffffff81377d40 t __do_sys_getppid\n\
                    ffffffff81377d40 T __ia32_sys_getppid\n\
                    ffffffff81377d40 T __x64_sys_getppid\n\
                    ffffffff81377d80 t __pfx___do_sys_getuid\n\
                    ffffffff81377d90 t only_local_a\n\
                    ffffffff81377d90 t only_local_b\n\
                    ffffffff81377da0 T single\n";
        let m = parse(text);
        assert_eq!(m.get(&0xffffffff81377d40).map(String::as_str), Some("__x64_sys_getppid"));
        assert_eq!(m.get(&0xffffffff81377d30).map(String::as_str), Some("__pfx___x64_sys_getppid"));
        assert_eq!(m.get(&0xffffffff81377d90).map(String::as_str), Some("only_local_b"));
        assert!(!m.contains_key(&0xffffffff81377da0));
        assert!(!m.contains_key(&0xffffffff81377d80));
    }
}
