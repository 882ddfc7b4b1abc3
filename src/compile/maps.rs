//! Map layout inference: every probe's uses of a map (key shapes, aggregation
//! or plain values) are unified into one layout per map, or a clear error
//! naming the two conflicting places.

use std::collections::BTreeMap;

use probes_ebpf::ir::{AggKind, AggOp, MapId, MapLayout, Ty, ValueKind};

use crate::plan::site::{MapShape, ValueMeaning};

/// How one statement uses a map.
#[derive(Clone, Debug)]
pub struct MapUse {
    pub map: MapId,
    /// Key part types; empty for `m = ...` without a key.
    pub key: Vec<Ty>,
    /// Key part meanings, parallel to `key`.
    pub key_sems: Vec<ValueMeaning>,
    /// For a store: the meaning of the value stored (a `buf()`, ...).
    pub value_meaning: ValueMeaning,
    pub kind: UseKind,
    /// `line:col` of the use, for errors.
    pub at: String,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UseKind {
    Aggregate(AggOp),
    Store(Ty),
    Update,
    Read,
    Delete,
}

pub fn agg_kind(op: AggOp) -> AggKind {
    match op {
        AggOp::Count | AggOp::Sum => AggKind::Sum,
        AggOp::Min => AggKind::Min,
        AggOp::Max => AggKind::Max,
        AggOp::Avg | AggOp::Stats => AggKind::Avg,
        AggOp::Hist | AggOp::HistBits { .. } | AggOp::Lhist { .. } | AggOp::Quantiles { .. } => AggKind::Hist,
    }
}

fn agg_name(op: AggOp) -> &'static str {
    match op {
        AggOp::Count => "count()",
        AggOp::Sum => "sum()",
        AggOp::Min => "min()",
        AggOp::Max => "max()",
        AggOp::Avg => "avg()",
        AggOp::Stats => "stats()",
        AggOp::Hist => "hist()",
        AggOp::HistBits { .. } => "hist(x, bits)",
        AggOp::Lhist { .. } => "lhist()",
        AggOp::Quantiles { .. } => "quantiles()",
    }
}

/// The unit argument of `quantiles(x, "ns")`: nanoseconds per unit of x.
pub fn quantiles_unit(arg: &rhai::Expr) -> std::result::Result<u32, String> {
    let unit = match arg {
        rhai::Expr::StringConstant(s, _) => s.as_str(),
        _ => {
            return Err("quantiles(x, unit): the unit must be a string literal: \"ns\", \"us\", \"ms\" or \"s\"".into());
        }
    };
    match unit {
        "ns" => Ok(1),
        "us" => Ok(1_000),
        "ms" => Ok(1_000_000),
        "s" => Ok(1_000_000_000),
        other => Err(format!("quantiles(x, \"{other}\"): unknown unit; use \"ns\", \"us\", \"ms\" or \"s\"")),
    }
}

/// Unify all uses into one shape per used map. `names` gives maps' printed names.
/// A conflict between two uses of a map: where (`line:col`) and what.
pub type Conflict = (String, String);

pub fn unify(uses: &[MapUse], names: &dyn Fn(MapId) -> String) -> Result<BTreeMap<MapId, MapShape>, Conflict> {
    let mut by_map: BTreeMap<MapId, Vec<&MapUse>> = BTreeMap::new();
    for u in uses {
        by_map.entry(u.map).or_default().push(u);
    }
    let mut shapes = BTreeMap::new();
    for (id, uses) in by_map {
        let name = names(id);
        // Keys: same number of parts, same kinds; strings take the longest size.
        let first = uses[0];
        let mut key = first.key.clone();
        let mut key_sems = first.key_sems.clone();
        for u in &uses[1..] {
            for (s, t) in key_sems.iter_mut().zip(&u.key_sems) {
                if *s == ValueMeaning::Plain {
                    *s = *t;
                }
            }
        }
        for u in &uses[1..] {
            if u.key.len() != key.len() {
                return Err((
                    u.at.to_string(),
                    format!(
                        "map '{name}' is used with {} key part(s) here but {} at {}",
                        u.key.len(),
                        key.len(),
                        first.at
                    ),
                ));
            }
            for (k, t) in key.iter_mut().zip(&u.key) {
                *k = match (*k, *t) {
                    (Ty::Int, Ty::Int) => Ty::Int,
                    (Ty::Bytes(a), Ty::Bytes(b)) => Ty::Bytes(a.max(b)),
                    _ => {
                        return Err((
                            u.at.to_string(),
                            format!(
                                "map '{name}' has a string key here but an integer key at {} (or the reverse)",
                                first.at
                            ),
                        ));
                    }
                };
            }
        }
        // Values: one aggregation, or plain values.
        let mut agg: Option<(AggOp, &str)> = None;
        let mut plain: Option<(Ty, &str)> = None;
        for u in &uses {
            match u.kind {
                UseKind::Aggregate(op) => {
                    if let Some((prev, at)) = agg {
                        if prev != op {
                            return Err((
                                u.at.to_string(),
                                format!(
                                    "map '{name}' gets {} here but {} at {at}; use one aggregation per map",
                                    agg_name(op),
                                    agg_name(prev)
                                ),
                            ));
                        }
                    }
                    agg = Some((op, &u.at));
                }
                UseKind::Store(ty) => {
                    plain = Some(match (plain, ty) {
                        (None, t) => (t, &u.at),
                        (Some((Ty::Int, a)), Ty::Int) => (Ty::Int, a),
                        (Some((Ty::Bytes(x), a)), Ty::Bytes(y)) => (Ty::Bytes(x.max(y)), a),
                        (Some((_, a)), _) => {
                            return Err((
                                u.at.to_string(),
                                format!("map '{name}' stores a string here but an integer at {a} (or the reverse)"),
                            ));
                        }
                    });
                }
                UseKind::Update => {
                    if let Some((Ty::Bytes(_), a)) = plain {
                        return Err((
                            u.at.to_string(),
                            format!("map '{name}' holds strings (see {a}); `+=` needs integers"),
                        ));
                    }
                    plain.get_or_insert((Ty::Int, &u.at));
                }
                UseKind::Read | UseKind::Delete => {}
            }
        }
        let shape = match (agg, plain) {
            (Some((_, a)), Some((_, b))) => {
                return Err((
                    b.to_string(),
                    format!("map '{name}' is assigned plain values here but is an aggregation at {a}; use two maps"),
                ));
            }
            (Some((op, _)), None) => MapShape {
                layout: MapLayout { key, value: ValueKind::Agg(agg_kind(op)) },
                key_sems,
                value_meaning: ValueMeaning::Plain,
                agg: Some(op),
                prealloc: false,
            },
            (None, Some((ty, _))) => MapShape {
                layout: MapLayout { key, value: ValueKind::Value(ty) },
                key_sems,
                value_meaning: stored_meaning(&uses),
                agg: None,
                prealloc: false,
            },
            (None, None) => MapShape {
                layout: MapLayout { key, value: ValueKind::Value(Ty::Int) },
                key_sems,
                value_meaning: ValueMeaning::Plain,
                agg: None,
                prealloc: false,
            },
        };
        shapes.insert(id, shape);
    }
    Ok(shapes)
}

/// Pointers print in hex when every value stored is one (and none is
/// added to with `+=`).
fn stored_meaning(uses: &[&MapUse]) -> ValueMeaning {
    let stores = || uses.iter().filter(|u| matches!(u.kind, UseKind::Store(_)));
    // A map that stores `buf()` values prints them as bufs (a userspace copy
    // of one, recorded as plain, keeps it so).
    if stores().any(|u| u.value_meaning == ValueMeaning::Buf) {
        return ValueMeaning::Buf;
    }
    let mut stores = stores().peekable();
    let pointers = stores.peek().is_some() && stores.all(|u| u.value_meaning == ValueMeaning::Ptr);
    if pointers && !uses.iter().any(|u| u.kind == UseKind::Update) {
        ValueMeaning::Ptr
    } else {
        ValueMeaning::Plain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(map: MapId, key: Vec<Ty>, kind: UseKind) -> MapUse {
        let key_sems = vec![ValueMeaning::Plain; key.len()];
        MapUse { map, key, key_sems, value_meaning: ValueMeaning::Plain, kind, at: "1:1".into() }
    }

    #[test]
    fn strings_widen_and_conflicts_are_reported() {
        let names = |id: MapId| format!("m{id}");
        let s = unify(
            &[u(0, vec![Ty::Bytes(16)], UseKind::Aggregate(AggOp::Count)), u(0, vec![Ty::Bytes(64)], UseKind::Read)],
            &names,
        )
        .unwrap();
        assert_eq!(s[&0].layout.key, vec![Ty::Bytes(64)]);
        let e = unify(
            &[
                u(1, vec![Ty::Int], UseKind::Aggregate(AggOp::Count)),
                u(1, vec![Ty::Int], UseKind::Aggregate(AggOp::Hist)),
            ],
            &names,
        )
        .unwrap_err();
        assert!(e.1.contains("use one aggregation per map"), "{e:?}");
        let e =
            unify(&[u(2, vec![Ty::Int], UseKind::Store(Ty::Int)), u(2, vec![], UseKind::Read)], &names).unwrap_err();
        assert!(e.1.contains("key part"), "{e:?}");
    }
}
