//! Shell-style wildcards (`*`, `?`) in probe specs and `-l` patterns, and
//! in the binary paths of uprobe/usdt specs.

/// True when `pattern` contains `*` or `?`.
pub fn has_wildcard(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

/// Shell-style match of the whole `text`: `*` is any run of characters
/// (including none), `?` exactly one character.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let pattern = pattern.as_bytes();
    let text = text.as_bytes();
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None; // (pattern index after '*', text index)
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p + 1, t));
            p += 1;
        } else if let Some((after_star, star_text)) = star {
            p = after_star;
            t = star_text + 1;
            star = Some((after_star, star_text + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}
/// Files whose path matches `pattern`, wildcards allowed in any component
/// (`./bin/prog*`, `/usr/lib/*/libc.so.6`), sorted. Hidden names match only
/// a component that starts with `.`. Relative patterns are relative to the
/// current directory.
pub fn glob_files(pattern: &str) -> Vec<std::path::PathBuf> {
    use std::path::PathBuf;
    let start = if pattern.starts_with('/') { PathBuf::from("/") } else { PathBuf::new() };
    let parts: Vec<&str> = pattern.split('/').filter(|c| !c.is_empty()).collect();
    let mut current = vec![start];
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let mut next = Vec::new();
        for dir in &current {
            if !has_wildcard(part) {
                next.push(dir.join(part));
                continue;
            }
            let listed = if dir.as_os_str().is_empty() { std::fs::read_dir(".") } else { std::fs::read_dir(dir) };
            let Ok(entries) = listed else { continue };
            let mut names: Vec<String> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| wildcard_match(part, n) && (!n.starts_with('.') || part.starts_with('.')))
                .collect();
            names.sort();
            next.extend(names.into_iter().map(|n| dir.join(n)));
        }
        current = next.into_iter().filter(|p| if last { p.is_file() } else { p.is_dir() }).collect();
    }
    if parts.is_empty() {
        return Vec::new();
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_matching() {
        assert!(wildcard_match("sys_enter_open*", "sys_enter_openat"));
        assert!(wildcard_match("sys_enter_open*", "sys_enter_open"));
        assert!(wildcard_match("*", ""));
        assert!(wildcard_match("s?hed", "sched"));
        assert!(wildcard_match("*open*at*", "sys_enter_open_by_handle_at"));
        assert!(!wildcard_match("sys_enter_open*", "sys_exit_openat"));
        assert!(!wildcard_match("sched", "sched_switch"));
        assert!(!wildcard_match("a?c", "ac"));
    }
}
