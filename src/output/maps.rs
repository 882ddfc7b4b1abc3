//! The text layout of `print(@m)` and the exit dump, as bpftrace 0.17
//! prints it; the order and the rows come from `layout.rs`.

use std::fmt::Write;

use super::layout::{average, hist_rows, join_key, lhist_rows, sorted_entries, MapKind, Row, Span};
#[cfg(test)]
use super::layout::{hist_bucket, lhist_bucket, lhist_len, HIST_LEN};
#[cfg(test)]
use super::value::KeyPart;
use super::value::{MapDump, MapValue};

/// Width of the `|@@@...|` bar column.
const BAR_WIDTH: usize = 52;

/// The map as bpftrace prints it with `print(@m)` or at exit, ending in a
/// newline (two after avg/stats maps). An empty map prints as one newline;
/// use [`format_empty_map_text`] when the kind of an empty map is known.
pub fn format_map_text(dump: &MapDump) -> String {
    let Some(kind) = dump.kind() else {
        return format_empty_map_text(MapKind::Int);
    };
    let mut out = String::new();
    for (i, (key, value)) in sorted_entries(dump).into_iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push('@');
        out.push_str(&dump.name);
        if !dump.keyless {
            out.push('[');
            out.push_str(&join_key(key, ", "));
            out.push(']');
        }
        out.push_str(": ");
        push_text_value(&mut out, value);
    }
    out.push('\n');
    if kind == MapKind::Stats {
        out.push('\n');
    }
    out
}

/// What bpftrace prints for a map without entries.
pub fn format_empty_map_text(kind: MapKind) -> String {
    match kind {
        MapKind::Stats => "\n\n".to_string(),
        MapKind::Int | MapKind::Str | MapKind::Hist | MapKind::Quantiles => "\n".to_string(),
    }
}

/// `Attaching N probes...` line.
pub fn format_attached_text(n: usize) -> String {
    if n == 1 {
        "Attaching 1 probe...\n".to_string()
    } else {
        format!("Attaching {n} probes...\n")
    }
}

#[cfg(test)]
/// `Lost N events` line.
pub fn format_lost_events_text(lost: u64) -> String {
    format!("Lost {lost} events\n")
}

fn push_text_value(out: &mut String, value: &MapValue) {
    match value {
        MapValue::Int(v) => {
            let _ = write!(out, "{v}");
        }
        MapValue::Str(s) => out.push_str(s),
        MapValue::Ptr(p) => {
            let _ = write!(out, "{p:#x}");
        }
        MapValue::Avg { count, total } => {
            let _ = write!(out, "{}", average(*count, *total));
        }
        MapValue::Stats { count, total } => {
            let _ = write!(out, "count {}, average {}, total {}", *count as i64, average(*count, *total), total);
        }
        MapValue::Hist { bits, counts } => {
            out.push('\n');
            push_hist_text(out, counts, *bits);
        }
        MapValue::Lhist { min, max, step, counts } => {
            out.push('\n');
            push_lhist_text(out, counts, *min, *max, *step);
        }
        MapValue::Quantiles { unit_ns, counts } => out.push_str(&super::dist::quantiles_text(*unit_ns, counts)),
    }
}

fn push_hist_text(out: &mut String, counts: &[u64], bits: u8) {
    push_rows(out, &hist_rows(counts, bits), |row| hist_bucket_label(row.index, bits));
}

fn push_lhist_text(out: &mut String, counts: &[u64], min: i64, max: i64, step: i64) {
    push_rows(out, &lhist_rows(counts, min, max, step), |row| match row.span {
        Span::Below(min) => format!("(..., {})", lhist_number_label(min)),
        Span::From(max) => format!("[{}, ...)", lhist_number_label(max)),
        Span::Range(low, high) => {
            format!("[{}, {})", lhist_number_label(low as i64), lhist_number_label(high as i64))
        }
    });
}

/// One bar row per histogram row, bars scaled to the largest count.
fn push_rows(out: &mut String, rows: &[Row], label: impl Fn(&Row) -> String) {
    let max_count = rows.iter().map(|r| r.count).max().unwrap_or(0);
    for row in rows {
        push_bar_row(out, &label(row), row.count, max_count);
    }
}

fn push_bar_row(out: &mut String, label: &str, count: u64, max_count: u64) {
    // Single-precision arithmetic, as bpftrace computes the width.
    let width = ((count as f32 / max_count as f32) * BAR_WIDTH as f32) as usize;
    let bar = "@".repeat(width.min(BAR_WIDTH));
    let _ = writeln!(out, "{label:<16}{count:>8} |{bar:<BAR_WIDTH$}|");
}

/// `(..., 0)`, `[0]`, `[1]`, `[2, 4)`, ..., `[1K, 2K)`, ..., `[4E, 8E)`;
/// with `bits`, single values up to `2^(bits+1) - 1`, then `[16, 18)`,
/// ..., `[10K, 11K)`, as bpftrace labels `hist(x, k)`.
fn hist_bucket_label(index: usize, bits: u8) -> String {
    let singles = 2usize << bits.min(5);
    match index {
        0 => "(..., 0)".to_string(),
        i if i <= singles => format!("[{}]", i - 1),
        i => format!("[{}, {})", hist_bound_label(i - 1, bits), hist_bound_label(i, bits)),
    }
}

/// Where bucket `index` of `hist(x, bits)` ends: a number up to
/// `2^(bits+1)`, then `m * 2^p` with `2^p`'s binary suffix (512, 1K, 9K, 2M, ...).
fn hist_bound_label(index: usize, bits: u8) -> String {
    const SUFFIXES: [&str; 7] = ["", "K", "M", "G", "T", "P", "E"];
    let k = usize::from(bits.min(5));
    if index <= 2 << k {
        return index.to_string();
    }
    let n = 1u64 << k;
    let power = (index >> k) - 1;
    let interval = index as u64 & (n - 1);
    format!("{}{}", (1u64 << (power % 10)) * (n + interval), SUFFIXES[power / 10])
}

/// Linear histogram bound: exact multiples of 1M and 1K get a suffix.
fn lhist_number_label(n: i64) -> String {
    const KILO: i64 = 1024;
    const MEGA: i64 = 1024 * 1024;
    if n == 0 {
        "0".to_string()
    } else if n % MEGA == 0 {
        format!("{}M", n / MEGA)
    } else if n % KILO == 0 {
        format!("{}K", n / KILO)
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    //! Expected strings are bpftrace 0.17's output for the statements quoted
    //! on the fixtures.

    use super::super::fixtures;
    use super::*;

    #[test]
    fn keyless_count() {
        let expected = "@m: 3\n";
        assert_eq!(format_map_text(&fixtures::keyless_count()), expected);
    }

    #[test]
    fn int_keys() {
        let expected = concat!("@m[3]: 1\n", "@m[-5]: 2\n", "@m[10]: 3\n",);
        assert_eq!(format_map_text(&fixtures::int_keys()), expected);
    }

    #[test]
    fn string_keys() {
        let expected = concat!("@m[a b]: -3\n", "@m[b\"q]: 5\n", "@m[x\\y]: 7\n", "@m[tab\there]: 100\n",);
        assert_eq!(format_map_text(&fixtures::string_keys()), expected);
    }

    #[test]
    fn tuple_keys() {
        let expected = concat!("@m[1, a]: 1\n", "@m[2, b]: 2\n", "@m[-1, c]: 3\n",);
        assert_eq!(format_map_text(&fixtures::tuple_keys()), expected);
    }

    #[test]
    fn hist_keyless() {
        let expected = concat!(
            "@m: \n",
            "[0]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[1]                    0 |                                                    |\n",
            "[2, 4)                 0 |                                                    |\n",
            "[4, 8)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[8, 16)                0 |                                                    |\n",
            "[16, 32)               0 |                                                    |\n",
            "[32, 64)               0 |                                                    |\n",
            "[64, 128)              0 |                                                    |\n",
            "[128, 256)             0 |                                                    |\n",
            "[256, 512)             0 |                                                    |\n",
            "[512, 1K)              0 |                                                    |\n",
            "[1K, 2K)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::hist_keyless()), expected);
    }

    #[test]
    fn hist_keyed_negative() {
        let expected = concat!(
            "@m[2]: \n",
            "[1]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@m[3]: \n",
            "[1K, 2K)               3 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@m[1]: \n",
            "(..., 0)               2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[0]                    0 |                                                    |\n",
            "[1]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "[2, 4)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::hist_keyed_negative()), expected);
    }

    #[test]
    fn hist_large() {
        let expected = concat!(
            "@m: \n",
            "[4K, 8K)               1 |@@@@@@@@@@@@@@@@@                                   |\n",
            "[8K, 16K)              0 |                                                    |\n",
            "[16K, 32K)             0 |                                                    |\n",
            "[32K, 64K)             0 |                                                    |\n",
            "[64K, 128K)            0 |                                                    |\n",
            "[128K, 256K)           0 |                                                    |\n",
            "[256K, 512K)           0 |                                                    |\n",
            "[512K, 1M)             0 |                                                    |\n",
            "[1M, 2M)               1 |@@@@@@@@@@@@@@@@@                                   |\n",
            "[2M, 4M)               0 |                                                    |\n",
            "[4M, 8M)               0 |                                                    |\n",
            "[8M, 16M)              0 |                                                    |\n",
            "[16M, 32M)             0 |                                                    |\n",
            "[32M, 64M)             0 |                                                    |\n",
            "[64M, 128M)            0 |                                                    |\n",
            "[128M, 256M)           0 |                                                    |\n",
            "[256M, 512M)           0 |                                                    |\n",
            "[512M, 1G)             0 |                                                    |\n",
            "[1G, 2G)               3 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::hist_large()), expected);
    }

    #[test]
    fn hist_2g() {
        let expected = concat!(
            "@m: \n",
            "[1G, 2G)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[2G, 4G)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::hist_2g()), expected);
    }

    #[test]
    fn lhist_outside() {
        let expected = concat!(
            "@m: \n",
            "(..., 1K)              1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "[1K, 1536)             0 |                                                    |\n",
            "[1536, 2K)             1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "[2K, 2560)             0 |                                                    |\n",
            "[2560, 3K)             0 |                                                    |\n",
            "[3K, 3584)             0 |                                                    |\n",
            "[3584, 4K)             0 |                                                    |\n",
            "[4K, ...)              2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::lhist_outside()), expected);
    }

    #[test]
    fn lhist_km_labels() {
        let expected = concat!(
            "@m: \n",
            "[512K, 1M)             1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "[1M, 1536K)            2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[1536K, 2M)            0 |                                                    |\n",
            "[2M, 2560K)            1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::lhist_km_labels()), expected);
    }

    #[test]
    fn lhist_keyed() {
        let expected = concat!(
            "@m[y]: \n",
            "[100, ...)             1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@m[x]: \n",
            "[0, 10)                1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[10, 20)               0 |                                                    |\n",
            "[20, 30)               0 |                                                    |\n",
            "[30, 40)               0 |                                                    |\n",
            "[40, 50)               0 |                                                    |\n",
            "[50, 60)               0 |                                                    |\n",
            "[60, 70)               0 |                                                    |\n",
            "[70, 80)               0 |                                                    |\n",
            "[80, 90)               0 |                                                    |\n",
            "[90, 100)              1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@m[z]: \n",
            "[0, 10)                3 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::lhist_keyed()), expected);
    }

    #[test]
    fn stats_keyed() {
        let expected = concat!(
            "@m[3, c]: count 2, average -4, total -9\n",
            "@m[2, b]: count 1, average 3, total 3\n",
            "@m[1, a]: count 1, average 10, total 10\n",
            "@m[4, d]: count 2, average 500003, total 1000007\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::stats_keyed()), expected);
    }

    #[test]
    fn stats_keyless() {
        let expected = concat!("@m: count 2, average -1, total -3\n", "\n",);
        assert_eq!(format_map_text(&fixtures::stats_keyless()), expected);
    }

    #[test]
    fn avg_keyless() {
        let expected = concat!("@m: 7\n", "\n",);
        assert_eq!(format_map_text(&fixtures::avg_keyless()), expected);
    }

    #[test]
    fn avg_keyed() {
        let expected = concat!("@m[1]: -7\n", "@m[2]: 3\n", "@m[3]: 50\n", "\n",);
        assert_eq!(format_map_text(&fixtures::avg_keyed()), expected);
    }

    #[test]
    fn min_keyed() {
        let expected = concat!("@m[3]: -20\n", "@m[1]: -2\n", "@m[2]: 7\n",);
        assert_eq!(format_map_text(&fixtures::min_keyed()), expected);
    }

    #[test]
    fn max_keyed() {
        let expected = concat!("@m[c]: 1\n", "@m[b]: 7\n", "@m[a]: 50\n",);
        assert_eq!(format_map_text(&fixtures::max_keyed()), expected);
    }

    #[test]
    fn string_values() {
        let expected = concat!("@m[1]: one\n", "@m[2]: two\n", "@m[10]: a\"b\\c\n", "@m[-1]: neg\n",);
        assert_eq!(format_map_text(&fixtures::string_values()), expected);
    }

    #[test]
    fn string_value_keyless() {
        let expected = "@m: hello world\n";
        assert_eq!(format_map_text(&fixtures::string_value_keyless()), expected);
    }

    #[test]
    fn tuple_string_values() {
        let expected = concat!("@m[a, 1]: z\n", "@m[a, 2]: y\n", "@m[b, 1]: x\n",);
        assert_eq!(format_map_text(&fixtures::tuple_string_values()), expected);
    }

    #[test]
    fn empty_count() {
        let expected = "\n";
        assert_eq!(format_map_text(&fixtures::empty_count()), expected);
    }

    #[test]
    fn zeroed_hist() {
        let expected = concat!("@m: \n", "\n",);
        assert_eq!(format_map_text(&fixtures::zeroed_hist()), expected);
    }

    #[test]
    fn zeroed_lhist_keyed() {
        let expected = concat!("@m[1]: \n", "\n", "@m[2]: \n", "\n",);
        assert_eq!(format_map_text(&fixtures::zeroed_lhist_keyed()), expected);
    }

    #[test]
    fn hist_ties() {
        let expected = concat!(
            "@m[256]: \n",
            "[4, 8)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@m[1]: \n",
            "[4, 8)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@m[2]: \n",
            "[4, 8)                 2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::hist_ties()), expected);
    }

    #[test]
    fn stats_ties() {
        let expected = concat!(
            "@m[2]: count 1, average 1, total 1\n",
            "@m[256]: count 1, average 5, total 5\n",
            "@m[1]: count 1, average 5, total 5\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::stats_ties()), expected);
    }

    #[test]
    fn tuple_stats_ties() {
        let expected = concat!(
            "@m[256, a]: count 1, average 1, total 1\n",
            "@m[1, a]: count 1, average 1, total 1\n",
            "@m[1, b]: count 1, average 1, total 1\n",
            "@m[2, a]: count 1, average 1, total 1\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::tuple_stats_ties()), expected);
    }

    #[test]
    fn bar_rounding() {
        let expected = concat!(
            "@m: \n",
            "[5, 6)                26 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[6, 7)                15 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@                      |\n",
            "[7, 8)                 0 |                                                    |\n",
            "[8, 9)                 7 |@@@@@@@@@@@@@@                                      |\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::bar_rounding()), expected);
    }

    #[test]
    fn wide_labels() {
        let expected = concat!(
            "@m: \n",
            "[1000000, 1000100)       1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "[1000100, 1000200)       1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "[1000200, 1000300)       2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::wide_labels()), expected);
    }

    #[test]
    fn large_sums() {
        let expected = concat!("@m[n]: -1099511627776\n", "@m[z]: 0\n", "@m[k]: 1099511627776\n",);
        assert_eq!(format_map_text(&fixtures::large_sums()), expected);
    }

    #[test]
    fn exit_dump_of_several_maps() {
        let expected = concat!(
            "\n",
            "\n",
            "@a: 7\n",
            "\n",
            "@c[x]: 1\n",
            "@c[y]: 2\n",
            "@h: \n",
            "[0]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[1]                    0 |                                                    |\n",
            "[2, 4)                 0 |                                                    |\n",
            "[4, 8)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[8, 16)                0 |                                                    |\n",
            "[16, 32)               0 |                                                    |\n",
            "[32, 64)               0 |                                                    |\n",
            "[64, 128)              0 |                                                    |\n",
            "[128, 256)             0 |                                                    |\n",
            "[256, 512)             0 |                                                    |\n",
            "[512, 1K)              0 |                                                    |\n",
            "[1K, 2K)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@l: \n",
            "[40, 50)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@s[2, b]: count 1, average 3, total 3\n",
            "@s[1, a]: count 1, average 10, total 10\n",
            "\n",
        );
        let mut dump = String::from("\n\n");
        for map in fixtures::exit_dump_maps() {
            dump.push_str(&format_map_text(&map));
        }
        assert_eq!(dump, expected);
    }

    #[test]
    fn empty_stats_map_prints_two_newlines() {
        // `@m = avg(3); clear(@m)`
        assert_eq!(format_empty_map_text(MapKind::Stats), "\n\n");
        assert_eq!(format_empty_map_text(MapKind::Hist), "\n");
    }

    #[test]
    fn probe_and_lost_lines() {
        assert_eq!(format_attached_text(1), "Attaching 1 probe...\n");
        assert_eq!(format_attached_text(2), "Attaching 2 probes...\n");
        assert_eq!(format_lost_events_text(12), "Lost 12 events\n");
    }

    #[test]
    fn hist_buckets() {
        assert_eq!(hist_bucket(i64::MIN), 0);
        assert_eq!(hist_bucket(-1), 0);
        assert_eq!(hist_bucket(0), 1);
        assert_eq!(hist_bucket(1), 2);
        assert_eq!(hist_bucket(2), 3);
        assert_eq!(hist_bucket(3), 3);
        assert_eq!(hist_bucket(4), 4);
        assert_eq!(hist_bucket(1023), 11);
        assert_eq!(hist_bucket(1024), 12);
        assert_eq!(hist_bucket(1 << 40), 42);
        assert_eq!(hist_bucket(i64::MAX), HIST_LEN - 1);
    }

    #[test]
    fn lhist_buckets() {
        assert_eq!(lhist_len(0, 100, 10), 12);
        assert_eq!(lhist_bucket(-1, 0, 100, 10), 0);
        assert_eq!(lhist_bucket(0, 0, 100, 10), 1);
        assert_eq!(lhist_bucket(9, 0, 100, 10), 1);
        assert_eq!(lhist_bucket(10, 0, 100, 10), 2);
        assert_eq!(lhist_bucket(99, 0, 100, 10), 10);
        assert_eq!(lhist_bucket(100, 0, 100, 10), 11);
        assert_eq!(lhist_bucket(i64::MAX, 0, 100, 10), 11);
        assert_eq!(lhist_bucket(1023, 1024, 4096, 512), 0);
        assert_eq!(lhist_bucket(1024, 1024, 4096, 512), 1);
    }

    #[test]
    fn hist_labels_beyond_tera() {
        // bpftrace 0.17 folds values of 2^32 and more into [2G, 4G); these
        // labels follow the same suffix scheme one step further.
        assert_eq!(hist_bucket_label(42, 0), "[1T, 2T)");
        assert_eq!(hist_bucket_label(52, 0), "[1P, 2P)");
        assert_eq!(hist_bucket_label(HIST_LEN - 1, 0), "[4E, 8E)");
        let dump = MapDump {
            name: "m".to_string(),
            keyless: true,
            entries: vec![(vec![], fixtures::hist_of(&[1 << 50, i64::MAX]))],
        };
        let text = format_map_text(&dump);
        assert!(text.starts_with(concat!(
            "@m: \n",
            "[1P, 2P)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[2P, 4P)               0 |                                                    |\n",
        )));
        assert!(text.ends_with("[4E, 8E)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n\n"));
        assert_eq!(text.lines().count(), 1 + 13 + 1);
    }

    #[test]
    fn int_ties_sort_by_key() {
        let dump = MapDump {
            name: "m".to_string(),
            keyless: false,
            entries: vec![
                (vec![KeyPart::Str("b".to_string())], MapValue::Int(1)),
                (vec![KeyPart::Str("c".to_string())], MapValue::Int(0)),
                (vec![KeyPart::Str("a".to_string())], MapValue::Int(1)),
            ],
        };
        assert_eq!(format_map_text(&dump), "@m[c]: 0\n@m[a]: 1\n@m[b]: 1\n");
    }

    fn hist_bits_of(values: &[i64], bits: u8) -> MapValue {
        let mut counts = vec![0u64; probes_ebpf::quantile::hist_len(bits)];
        for &v in values {
            counts[probes_ebpf::quantile::hist_bucket(v, bits) as usize] += 1;
        }
        MapValue::Hist { bits, counts }
    }

    #[test]
    fn hist_bits_labels_as_bpftrace() {
        // bpftrace: @ = hist($i, 1) for 0..=8, 11, 3000.
        let dump = MapDump {
            name: "h".into(),
            keyless: true,
            entries: vec![(vec![], hist_bits_of(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 3000, -2], 1))],
        };
        let text = format_map_text(&dump);
        let labels: Vec<&str> = text.lines().skip(1).filter(|l| !l.is_empty()).map(|l| l[..16].trim_end()).collect();
        assert_eq!(
            labels,
            [
                "(..., 0)",
                "[0]",
                "[1]",
                "[2]",
                "[3]",
                "[4, 6)",
                "[6, 8)",
                "[8, 12)",
                "[12, 16)",
                "[16, 24)",
                "[24, 32)",
                "[32, 48)",
                "[48, 64)",
                "[64, 96)",
                "[96, 128)",
                "[128, 192)",
                "[192, 256)",
                "[256, 384)",
                "[384, 512)",
                "[512, 768)",
                "[768, 1024)",
                "[1024, 1536)",
                "[1536, 2K)",
                "[2K, 3K)",
            ]
        );
        // With 3 bits: 16 single values, then 8 buckets per power of two; K from 8K on.
        let dump = MapDump {
            name: "h".into(),
            keyless: true,
            entries: vec![(vec![], hist_bits_of(&[15, 16, 17, 18, 1024, 8192, 9215, 9216], 3))],
        };
        let text = format_map_text(&dump);
        let rows: Vec<&str> = text.lines().filter(|l| l.contains('|') && !l.contains(" 0 |")).collect();
        let labels: Vec<&str> = rows.iter().map(|l| l[..16].trim_end()).collect();
        assert_eq!(labels, ["[15]", "[16, 18)", "[18, 20)", "[1024, 1152)", "[8K, 9K)", "[9K, 10K)"]);
        assert!(rows[1].contains("       2 |"), "{text}");
    }

    #[test]
    fn hist_zero_bits_is_plain_hist() {
        let values = [-5, 0, 1, 2, 3, 7, 1000, 1 << 40, i64::MAX];
        let plain = MapDump { name: "m".into(), keyless: true, entries: vec![(vec![], fixtures::hist_of(&values))] };
        let bits0 = MapDump { name: "m".into(), keyless: true, entries: vec![(vec![], hist_bits_of(&values, 0))] };
        assert_eq!(format_map_text(&plain), format_map_text(&bits0));
        assert_eq!(super::super::json::format_map_json(&plain), super::super::json::format_map_json(&bits0));
    }
}
