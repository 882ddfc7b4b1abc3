//! Per-probe overhead (BPF run statistics) as rtrace reports it at exit with
//! `-v`: a text table on stderr, or a `probe_stats` NDJSON record.

use std::fmt::Write;

/// One probe's kernel-side cost: how often its programs ran and for how long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeStat {
    pub probe: String,
    pub runs: u64,
    pub total_ns: u64,
}

impl ProbeStat {
    pub fn ns_per_run(&self) -> u64 {
        self.total_ns.checked_div(self.runs).unwrap_or(0)
    }
}

/// `Probe overhead in the kernel:` then one line per probe.
pub fn format_probe_stats_text(stats: &[ProbeStat]) -> String {
    let mut out = String::from("Probe overhead in the kernel:\n");
    for s in stats {
        let _ = writeln!(out, "  {}: {} runs, {} ns total, {} ns/run", s.probe, s.runs, s.total_ns, s.ns_per_run());
    }
    out
}

/// `{"type": "probe_stats", "data": {"PROBE": {"runs": N, "total_ns": T, "ns_per_run": A}}}`.
pub fn format_probe_stats_json(stats: &[ProbeStat]) -> String {
    let mut out = String::from("{\"type\": \"probe_stats\", \"data\": {");
    for (i, s) in stats.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(
            out,
            "\"{}\": {{\"runs\": {}, \"total_ns\": {}, \"ns_per_run\": {}}}",
            escape(&s.probe),
            s.runs,
            s.total_ns,
            s.ns_per_run()
        );
    }
    out.push_str("}}\n");
    out
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json() {
        let stats = vec![
            ProbeStat { probe: "tracepoint:syscalls:sys_enter_getppid".into(), runs: 4, total_ns: 1000 },
            ProbeStat { probe: "uprobe:/bin/\"x\":f".into(), runs: 0, total_ns: 0 },
        ];
        assert_eq!(
            format_probe_stats_text(&stats),
            "Probe overhead in the kernel:\n  tracepoint:syscalls:sys_enter_getppid: 4 runs, 1000 ns total, 250 ns/run\n  \
             uprobe:/bin/\"x\":f: 0 runs, 0 ns total, 0 ns/run\n"
        );
        assert_eq!(
            format_probe_stats_json(&stats),
            "{\"type\": \"probe_stats\", \"data\": {\"tracepoint:syscalls:sys_enter_getppid\": \
             {\"runs\": 4, \"total_ns\": 1000, \"ns_per_run\": 250}, \"uprobe:/bin/\\\"x\\\":f\": \
             {\"runs\": 0, \"total_ns\": 0, \"ns_per_run\": 0}}}\n"
        );
    }
}
