//! Maps filled like the bpftrace statements quoted on each function, shared by
//! the text and JSON tests, which compare against bpftrace 0.17's output.

use super::layout::{hist_bucket, lhist_bucket, lhist_len, HIST_LEN};
use super::value::{KeyPart, MapDump, MapValue};

fn int(v: i64) -> KeyPart {
    KeyPart::Int(v)
}

fn s(v: &str) -> KeyPart {
    KeyPart::Str(v.to_string())
}

pub fn hist_of(values: &[i64]) -> MapValue {
    let mut counts = vec![0; HIST_LEN];
    for &v in values {
        counts[hist_bucket(v)] += 1;
    }
    MapValue::Hist { bits: 0, counts }
}

pub fn lhist_of(values: &[i64], min: i64, max: i64, step: i64) -> MapValue {
    let mut counts = vec![0; lhist_len(min, max, step)];
    for &v in values {
        counts[lhist_bucket(v, min, max, step)] += 1;
    }
    MapValue::Lhist { min, max, step, counts }
}

fn keyed(entries: Vec<(Vec<KeyPart>, MapValue)>) -> MapDump {
    MapDump { name: "m".to_string(), keyless: false, entries }
}

fn keyless(value: MapValue) -> MapDump {
    MapDump { name: "m".to_string(), keyless: true, entries: vec![(vec![], value)] }
}

/// `@m = count()` three times.
pub fn keyless_count() -> MapDump {
    keyless(MapValue::Int(3))
}

/// `@m[3] = count()` once, `@m[-5]` twice, `@m[10]` three times.
pub fn int_keys() -> MapDump {
    keyed(vec![(vec![int(10)], MapValue::Int(3)), (vec![int(3)], MapValue::Int(1)), (vec![int(-5)], MapValue::Int(2))])
}

/// `@m["b\"q"] = sum(5); @m["a b"] = sum(-3); @m["tab\there"] = sum(100); @m["x\\y"] = sum(7)`.
pub fn string_keys() -> MapDump {
    keyed(vec![
        (vec![s("b\"q")], MapValue::Int(5)),
        (vec![s("tab\there")], MapValue::Int(100)),
        (vec![s("a b")], MapValue::Int(-3)),
        (vec![s("x\\y")], MapValue::Int(7)),
    ])
}

/// `@m[1, "a"] = count()` once, `@m[2, "b"]` twice, `@m[-1, "c"]` three times.
pub fn tuple_keys() -> MapDump {
    keyed(vec![
        (vec![int(-1), s("c")], MapValue::Int(3)),
        (vec![int(1), s("a")], MapValue::Int(1)),
        (vec![int(2), s("b")], MapValue::Int(2)),
    ])
}

/// `@m = hist(5); @m = hist(0); @m = hist(1500)`.
pub fn hist_keyless() -> MapDump {
    keyless(hist_of(&[5, 0, 1500]))
}

/// `@m[1] = hist()` of -3, -1, 1, 2; `@m[2] = hist(1)`; `@m[3] = hist(1024)` three times.
pub fn hist_keyed_negative() -> MapDump {
    keyed(vec![
        (vec![int(1)], hist_of(&[-3, -1, 1, 2])),
        (vec![int(2)], hist_of(&[1])),
        (vec![int(3)], hist_of(&[1024, 1024, 1024])),
    ])
}

/// `@m = hist()` of 1048576, 1073741824, 1500000000, 1073741824, 5000.
pub fn hist_large() -> MapDump {
    keyless(hist_of(&[1048576, 1073741824, 1500000000, 1073741824, 5000]))
}

/// `@m = hist(1073741824); @m = hist(3221225472)`.
pub fn hist_2g() -> MapDump {
    keyless(hist_of(&[1073741824, 3221225472]))
}

/// `@m = lhist(v, 1024, 4096, 512)` for v in 50, 5000, 1600, 4096.
pub fn lhist_outside() -> MapDump {
    keyless(lhist_of(&[50, 5000, 1600, 4096], 1024, 4096, 512))
}

/// `@m = lhist(v, 0, 4194304, 524288)` for v in 524288, 1048576, 1048576, 2097152.
pub fn lhist_km_labels() -> MapDump {
    keyless(lhist_of(&[524288, 1048576, 1048576, 2097152], 0, 4194304, 524288))
}

/// `@m[k] = lhist(v, 0, 100, 10)`: "x" gets 5 and 99, "y" 100, "z" 0 three times.
pub fn lhist_keyed() -> MapDump {
    keyed(vec![
        (vec![s("z")], lhist_of(&[0, 0, 0], 0, 100, 10)),
        (vec![s("x")], lhist_of(&[5, 99], 0, 100, 10)),
        (vec![s("y")], lhist_of(&[100], 0, 100, 10)),
    ])
}

/// `@m[1, "a"] = stats(10); @m[2, "b"] = stats(3); @m[3, "c"] = stats(-4);
/// @m[3, "c"] = stats(-5); @m[4, "d"] = stats(1000000); @m[4, "d"] = stats(7)`.
pub fn stats_keyed() -> MapDump {
    keyed(vec![
        (vec![int(4), s("d")], MapValue::Stats { count: 2, total: 1000007 }),
        (vec![int(1), s("a")], MapValue::Stats { count: 1, total: 10 }),
        (vec![int(2), s("b")], MapValue::Stats { count: 1, total: 3 }),
        (vec![int(3), s("c")], MapValue::Stats { count: 2, total: -9 }),
    ])
}

/// `@m = stats(-5); @m = stats(2)`.
pub fn stats_keyless() -> MapDump {
    keyless(MapValue::Stats { count: 2, total: -3 })
}

/// `@m = avg(7); @m = avg(8)`.
pub fn avg_keyless() -> MapDump {
    keyless(MapValue::Avg { count: 2, total: 15 })
}

/// `@m[1] = avg(-7); @m[1] = avg(-8); @m[2] = avg(3); @m[3] = avg(100); @m[3] = avg(1)`.
pub fn avg_keyed() -> MapDump {
    keyed(vec![
        (vec![int(3)], MapValue::Avg { count: 2, total: 101 }),
        (vec![int(2)], MapValue::Avg { count: 1, total: 3 }),
        (vec![int(1)], MapValue::Avg { count: 2, total: -15 }),
    ])
}

/// `@m[1] = min(5); @m[1] = min(-2); @m[2] = min(7); @m[3] = min(-20)`.
pub fn min_keyed() -> MapDump {
    keyed(vec![(vec![int(1)], MapValue::Int(-2)), (vec![int(2)], MapValue::Int(7)), (vec![int(3)], MapValue::Int(-20))])
}

/// `@m["a"] = max(5); @m["a"] = max(50); @m["b"] = max(7); @m["c"] = max(1)`.
pub fn max_keyed() -> MapDump {
    keyed(vec![(vec![s("a")], MapValue::Int(50)), (vec![s("b")], MapValue::Int(7)), (vec![s("c")], MapValue::Int(1))])
}

/// `@m[2] = "two"; @m[1] = "one"; @m[-1] = "neg"; @m[10] = "a\"b\\c"`.
pub fn string_values() -> MapDump {
    keyed(vec![
        (vec![int(2)], MapValue::Str("two".to_string())),
        (vec![int(1)], MapValue::Str("one".to_string())),
        (vec![int(-1)], MapValue::Str("neg".to_string())),
        (vec![int(10)], MapValue::Str("a\"b\\c".to_string())),
    ])
}

/// `@m = "hello world"`.
pub fn string_value_keyless() -> MapDump {
    keyless(MapValue::Str("hello world".to_string()))
}

/// `@m["b", 1] = "x"; @m["a", 2] = "y"; @m["a", 1] = "z"`.
pub fn tuple_string_values() -> MapDump {
    keyed(vec![
        (vec![s("b"), int(1)], MapValue::Str("x".to_string())),
        (vec![s("a"), int(2)], MapValue::Str("y".to_string())),
        (vec![s("a"), int(1)], MapValue::Str("z".to_string())),
    ])
}

/// `@m[1] = count(); delete(@m[1])`.
pub fn empty_count() -> MapDump {
    keyed(vec![])
}

/// `@m = hist(3); zero(@m)`.
pub fn zeroed_hist() -> MapDump {
    keyless(MapValue::Hist { bits: 0, counts: vec![0; HIST_LEN] })
}

/// `@m[1] = lhist(3, 0, 10, 1); @m[2] = lhist(3, 0, 10, 1); zero(@m)`.
pub fn zeroed_lhist_keyed() -> MapDump {
    let zeroed = lhist_of(&[], 0, 10, 1);
    keyed(vec![(vec![int(2)], zeroed.clone()), (vec![int(1)], zeroed)])
}

/// `@m[1] = hist(5); @m[256] = hist(5); @m[2] = hist(5); @m[2] = hist(5)`.
pub fn hist_ties() -> MapDump {
    keyed(vec![(vec![int(2)], hist_of(&[5, 5])), (vec![int(1)], hist_of(&[5])), (vec![int(256)], hist_of(&[5]))])
}

/// `@m[1] = stats(5); @m[256] = stats(5); @m[2] = stats(1)`.
pub fn stats_ties() -> MapDump {
    keyed(vec![
        (vec![int(1)], MapValue::Stats { count: 1, total: 5 }),
        (vec![int(2)], MapValue::Stats { count: 1, total: 1 }),
        (vec![int(256)], MapValue::Stats { count: 1, total: 5 }),
    ])
}

/// `@m[2, "a"] = stats(1); @m[1, "b"] = stats(1); @m[1, "a"] = stats(1); @m[256, "a"] = stats(1)`.
pub fn tuple_stats_ties() -> MapDump {
    let one = MapValue::Stats { count: 1, total: 1 };
    keyed(vec![
        (vec![int(1), s("a")], one.clone()),
        (vec![int(2), s("a")], one.clone()),
        (vec![int(1), s("b")], one.clone()),
        (vec![int(256), s("a")], one),
    ])
}

/// `@m = lhist(v, 0, 10, 1)`: 5 26 times, 6 15 times, 8 7 times.
pub fn bar_rounding() -> MapDump {
    let mut values = vec![5; 26];
    values.extend([6; 15]);
    values.extend([8; 7]);
    keyless(lhist_of(&values, 0, 10, 1))
}

/// `@m = lhist(v, 1000000, 1000300, 100)` for v in 1000123, 1000000, 1000299, 1000299.
pub fn wide_labels() -> MapDump {
    keyless(lhist_of(&[1000123, 1000000, 1000299, 1000299], 1000000, 1000300, 100))
}

/// `@m["k"] = sum(1099511627776); @m["n"] = sum(-1099511627776); @m["z"] = sum(0)`.
pub fn large_sums() -> MapDump {
    keyed(vec![
        (vec![s("k")], MapValue::Int(1099511627776)),
        (vec![s("n")], MapValue::Int(-1099511627776)),
        (vec![s("z")], MapValue::Int(0)),
    ])
}

/// The exit dump of `@h = hist(5); @h = hist(0); @h = hist(1500);
/// @l = lhist(42, 0, 100, 10); @s[1, "a"] = stats(10); @s[2, "b"] = stats(3);
/// @a = avg(7); @a = avg(8); @c["x"] = count(); @c["y"] = count(); @c["y"] = count()`,
/// in bpftrace's order of map names.
pub fn exit_dump_maps() -> Vec<MapDump> {
    let named = |name: &str, mut dump: MapDump| {
        dump.name = name.to_string();
        dump
    };
    vec![
        named("a", keyless(MapValue::Avg { count: 2, total: 15 })),
        named("c", keyed(vec![(vec![s("y")], MapValue::Int(2)), (vec![s("x")], MapValue::Int(1))])),
        named("h", keyless(hist_of(&[5, 0, 1500]))),
        named("l", keyless(lhist_of(&[42], 0, 100, 10))),
        named(
            "s",
            keyed(vec![
                (vec![int(1), s("a")], MapValue::Stats { count: 1, total: 10 }),
                (vec![int(2), s("b")], MapValue::Stats { count: 1, total: 3 }),
            ]),
        ),
    ]
}
