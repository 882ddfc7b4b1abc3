//! "Did you mean": close names for an unknown one, and the error for a
//! pattern that matched nothing.

use super::wildcard::has_wildcard;

/// The error for a probe pattern that matched nothing: the close names
/// when there are some (and the pattern has no wildcard), else that nothing
/// matches, with `listing` (e.g. ` (see ...)`) after it.
pub fn no_match(what: &str, pattern: &str, close: Vec<String>, listing: &str) -> anyhow::Error {
    if close.is_empty() || has_wildcard(pattern) {
        anyhow::anyhow!("no {what} matches '{pattern}'{listing}")
    } else {
        anyhow::anyhow!("unknown {what} '{pattern}'; did you mean {}?", close.join(", "))
    }
}

/// Up to 3 candidates close to `wanted`, best first (case-insensitive):
/// those within a small edit distance where they differ (an adjacent swap
/// counts as one edit), then those containing `wanted` or most of it. Only
/// when none of those exist, candidates sharing most letter pairs with it.
pub fn suggest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let wanted = wanted.to_ascii_lowercase();
    let wanted_len = wanted.len();
    if wanted_len == 0 {
        return Vec::new();
    }
    let candidates: Vec<&'a str> = candidates.into_iter().collect();
    let max_distance = ((wanted_len + 2) / 4).max(1);
    // (tier, rank within tier, candidate); tier 0 = edit distance, 1 = containment
    let mut scored: Vec<(u8, usize, &'a str)> = Vec::new();
    for &candidate in &candidates {
        let lower = candidate.to_ascii_lowercase();
        let length_gap = lower.len().abs_diff(wanted_len);
        if length_gap <= max_distance {
            if let Some(distance) = close_name(&wanted, &lower, max_distance) {
                scored.push((0, distance, candidate));
                continue;
            }
        }
        // A fragment of a name, or a name with a little extra (not a mere prefix: `sys_enter`).
        let contains = (wanted_len >= 3 && lower.contains(&wanted))
            || (lower.len() >= 4 && lower.len() * 3 >= wanted_len * 2 && wanted.contains(&lower));
        if contains {
            scored.push((1, length_gap, candidate));
        }
    }
    if scored.is_empty() {
        // A weaker signal (tier 2): most letter pairs shared, as when parts
        // of a name are swapped (`enter_openat_sys`). A long shared prefix
        // alone (`syscalls:sys_enter_`) is not enough.
        for &candidate in &candidates {
            let similarity = strsim::sorensen_dice(&wanted, &candidate.to_ascii_lowercase());
            if similarity >= 0.85 {
                scored.push((2, ((1.0 - similarity) * 1000.0) as usize, candidate));
            }
        }
    }
    scored.sort_unstable_by(|a, b| (a.0, a.1, a.2.len(), a.2).cmp(&(b.0, b.1, b.2.len(), b.2)));
    let mut out: Vec<String> = Vec::new();
    for (_, _, candidate) in scored {
        if !out.iter().any(|seen| seen == candidate) {
            out.push(candidate.to_string());
            if out.len() == 3 {
                break;
            }
        }
    }
    out
}

/// `a` and `b` without the prefix and suffix they share.
fn differing_parts<'a, 'b>(a: &'a [u8], b: &'b [u8]) -> (&'a [u8], &'b [u8]) {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let room = a.len().min(b.len()) - prefix;
    let suffix = a.iter().rev().zip(b.iter().rev()).take(room).take_while(|(x, y)| x == y).count();
    (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix])
}

/// The edit distance (optimal string alignment: an adjacent swap is one
/// edit) between `wanted` and `candidate` when they are close: at most
/// `max_distance` edits, and few for the part where they differ (a shared
/// `sys_enter_` prefix does not make `nosuch` close to `mount`).
fn close_name(wanted: &str, candidate: &str, max_distance: usize) -> Option<usize> {
    let distance = strsim::osa_distance(wanted, candidate);
    if distance > max_distance {
        return None;
    }
    let (w, c) = differing_parts(wanted.as_bytes(), candidate.as_bytes());
    let differing = w.len().max(c.len());
    (distance <= differing.div_ceil(2).max(1)).then_some(distance)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestion_ranking() {
        let names = ["sys_enter_openat", "sys_enter_openat2", "sys_exit_openat", "sched_switch", "sys_enter_open"];
        let got = suggest("sys_enter_opnat", names);
        assert_eq!(got[0], "sys_enter_openat");
        assert!(got.len() <= 3);
        let by_substring = suggest("openat", names);
        assert!(by_substring.contains(&"sys_enter_openat".to_string()), "{by_substring:?}");
        assert_eq!(suggest("sched_swtich", names), vec!["sched_switch"]);
        assert!(suggest("zzzzzzzz", names).is_empty());
        // Only close names: a shared prefix alone is not close.
        let syscalls = ["sys_enter_mount", "sys_enter_dup", "sys_enter_acct", "sys_enter_openat"];
        assert!(suggest("sys_enter_nosuch", syscalls).is_empty(), "{:?}", suggest("sys_enter_nosuch", syscalls));
        assert_eq!(suggest("sys_enter_opnet", syscalls), vec!["sys_enter_openat"]);
        assert_eq!(suggest("sys_enter_mout", syscalls), vec!["sys_enter_mount"]);
        let full = ["syscalls:sys_enter_newstat", "syscalls:sys_enter_newfstat", "syscalls:sys_enter_newlstat"];
        assert!(suggest("syscalls:sys_enter_nosuch", full).is_empty());
        assert!(suggest("sys_enter_nosuch", ["sys_enter", "sys_exit"]).is_empty());
        assert_eq!(suggest("sched_swtch", ["sched_switch", "sched_swap_numa"]), vec!["sched_switch"]);
        assert_eq!(suggest("enter_openat_sys", ["sys_enter_openat", "sched_switch"]), vec!["sys_enter_openat"]);
    }
}
