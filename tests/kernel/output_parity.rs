//! Printed values in bpftrace's shapes on a real kernel: `hist(x, bits)`'s
//! buckets as the kernel counts them against a pure reference of
//! bpftrace's bucket function, its text labels, and the JSON records of
//! `time();`, `join(arr);` and `print([...])`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;

/// bpftrace's `hist(n, k)` bucket (its generated `log2(n, k)`), written
/// from its description: 0 for negatives, `n + 1` below `2^k`, then `2^k`
/// linear buckets per power of two.
fn reference_bucket(n: i64, k: u32) -> u64 {
    let mask = (1i64 << k) - 1;
    if n < 0 {
        return 0;
    }
    if n <= mask {
        return n as u64 + 1;
    }
    let mut l = 0u32; // floor(log2 n)
    while l < 63 && (n >> (l + 1)) != 0 {
        l += 1;
    }
    let x = ((n >> (l - k)) & mask) as u64;
    (((l - k + 1) as u64) << k) + x + 1
}

/// The values bucket `i` holds, `(lowest, highest)`; `None` for the negative one.
fn reference_bounds(i: u64, k: u32) -> Option<(i128, i128)> {
    if i == 0 {
        return None;
    }
    // The lowest value whose bucket is i, and the lowest of bucket i + 1.
    let lowest = |b: u64| -> i128 {
        let (mut lo, mut hi) = (0i128, i64::MAX as i128 + 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if reference_bucket(mid as i64, k) >= b {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    };
    Some((lowest(i), lowest(i + 1) - 1))
}

/// Offsets across every power of two, with negatives, small values and
/// each power's edges and a point inside.
fn offsets() -> Vec<i64> {
    let mut v = vec![-1, -7, i64::MIN + 1];
    v.extend(0..40);
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for p in 1..63 {
        let low = 1i64 << p;
        let high = if p == 62 { i64::MAX } else { (1i64 << (p + 1)) - 1 };
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let inside = low + ((seed >> 1) as i64).rem_euclid(high - low + 1);
        v.extend([low, low + 1, inside, high]);
    }
    v
}

/// Run `body` on this thread's lseek(-1, offset, SEEK_SET) calls, one per value,
/// with `maps` declared; the run ends at a getpgid call.
fn run_lseeks(maps: &[&str], body: &str, values: &[i64], extra: &[&str]) -> Outcome {
    let mut src: String = maps.iter().map(|m| format!("let {m} = map(\"{m}\");\n")).collect();
    src += &fill(
        r#"probe("tracepoint:syscalls:sys_enter_lseek", |e| {
    if e.tid == __ME__ {
__BODY__
    }
});
probe("tracepoint:syscalls:sys_enter_getpgid", |e| { if e.tid == __ME__ { exit(); } });
"#,
        &[("ME", &tid()), ("BODY", &body)],
    );
    let mut args: Vec<&str> = extra.to_vec();
    args.extend(["-e", &src]);
    let json = extra.contains(&"json");
    let mut t = Tracer::start(&args);
    if json {
        t.wait_line("the attached_probes record", ATTACH_TIMEOUT, |l| l.contains("attached_probes"));
    } else {
        t.wait_attached();
    }
    for &off in values {
        unsafe { libc::lseek(-1, off, libc::SEEK_SET) };
    }
    let out = t.finish_by_getpgid(Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{out}");
    out
}

kernel_test!(hist_bits_buckets_match_bpftrace);
fn hist_bits_buckets_match_bpftrace() {
    let _g = setup();
    let values = offsets();
    let maps = ["h0", "h1", "h2", "h3", "h4", "h5"];
    let body = (0..6).map(|k| format!("        h{k} = hist(e.args.offset, {k});")).collect::<Vec<_>>().join("\n");
    let out = run_lseeks(&maps, &body, &values, &["-f", "json"]);
    let records = json_records(&out.stdout);
    for k in 0..6u32 {
        let name = format!("@h{k}");
        let record = json_of_type(&records, "hist")
            .into_iter()
            .find(|r| r["data"].get(&name).is_some())
            .unwrap_or_else(|| panic!("no hist record for {name}\n{out}"));
        let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
        for &v in &values {
            *counts.entry(reference_bucket(v, k)).or_default() += 1;
        }
        let (first, last) = (*counts.keys().next().unwrap(), *counts.keys().last().unwrap());
        let expected: Vec<Value> = (first..=last)
            .map(|i| {
                let count = counts.get(&i).copied().unwrap_or(0);
                match reference_bounds(i, k) {
                    None => json!({"max": -1, "count": count}),
                    Some((lo, hi)) => json!({"min": lo as i64, "max": hi as i64, "count": count}),
                }
            })
            .collect();
        assert_eq!(record["data"][&name], Value::Array(expected), "hist(x, {k})\n{out}");
    }
}

kernel_test!(hist_bits_text_labels_are_bpftraces);
fn hist_bits_text_labels_are_bpftraces() {
    let _g = setup();
    let out = run_lseeks(&["h"], "        h = hist(e.args.offset, 1);", &[0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 3000], &[]);
    let rows: Vec<(String, String)> = out
        .lines()
        .into_iter()
        .filter(|l| l.starts_with('[') && l.len() > 24)
        .map(|l| (l[..16].trim_end().to_string(), l[16..24].trim().to_string()))
        .collect();
    let want: Vec<(String, String)> = [
        ("[0]", "1"),
        ("[1]", "1"),
        ("[2]", "1"),
        ("[3]", "1"),
        ("[4, 6)", "2"),
        ("[6, 8)", "2"),
        ("[8, 12)", "2"),
        ("[12, 16)", "0"),
        ("[16, 24)", "0"),
        ("[24, 32)", "0"),
        ("[32, 48)", "0"),
        ("[48, 64)", "0"),
        ("[64, 96)", "0"),
        ("[96, 128)", "0"),
        ("[128, 192)", "0"),
        ("[192, 256)", "0"),
        ("[256, 384)", "0"),
        ("[384, 512)", "0"),
        ("[512, 768)", "0"),
        ("[768, 1024)", "0"),
        ("[1024, 1536)", "0"),
        ("[1536, 2K)", "0"),
        ("[2K, 3K)", "1"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(rows, want, "{out}");
}

kernel_test!(json_records_of_time_join_and_script_values);
fn json_records_of_time_join_and_script_values() {
    let _g = setup();
    let src = r#"probe("BEGIN", || {
    time();
    time("%Y");
    join(["a", "b"], ",");
    print([1, 2, "s", [4, 5]]);
    print(#{a: 0, c: "str"});
    exit();
});
"#;
    let out = run(&["-f", "json", "-e", src]);
    assert_eq!(out.code, Some(0), "{out}");
    let records = json_records(&out.stdout);
    let times = json_of_type(&records, "time");
    assert_eq!(times.len(), 2, "{out}");
    let first = times[0]["data"].as_str().unwrap_or("");
    assert!(first.len() == 9 && first.ends_with('\n') && first.matches(':').count() == 2, "time(): {first:?}\n{out}");
    let year = times[1]["data"].as_str().unwrap_or("");
    assert!(year.len() == 4 && year.chars().all(|c| c.is_ascii_digit()), "time(\"%Y\"): {year:?}\n{out}");
    assert_eq!(json_of_type(&records, "join"), vec![&json!({"type": "join", "data": "a,b"})], "{out}");
    let values = json_of_type(&records, "value");
    assert_eq!(
        values,
        vec![
            &json!({"type": "value", "data": [1, 2, "s", [4, 5]]}),
            &json!({"type": "value", "data": {"a": 0, "c": "str"}})
        ],
        "{out}"
    );
    assert!(json_of_type(&records, "printf").is_empty(), "no printf record\n{out}");
    assert!(out.stdout.contains(r#""data": [1,2,"s",[4,5]]}"#), "bpftrace's unspaced arrays\n{out}");
}
