//! Shell-style wildcards (`*`, `?`) in probe specs and `-l` patterns.

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
