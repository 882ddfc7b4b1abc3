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
/// those within a small edit distance (an adjacent swap counts as one edit),
/// then those containing `wanted` or contained in it. Only when none of
/// those exist, candidates sharing a long common substring with `wanted`.
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
            let distance = edit_distance(&wanted, &lower);
            if distance <= max_distance {
                scored.push((0, distance, candidate));
                continue;
            }
        }
        let contains = (wanted_len >= 3 && lower.contains(&wanted)) || (lower.len() >= 4 && wanted.contains(&lower));
        if contains {
            scored.push((1, length_gap, candidate));
        }
    }
    if scored.is_empty() {
        // A weaker signal: a long shared substring (tier 2, longest first).
        let min_common = (wanted_len * 7 / 10).max(5);
        let mut common_rows = (Vec::new(), Vec::new());
        for &candidate in &candidates {
            let lower = candidate.to_ascii_lowercase();
            let common = longest_common_substring(wanted.as_bytes(), lower.as_bytes(), &mut common_rows);
            if common >= min_common {
                scored.push((2, usize::MAX - common, candidate));
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

/// Optimal string alignment distance (Levenshtein plus adjacent transposition).
fn edit_distance(a: &str, b: &str) -> usize {
    strsim::osa_distance(a, b)
}

/// Length of the longest common substring; `rows` are reused scratch buffers.
fn longest_common_substring(a: &[u8], b: &[u8], rows: &mut (Vec<usize>, Vec<usize>)) -> usize {
    let (previous, current) = rows;
    previous.clear();
    previous.resize(b.len() + 1, 0);
    current.clear();
    current.resize(b.len() + 1, 0);
    let mut best = 0;
    for &x in a {
        for (j, &y) in b.iter().enumerate() {
            current[j + 1] = if x == y { previous[j] + 1 } else { 0 };
            best = best.max(current[j + 1]);
        }
        std::mem::swap(previous, current);
    }
    best
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
        assert_eq!(edit_distance("abc", "acb"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(longest_common_substring(b"openat_enter", b"sys_enter_openat", &mut (Vec::new(), Vec::new())), 6);
        assert_eq!(suggest("sched_swtch", ["sched_switch", "sched_swap_numa"]), vec!["sched_switch"]);
        assert_eq!(suggest("enter_openat_sys", ["sys_enter_openat", "sched_switch"]), vec!["sys_enter_openat"]);
    }
}
