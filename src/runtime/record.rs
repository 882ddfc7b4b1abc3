//! The record codec: the bytes the programs send for a userspace site, as
//! the values its statements see. Three plain functions of (site layout,
//! bytes), with no kernel and no Rhai engine behind them:
//!
//! 1. [`frames`] splits a batch from the reader (`u32 length` + record,
//!    written by [`push_frame`]) into records;
//! 2. [`decode_into`] turns one record into typed [`Value`]s (numbers, bools,
//!    strings, bufs, stacks as ids, kernel addresses), checking its length
//!    against the site's [`SiteLayout`];
//! 3. [`SiteValues::fill`] turns those into what a site's statements see:
//!    the `e` object map, the kernel `let` values by scope slot, the event
//!    key, the values given to `emit()`, and the [`AtEvent`] reads.
//!
//! The byte layout itself (header, 8-aligned slots) is
//! `probes_ebpf::record`'s, shared with the code generator.

use probes_ebpf::ir::{MapId, Ty};
use probes_ebpf::record::{field_offsets, record_site, RECORD_HEADER};
use rhai::Dynamic;

use crate::output::bytes::Buf;
use crate::plan::site::{RecordField, Site, ValueMeaning};
use crate::script::kernel_reads::{kptr_type, AtEvent, ReadAt};
use crate::symbols::stacks::StackMode;

/// Where each field of a site's records is, and what it holds.
#[derive(Clone, Debug)]
pub struct SiteLayout {
    pub site: u32,
    pub fields: Vec<FieldLayout>,
    /// The record's size: every record of the site has exactly this many bytes.
    pub size: usize,
}

#[derive(Clone, Debug)]
pub struct FieldLayout {
    pub what: RecordField,
    pub ty: Ty,
    pub meaning: ValueMeaning,
    /// Byte offset in the record.
    pub at: usize,
}

impl SiteLayout {
    pub fn of(site: &Site) -> SiteLayout {
        let meaning = |i: usize| site.sems.get(i).copied().unwrap_or(ValueMeaning::Plain);
        SiteLayout::new(
            site.id,
            site.fields.iter().enumerate().map(|(i, (what, ty))| (what.clone(), *ty, meaning(i))).collect(),
        )
    }

    /// The layout of records of `site` with these fields, in order.
    pub fn new(site: u32, fields: Vec<(RecordField, Ty, ValueMeaning)>) -> SiteLayout {
        let (offsets, size) = field_offsets(fields.iter().map(|(_, ty, _)| *ty));
        let fields = fields
            .into_iter()
            .zip(offsets)
            .map(|((what, ty, meaning), at)| FieldLayout { what, ty, meaning, at: at as usize })
            .collect();
        SiteLayout { site, fields, size: size as usize }
    }

    /// Offsets of the user-stack values (`pid << 32 | id`), which the reader
    /// looks at to read a process's mappings while it still runs.
    pub fn user_stack_offsets(&self) -> Vec<usize> {
        self.fields
            .iter()
            .filter(|f| matches!(f.meaning, ValueMeaning::Stack { user: true, .. }))
            .map(|f| f.at)
            .collect()
    }
}

/// A stack captured at the event: an id in a stack map (user stacks carry
/// the pid in the high 32 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackRef {
    pub map: MapId,
    pub user: bool,
    pub mode: StackMode,
    pub id: i64,
}

/// One field of a record, typed by what it means.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Bool(bool),
    Str(String),
    Buf(Buf),
    Stack(StackRef),
    /// A kernel address shown as its function name.
    Ksym(u64),
}

/// Why a record could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// Shorter than the `u32` site id and its padding.
    NoHeader { len: usize },
    /// A site id the plan doesn't have.
    UnknownSite { site: u32 },
    /// Not the site's record size.
    WrongSize { site: u32, len: usize, want: usize },
    /// A batch frame whose length runs past the batch's end.
    CutFrame { len: usize, left: usize },
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::NoHeader { len } => write!(f, "a record of {len} bytes has no header"),
            Malformed::UnknownSite { site } => write!(f, "a record names site {site}, which no probe has"),
            Malformed::WrongSize { site, len, want } => {
                write!(f, "a record of site {site} has {len} bytes, not {want}")
            }
            Malformed::CutFrame { len, left } => write!(f, "a batch frame of {len} bytes has only {left} left"),
        }
    }
}

// ---------------------------------------------------------------------------
// 1. Batches

/// Append one record to a batch as a frame: its `u32` length, then its bytes.
pub fn push_frame(batch: &mut Vec<u8>, rec: &[u8]) {
    batch.extend_from_slice(&(rec.len() as u32).to_le_bytes());
    batch.extend_from_slice(rec);
}

/// The records of a batch, in order. A frame cut short (which only a bug
/// can make) ends the batch with one `Err`.
pub fn frames(batch: &[u8]) -> Frames<'_> {
    Frames { rest: batch }
}

pub struct Frames<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<&'a [u8], Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let Some((len, body)) = self.rest.split_first_chunk::<4>() else {
            let left = self.rest.len();
            self.rest = &[];
            return Some(Err(Malformed::CutFrame { len: 4, left }));
        };
        let len = u32::from_le_bytes(*len) as usize;
        if len > body.len() {
            self.rest = &[];
            return Some(Err(Malformed::CutFrame { len, left: body.len() }));
        }
        let (rec, rest) = body.split_at(len);
        self.rest = rest;
        Some(Ok(rec))
    }
}

// ---------------------------------------------------------------------------
// 2. A record's typed values

/// The site a record is for, checked to be one of `layouts`.
pub fn site_of<'l>(layouts: &'l [SiteLayout], rec: &[u8]) -> Result<&'l SiteLayout, Malformed> {
    if rec.len() < RECORD_HEADER as usize {
        return Err(Malformed::NoHeader { len: rec.len() });
    }
    let site = record_site(rec).unwrap_or(u32::MAX);
    layouts.get(site as usize).ok_or(Malformed::UnknownSite { site })
}

/// Decode `rec`, a record of `layout`'s site, into `out` (cleared first;
/// its storage is reused from record to record).
pub fn decode_into(layout: &SiteLayout, rec: &[u8], out: &mut Vec<Value>) -> Result<(), Malformed> {
    out.clear();
    if rec.len() != layout.size {
        return Err(Malformed::WrongSize { site: layout.site, len: rec.len(), want: layout.size });
    }
    out.extend(layout.fields.iter().map(|f| field_value(f, rec)));
    Ok(())
}

/// One field (the record's size was checked, so its bytes are there).
fn field_value(f: &FieldLayout, rec: &[u8]) -> Value {
    let bytes = &rec[f.at..f.at + f.ty.slot_size() as usize];
    let int = || i64::from_le_bytes(bytes[..8].try_into().unwrap_or([0; 8]));
    match (f.ty, f.meaning) {
        (Ty::Bytes(n), ValueMeaning::Buf) => Value::Buf(Buf::from_field(&bytes[..n as usize])),
        (Ty::Bytes(n), _) => {
            let s = &bytes[..n as usize];
            let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
            Value::Str(String::from_utf8_lossy(&s[..end]).into_owned())
        }
        (Ty::Int, ValueMeaning::Bool) => Value::Bool(int() != 0),
        (Ty::Int, ValueMeaning::Stack { map, user, mode }) => Value::Stack(StackRef { map, user, mode, id: int() }),
        (Ty::Int, ValueMeaning::Ksym) => Value::Ksym(int() as u64),
        (Ty::Int, ValueMeaning::Name(t)) => Value::Str(t.render(int())),
        (Ty::Int, ValueMeaning::Buf) => Value::Buf(Buf(Vec::new())),
        (Ty::Int, ValueMeaning::Plain | ValueMeaning::Ptr) => Value::Int(int()),
    }
}

// ---------------------------------------------------------------------------
// 3. What a site's statements see

/// How stacks and kernel addresses become text: the run's stack maps and
/// symbolizer, or a stand-in in tests.
pub trait Symbols {
    fn stack(&self, s: &StackRef) -> String;
    fn ksym(&self, addr: u64) -> String;
}

impl Value {
    /// The Rhai value a statement sees.
    pub fn into_dynamic(self, symbols: &dyn Symbols) -> Dynamic {
        match self {
            Value::Int(v) => Dynamic::from(v),
            Value::Bool(b) => Dynamic::from(b),
            Value::Str(s) => Dynamic::from(s),
            Value::Buf(b) => Dynamic::from(b),
            Value::Stack(s) => Dynamic::from(symbols.stack(&s)),
            Value::Ksym(a) => Dynamic::from(symbols.ksym(a)),
        }
    }
}

/// What one record gives its site's statements.
#[derive(Debug, Default)]
pub struct SiteValues {
    /// `e`: event fields by name, `e.args.*` under `args`, member chains
    /// as nested maps, stacks under their full name (`ustack/perf`).
    pub event: rhai::Map,
    /// The kernel `let` values, by slot of the site's scope (`None`: not
    /// in this record).
    pub locals: Vec<Option<Dynamic>>,
    /// Which event the record belongs to (CPU, time), for carried runs.
    pub event_key: (i64, i64),
    /// The values given to `emit()`, in order.
    pub emitted: Vec<Dynamic>,
    /// The strings, map values and members the kernel read for the statements.
    pub at_event: AtEvent,
}

impl SiteValues {
    /// Turn a record's `values` (of `layout`) into what its statements see;
    /// `slots` is the size of the site's scope. `values` is left empty; the
    /// storage of both is reused.
    pub fn fill(&mut self, layout: &SiteLayout, values: &mut Vec<Value>, slots: usize, symbols: &dyn Symbols) {
        self.event.clear();
        self.locals.clear();
        self.locals.resize(slots, None);
        self.event_key = (0, 0);
        self.emitted.clear();
        self.at_event = AtEvent::default();
        let mut args = rhai::Map::new();
        let mut arrays: Vec<(String, Vec<Dynamic>)> = Vec::new();
        let mut kptr_bases: Vec<(usize, i64, String)> = Vec::new();
        let mut kptr_members: Vec<(usize, &[String], Dynamic)> = Vec::new();
        for (f, value) in layout.fields.iter().zip(values.drain(..)) {
            let value = value.into_dynamic(symbols);
            match &f.what {
                RecordField::Local { slot, .. } => {
                    if let Some(l) = self.locals.get_mut(*slot) {
                        *l = Some(value);
                    }
                }
                RecordField::EventKey(0) => self.event_key.0 = value.as_int().unwrap_or(0),
                RecordField::EventKey(_) => self.event_key.1 = value.as_int().unwrap_or(0),
                RecordField::Emitted => self.emitted.push(value),
                RecordField::Read { line, col } => self.at_event.reads.push(ReadAt {
                    line: *line,
                    col: *col,
                    value: value.into_string().unwrap_or_default(),
                }),
                RecordField::MapRead { line, col } => {
                    self.at_event.map_reads.push(ReadAt { line: *line, col: *col, value })
                }
                RecordField::KptrBase { id, ty } => kptr_bases.push((*id, value.as_int().unwrap_or(0), kptr_type(ty))),
                RecordField::KptrMember { id, path } => kptr_members.push((*id, path, value)),
                RecordField::EventItem { path, .. } => {
                    let Some(name) = path.last() else { continue };
                    match arrays.iter_mut().find(|(n, _)| n == name) {
                        Some((_, items)) => items.push(value),
                        None => arrays.push((name.clone(), vec![value])),
                    }
                }
                RecordField::Event(path) => {
                    if arrays.iter().any(|(n, _)| Some(n) == path.last()) {
                        // The array's own marker field: its items came just before.
                        continue;
                    }
                    match path.as_slice() {
                        [first, ..] if crate::builtins::is_stack(first) => {
                            self.event.insert(path.join("/").into(), value);
                        }
                        [a, rest @ ..] if a == "args" && !rest.is_empty() => insert_path(&mut args, rest, value),
                        _ => insert_path(&mut self.event, path, value),
                    }
                }
            }
        }
        for (name, mut items) in arrays {
            // A NULL entry ends the array (it reads as an empty string).
            if let Some(end) = items.iter().position(|v| v.to_string().is_empty()) {
                items.truncate(end);
            }
            args.insert(name.into(), Dynamic::from(items));
        }
        if !args.is_empty() {
            self.event.insert("args".into(), Dynamic::from(args));
        }
        for (id, path, value) in kptr_members {
            if let Some((_, base, ty)) = kptr_bases.iter().find(|(b, _, _)| *b == id) {
                insert_path(self.at_event.kptrs.entry((*base, ty.clone())).or_default(), path, value);
            }
        }
    }
}

/// `e.curtask.real_parent.tgid`: nested object maps down `path`.
fn insert_path(map: &mut rhai::Map, path: &[String], value: Dynamic) {
    match path {
        [] => {}
        [last] => {
            map.insert(last.as_str().into(), value);
        }
        [first, rest @ ..] => {
            let entry = map.entry(first.as_str().into()).or_insert_with(|| Dynamic::from(rhai::Map::new()));
            if !entry.is_map() {
                *entry = Dynamic::from(rhai::Map::new());
            }
            if let Some(mut inner) = entry.write_lock::<rhai::Map>() {
                insert_path(&mut inner, rest, value);
            }
        }
    }
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
