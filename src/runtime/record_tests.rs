//! The record codec on synthetic records: every value kind, what a site's
//! statements see, and broken input (short, long, unknown, cut batches).

use super::*;
use crate::plan::site::RecordField as F;
use ValueMeaning as M;

/// Stacks and addresses as plain text, to see what reached the site.
struct Names;
impl Symbols for Names {
    fn stack(&self, s: &StackRef) -> String {
        format!("stack {} of map {} user={} {:?}", s.id, s.map, s.user, s.mode)
    }
    fn ksym(&self, addr: u64) -> String {
        format!("fn@{addr:x}")
    }
}

fn event(path: &str) -> RecordField {
    F::Event(path.split('.').map(String::from).collect())
}

/// The bytes of a record of `layout` whose fields hold `values` (ints as
/// 8 bytes, strings as their bytes, NUL-padded).
fn record(layout: &SiteLayout, values: &[Raw]) -> Vec<u8> {
    let mut rec = vec![0u8; layout.size];
    rec[..4].copy_from_slice(&layout.site.to_le_bytes());
    for (f, v) in layout.fields.iter().zip(values) {
        match v {
            Raw::I(n) => rec[f.at..f.at + 8].copy_from_slice(&n.to_le_bytes()),
            Raw::S(s) => rec[f.at..f.at + s.len()].copy_from_slice(s),
        }
    }
    rec
}

enum Raw {
    I(i64),
    S(&'static [u8]),
}
use Raw::{I, S};

fn decode(layout: &SiteLayout, rec: &[u8]) -> Result<Vec<Value>, Malformed> {
    let mut out = vec![Value::Int(99)];
    decode_into(layout, rec, &mut out)?;
    Ok(out)
}

fn one(what: RecordField, ty: Ty, meaning: ValueMeaning) -> SiteLayout {
    SiteLayout::new(0, vec![(what, ty, meaning)])
}

fn decode_one(layout: &SiteLayout, raw: Raw) -> Value {
    decode(layout, &record(layout, &[raw])).unwrap().remove(0)
}

fn see(layout: &SiteLayout, values: &[Raw], slots: usize) -> SiteValues {
    let mut decoded = decode(layout, &record(layout, values)).unwrap();
    let mut seen = SiteValues::default();
    seen.fill(layout, &mut decoded, slots, &Names);
    assert!(decoded.is_empty(), "fill takes every value");
    seen
}

#[test]
fn layout_puts_each_field_in_its_own_aligned_slot() {
    let l = SiteLayout::new(
        3,
        vec![
            (event("pid"), Ty::Int, M::Plain),
            (event("comm"), Ty::Bytes(16), M::Plain),
            (event("cpu"), Ty::Int, M::Plain),
        ],
    );
    let at: Vec<usize> = l.fields.iter().map(|f| f.at).collect();
    assert_eq!(at, vec![8, 16, 32]);
    assert_eq!(l.size, 40);
}

#[test]
fn integers_decode_with_their_sign() {
    let l = one(event("retval"), Ty::Int, M::Plain);
    assert_eq!(decode_one(&l, I(-2)), Value::Int(-2));
    assert_eq!(decode_one(&l, I(i64::MAX)), Value::Int(i64::MAX));
    let p = one(event("ptr"), Ty::Int, M::Ptr);
    assert_eq!(decode_one(&p, I(0x7fff_0000)), Value::Int(0x7fff_0000));
}

#[test]
fn bools_are_zero_or_not() {
    let l = one(F::Local { name: "b".into(), slot: 0 }, Ty::Int, M::Bool);
    assert_eq!(decode_one(&l, I(0)), Value::Bool(false));
    assert_eq!(decode_one(&l, I(1)), Value::Bool(true));
    assert_eq!(decode_one(&l, I(-7)), Value::Bool(true));
}

#[test]
fn strings_end_at_their_first_nul_or_their_field() {
    let l = one(event("comm"), Ty::Bytes(16), M::Plain);
    assert_eq!(decode_one(&l, S(b"bash\0junk")), Value::Str("bash".into()));
    assert_eq!(decode_one(&l, S(b"")), Value::Str(String::new()));
    // A field filled to its end has no NUL: all 16 bytes, nothing from the padding.
    let full = one(event("comm"), Ty::Bytes(5), M::Plain);
    let mut rec = record(&full, &[S(b"abcde")]);
    rec[8 + 5] = b'X'; // the slot's padding
    assert_eq!(decode(&full, &rec).unwrap(), vec![Value::Str("abcde".into())]);
}

#[test]
fn invalid_utf8_in_a_string_is_replaced_not_dropped() {
    let l = one(event("args.filename"), Ty::Bytes(8), M::Plain);
    assert_eq!(decode_one(&l, S(b"a\xffb")), Value::Str("a\u{fffd}b".into()));
}

#[test]
fn bufs_keep_their_length_and_bytes_even_nuls() {
    let l = one(F::Local { name: "b".into(), slot: 0 }, Ty::Bytes(24), M::Buf);
    let mut field = 3u64.to_le_bytes().to_vec();
    field.extend(b"\0\x01A");
    let leaked: &'static [u8] = Box::leak(field.into_boxed_slice());
    assert_eq!(decode_one(&l, S(leaked)), Value::Buf(Buf(vec![0, 1, b'A'])));
    // A length past the field is clamped to what it holds.
    let mut field = 1000u64.to_le_bytes().to_vec();
    field.extend(b"xyz");
    let leaked: &'static [u8] = Box::leak(field.into_boxed_slice());
    match decode_one(&l, S(leaked)) {
        Value::Buf(b) => assert_eq!(b.0.len(), 16),
        v => panic!("{v:?}"),
    }
}

#[test]
fn stacks_stay_ids_until_a_site_sees_them() {
    let mode = StackMode::Perf;
    let l = one(event("ustack"), Ty::Int, M::Stack { map: 4, user: true, mode });
    let id = (42i64 << 32) | 7;
    assert_eq!(decode_one(&l, I(id)), Value::Stack(StackRef { map: 4, user: true, mode, id }));
    let seen = see(&l, &[I(id)], 0);
    assert_eq!(seen.event["ustack"].to_string(), format!("stack {id} of map 4 user=true Perf"));
    assert_eq!(l.user_stack_offsets(), vec![8]);
    let k = one(event("kstack"), Ty::Int, M::Stack { map: 1, user: false, mode });
    assert!(k.user_stack_offsets().is_empty());
}

#[test]
fn kernel_addresses_become_names_at_the_site() {
    let l = one(F::Local { name: "f".into(), slot: 0 }, Ty::Int, M::Ksym);
    assert_eq!(decode_one(&l, I(0x1234)), Value::Ksym(0x1234));
    let seen = see(&l, &[I(0x1234)], 1);
    assert_eq!(seen.locals[0].as_ref().unwrap().to_string(), "fn@1234");
}

#[test]
fn event_fields_args_and_member_chains_make_one_object_map() {
    let l = SiteLayout::new(
        0,
        vec![
            (event("pid"), Ty::Int, M::Plain),
            (event("args.fd"), Ty::Int, M::Plain),
            (event("args.st.mode"), Ty::Int, M::Plain),
            (event("curtask.real_parent.tgid"), Ty::Int, M::Plain),
            (event("kstack.perf"), Ty::Int, M::Stack { map: 0, user: false, mode: StackMode::Perf }),
        ],
    );
    let seen = see(&l, &[I(10), I(3), I(0o644), I(1), I(5)], 0);
    let e = &seen.event;
    assert_eq!(e["pid"].as_int().unwrap(), 10);
    let args = e["args"].read_lock::<rhai::Map>().unwrap().clone();
    assert_eq!(args["fd"].as_int().unwrap(), 3);
    assert_eq!(args["st"].read_lock::<rhai::Map>().unwrap()["mode"].as_int().unwrap(), 0o644);
    let task = e["curtask"].read_lock::<rhai::Map>().unwrap().clone();
    assert_eq!(task["real_parent"].read_lock::<rhai::Map>().unwrap()["tgid"].as_int().unwrap(), 1);
    assert!(e.contains_key("kstack/perf"), "stacks keep their full name: {e:?}");
}

#[test]
fn string_arrays_end_at_their_first_empty_item() {
    let item = |index| F::EventItem { path: vec!["args".into(), "argv".into()], index };
    let l = SiteLayout::new(
        0,
        vec![
            (item(0), Ty::Bytes(8), M::Plain),
            (item(1), Ty::Bytes(8), M::Plain),
            (item(2), Ty::Bytes(8), M::Plain),
            (item(3), Ty::Bytes(8), M::Plain),
            (event("args.argv"), Ty::Int, M::Plain),
        ],
    );
    let seen = see(&l, &[S(b"ls"), S(b"-l"), S(b""), S(b"stale"), I(0x1000)], 0);
    let args = seen.event["args"].read_lock::<rhai::Map>().unwrap().clone();
    let argv: Vec<String> = args["argv"].clone().into_array().unwrap().iter().map(|v| v.to_string()).collect();
    assert_eq!(argv, ["ls", "-l"]);
}

#[test]
fn kernel_lets_go_to_their_scope_slots_and_others_stay_unset() {
    let l = SiteLayout::new(
        0,
        vec![
            (F::Local { name: "b".into(), slot: 2 }, Ty::Int, M::Plain),
            (F::Local { name: "a".into(), slot: 0 }, Ty::Bytes(8), M::Plain),
            (F::Local { name: "far".into(), slot: 9 }, Ty::Int, M::Plain),
        ],
    );
    let seen = see(&l, &[I(5), S(b"x"), I(1)], 3);
    assert_eq!(seen.locals.len(), 3);
    assert_eq!(seen.locals[0].as_ref().unwrap().to_string(), "x");
    assert!(seen.locals[1].is_none());
    assert_eq!(seen.locals[2].as_ref().unwrap().as_int().unwrap(), 5);
    assert!(seen.event.is_empty());
}

#[test]
fn reads_map_reads_and_kptr_members_go_to_the_at_event_values() {
    let l = SiteLayout::new(
        0,
        vec![
            (F::Read { line: 3, col: 9 }, Ty::Bytes(16), M::Plain),
            (F::MapRead { line: 4, col: 2 }, Ty::Int, M::Plain),
            (F::KptrBase { id: 0, ty: "struct sock *".into() }, Ty::Int, M::Plain),
            (F::KptrMember { id: 0, path: vec!["sk_common".into(), "skc_family".into()] }, Ty::Int, M::Plain),
        ],
    );
    let seen = see(&l, &[S(b"/etc/passwd"), I(77), I(0xff00), I(2)], 0);
    let at = &seen.at_event;
    assert_eq!(at.reads, vec![ReadAt { line: 3, col: 9, value: "/etc/passwd".to_string() }]);
    assert_eq!((at.map_reads[0].line, at.map_reads[0].col), (4, 2));
    assert_eq!(at.map_reads[0].value.as_int().unwrap(), 77);
    let sock = &at.kptrs[&(0xff00, "struct sock".to_string())];
    assert_eq!(sock["sk_common"].read_lock::<rhai::Map>().unwrap()["skc_family"].as_int().unwrap(), 2);
    assert!(!at.is_empty());
}

#[test]
fn emitted_values_and_the_event_key_are_kept_apart() {
    let l = SiteLayout::new(
        0,
        vec![
            (F::EventKey(0), Ty::Int, M::Plain),
            (F::EventKey(1), Ty::Int, M::Plain),
            (F::Emitted, Ty::Int, M::Plain),
            (F::Emitted, Ty::Bytes(8), M::Plain),
        ],
    );
    let seen = see(&l, &[I(3), I(123456789), I(-1), S(b"cat")], 0);
    assert_eq!(seen.event_key, (3, 123456789));
    let emitted: Vec<String> = seen.emitted.iter().map(|v| v.to_string()).collect();
    assert_eq!(emitted, ["-1", "cat"]);
}

#[test]
fn filling_again_forgets_the_previous_record() {
    let l = SiteLayout::new(
        0,
        vec![(event("pid"), Ty::Int, M::Plain), (F::Read { line: 1, col: 1 }, Ty::Bytes(8), M::Plain)],
    );
    let mut seen = see(&l, &[I(1), S(b"a")], 0);
    let other = SiteLayout::new(0, vec![(F::Emitted, Ty::Int, M::Plain)]);
    let mut values = decode(&other, &record(&other, &[I(9)])).unwrap();
    seen.fill(&other, &mut values, 0, &Names);
    assert!(seen.event.is_empty() && seen.at_event.reads.is_empty());
    assert_eq!(seen.emitted.len(), 1);
}

#[test]
fn records_of_the_wrong_size_are_refused_not_read_past() {
    let l = SiteLayout::new(0, vec![(event("pid"), Ty::Int, M::Plain), (event("comm"), Ty::Bytes(16), M::Plain)]);
    let rec = record(&l, &[I(1), S(b"x")]);
    for cut in [0, 8, 12, rec.len() - 1] {
        assert_eq!(
            decode(&l, &rec[..cut]),
            Err(Malformed::WrongSize { site: 0, len: cut, want: l.size }),
            "cut at {cut}"
        );
    }
    let mut long = rec.clone();
    long.push(0);
    assert!(matches!(decode(&l, &long), Err(Malformed::WrongSize { .. })));
    assert!(decode(&l, &rec).is_ok());
}

#[test]
fn a_record_names_a_site_the_plan_has() {
    let layouts = vec![one(event("pid"), Ty::Int, M::Plain)];
    let rec = record(&layouts[0], &[I(1)]);
    assert_eq!(site_of(&layouts, &rec).unwrap().site, 0);
    let mut other = rec.clone();
    other[..4].copy_from_slice(&9u32.to_le_bytes());
    assert_eq!(site_of(&layouts, &other).err(), Some(Malformed::UnknownSite { site: 9 }));
    assert_eq!(site_of(&layouts, &rec[..5]).err(), Some(Malformed::NoHeader { len: 5 }));
    assert!(Malformed::UnknownSite { site: 9 }.to_string().contains("site 9"));
}

#[test]
fn batches_split_into_their_records_at_every_boundary() {
    let recs: Vec<Vec<u8>> = (0..5u8).map(|n| vec![n; n as usize * 3]).collect();
    let mut batch = Vec::new();
    for r in &recs {
        push_frame(&mut batch, r);
    }
    let got: Vec<&[u8]> = frames(&batch).map(Result::unwrap).collect();
    assert_eq!(got, recs.iter().map(Vec::as_slice).collect::<Vec<_>>(), "an empty record is a record too");
    assert_eq!(frames(&[]).count(), 0);
}

#[test]
fn a_cut_batch_ends_with_one_error() {
    let mut batch = Vec::new();
    push_frame(&mut batch, b"abcdefgh");
    push_frame(&mut batch, b"ijklmnop");
    // Every cut inside the second frame: the first record, then one error.
    for cut in 13..batch.len() {
        let got: Vec<_> = frames(&batch[..cut]).collect();
        assert_eq!(got.len(), 2, "cut at {cut}");
        assert_eq!(got[0], Ok(&b"abcdefgh"[..]));
        assert!(matches!(got[1], Err(Malformed::CutFrame { .. })), "cut at {cut}: {:?}", got[1]);
    }
    assert_eq!(frames(&batch[..12]).count(), 1, "a cut at a frame boundary is a whole batch");
}

#[test]
fn every_record_of_a_batch_decodes_by_its_own_site() {
    let layouts = vec![
        SiteLayout::new(0, vec![(event("pid"), Ty::Int, M::Plain)]),
        SiteLayout::new(1, vec![(event("comm"), Ty::Bytes(16), M::Plain), (event("cpu"), Ty::Int, M::Plain)]),
    ];
    let mut batch = Vec::new();
    push_frame(&mut batch, &record(&layouts[1], &[S(b"sh"), I(2)]));
    push_frame(&mut batch, &record(&layouts[0], &[I(7)]));
    push_frame(&mut batch, &record(&layouts[1], &[S(b"cat"), I(0)]));
    let got: Vec<Vec<Value>> = frames(&batch)
        .map(|r| {
            let r = r.unwrap();
            decode(site_of(&layouts, r).unwrap(), r).unwrap()
        })
        .collect();
    assert_eq!(
        got,
        vec![
            vec![Value::Str("sh".into()), Value::Int(2)],
            vec![Value::Int(7)],
            vec![Value::Str("cat".into()), Value::Int(0)],
        ]
    );
}
