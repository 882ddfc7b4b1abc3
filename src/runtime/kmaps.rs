//! Kernel maps behind the script's `map()` handles: creation from the
//! unified layouts, decoding keys and values (summing per-CPU slots), and the
//! userspace operations (`print`, `clear`, `zero`, `len`, `keys`, `m[k]`).

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{anyhow, Result};
use libbpf_rs::{MapCore, MapFlags, MapType};
use probes_ebpf::ir::{AggKind, AggOp, Ty, ValueKind};
use rhai::Dynamic;

use crate::output::bytes::Buf;
use crate::output::dist::Distribution;
use crate::output::{self, KeyPart, MapDump, MapValue};
use crate::plan::site::{MapShape, ValueMeaning};
use crate::runtime::stacks::StackMaps;
use crate::script::api::MapBackend;
use crate::script::MapHandle;

/// Default entries of a map (bpftrace's default too).
pub const DEFAULT_MAX_ENTRIES: u32 = 4096;

pub struct KernelMap {
    pub name: String,
    pub shape: MapShape,
    pub map: libbpf_rs::MapHandle,
    ncpus: usize,
    /// The run's stack maps, for keys that are stacks.
    stacks: Arc<StackMaps>,
}

fn kernel_name(name: &str) -> String {
    name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(15).collect()
}

/// Create the kernel map for a script map.
pub fn create(handle: &MapHandle, shape: &MapShape, stacks: &Arc<StackMaps>) -> Result<Arc<KernelMap>> {
    let layout = &shape.layout;
    let opts = &handle.options();
    let map_type = match (layout.is_array(), layout.is_percpu(), opts.lru) {
        (true, _, _) => MapType::PercpuArray,
        (false, true, false) => MapType::PercpuHash,
        (false, true, true) => MapType::LruPercpuHash,
        (false, false, false) => MapType::Hash,
        (false, false, true) => MapType::LruHash,
    };
    let max_entries = if layout.is_array() {
        1
    } else {
        // A key-and-bucket entry per used bucket: quantiles use up to about
        // a thousand buckets per key (values to 2^20), hist at most 65.
        let default = match (layout.value, shape.agg) {
            (_, Some(AggOp::Quantiles { .. })) => DEFAULT_MAX_ENTRIES * 16,
            (ValueKind::Agg(AggKind::Hist), _) => DEFAULT_MAX_ENTRIES * 4,
            _ => DEFAULT_MAX_ENTRIES,
        };
        opts.max_entries.unwrap_or(default)
    };
    // Hash maps allocate entries on demand (as bpftrace's do): preallocating
    // thousands of per-CPU slots costs milliseconds at start-up. LRU maps
    // must be preallocated, and so are maps written where interrupts are off
    // (see `MapShape::prealloc`).
    let no_prealloc = matches!(map_type, MapType::Hash | MapType::PercpuHash) && !shape.prealloc;
    let flags = if no_prealloc { BPF_F_NO_PREALLOC } else { 0 };
    let map =
        create_map(map_type, &kernel_name(&handle.name()), layout.key_size(), layout.value_size(), max_entries, flags)
            .map_err(|e| anyhow!("cannot create map '{}': {e}", handle.name()))?;
    let ncpus = libbpf_rs::num_possible_cpus().unwrap_or(1);
    Ok(Arc::new(KernelMap { name: handle.name(), shape: shape.clone(), map, ncpus, stacks: stacks.clone() }))
}

/// Create the ring buffer for control messages.
pub fn create_ring(name: &str, size: u32) -> Result<libbpf_rs::MapHandle> {
    create_map(MapType::RingBuf, name, 0, 0, size, 0).map_err(|e| anyhow!("cannot create ring buffer: {e}"))
}

use crate::kernel::sys::{map_create as create_map, BPF_F_NO_PREALLOC};

fn i64_at(b: &[u8], off: usize) -> i64 {
    b.get(off..off + 8).map(|s| i64::from_le_bytes(s.try_into().unwrap_or([0; 8]))).unwrap_or(0)
}

/// A buf key or value as the kernel writes it: the length, then the bytes;
/// a string given for one is its printed (escaped) form. `slot` holds at
/// least the 8-byte length.
fn buf_slot(slot: &mut [u8], value: &Dynamic) {
    let bytes = match value.read_lock::<Buf>() {
        Some(b) => b.0.clone(),
        None => output::bytes::unescape(&output::bytes::text_of(value)),
    };
    let n = bytes.len().min(slot.len() - 8);
    slot[..8].copy_from_slice(&(n as u64).to_le_bytes());
    slot[8..8 + n].copy_from_slice(&bytes[..n]);
}

fn str_at(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

impl KernelMap {
    fn key_parts(&self, key: &[u8]) -> Vec<KeyPart> {
        let mut parts = Vec::new();
        let mut off = 0usize;
        for (i, ty) in self.shape.layout.key.iter().enumerate() {
            let size = ty.slot_size() as usize;
            let slot = key.get(off..off + size).unwrap_or(&[]);
            let sem = self.shape.key_sems.get(i).copied().unwrap_or(ValueMeaning::Plain);
            parts.push(match (ty, sem) {
                (Ty::Int, ValueMeaning::Stack { map, user, mode }) => {
                    KeyPart::Str(self.stacks.render_key(map, i64_at(slot, 0), user, mode))
                }
                (Ty::Int, ValueMeaning::Ksym) => {
                    KeyPart::Str(crate::symbols::stacks::ksym_name(i64_at(slot, 0) as u64))
                }
                (Ty::Int, ValueMeaning::Name(t)) => KeyPart::Str(t.render(i64_at(slot, 0))),
                (Ty::Int, ValueMeaning::Plain | ValueMeaning::Buf) => KeyPart::Int(i64_at(slot, 0)),
                (Ty::Int, ValueMeaning::Ptr) => KeyPart::Ptr(i64_at(slot, 0) as u64),
                (Ty::Int, ValueMeaning::Bool) => KeyPart::Str((i64_at(slot, 0) != 0).to_string()),
                (Ty::Bytes(_), ValueMeaning::Buf) => KeyPart::Str(crate::output::bytes::escape_buf(slot)),
                (Ty::Bytes(_), _) => KeyPart::Str(str_at(slot)),
            });
            off += size;
        }
        parts
    }

    /// Folded stacks for flame graphs: `comm;root;...;leaf count`, from maps
    /// keyed by stacks (and optionally strings) with counts. Keys that fold
    /// to the same line (stacks differing only in offsets within the same
    /// functions) are summed into one line.
    pub fn folded_lines(&self) -> Result<Vec<String>, String> {
        let mut folded: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
        for key in self.all_keys() {
            let Some(value) = self.combine(&self.slots(&key)?) else { continue };
            let count = match value {
                MapValue::Int(n) => n,
                MapValue::Avg { count, .. } | MapValue::Stats { count, .. } => count as i64,
                _ => continue,
            };
            let mut names: Vec<String> = Vec::new();
            let mut off = 0usize;
            for (i, ty) in self.shape.layout.key.iter().enumerate() {
                let size = ty.slot_size() as usize;
                let slot = key.get(off..off + size).unwrap_or(&[]);
                off += size;
                match (ty, self.shape.key_sems.get(i).copied().unwrap_or(ValueMeaning::Plain)) {
                    (Ty::Bytes(_), ValueMeaning::Buf) => names.push(crate::output::bytes::escape_buf(slot)),
                    (Ty::Bytes(_), _) => names.push(str_at(slot)),
                    (Ty::Int, ValueMeaning::Stack { map, user, .. }) => {
                        match self.stacks.frames(map, i64_at(slot, 0), user) {
                            Ok((_, frames)) => names.extend(
                                frames.iter().rev().map(|f| crate::symbols::stacks::frame_function(f).to_string()),
                            ),
                            Err(why) => names.push(format!("[{why}]")),
                        }
                    }
                    (Ty::Int, ValueMeaning::Ksym) => {
                        names.push(crate::symbols::stacks::ksym_name(i64_at(slot, 0) as u64))
                    }
                    (Ty::Int, ValueMeaning::Name(t)) => names.push(t.render(i64_at(slot, 0))),
                    (Ty::Int, ValueMeaning::Plain | ValueMeaning::Buf) => names.push(i64_at(slot, 0).to_string()),
                    (Ty::Int, ValueMeaning::Ptr) => names.push(format!("{:#x}", i64_at(slot, 0) as u64)),
                    (Ty::Int, ValueMeaning::Bool) => names.push((i64_at(slot, 0) != 0).to_string()),
                }
            }
            *folded.entry(names.join(";")).or_insert(0) += count;
        }
        Ok(folded.into_iter().map(|(stack, count)| format!("{stack} {count}")).collect())
    }

    /// Per-CPU slots of one key (a single slot for non-per-CPU maps).
    fn slots(&self, key: &[u8]) -> Result<Vec<Vec<u8>>, String> {
        if self.shape.layout.is_percpu() {
            Ok(self.map.lookup_percpu(key, MapFlags::ANY).map_err(|e| e.to_string())?.unwrap_or_default())
        } else {
            Ok(self.map.lookup(key, MapFlags::ANY).map_err(|e| e.to_string())?.into_iter().collect())
        }
    }

    fn all_keys(&self) -> Vec<Vec<u8>> {
        if self.shape.layout.is_array() {
            vec![0u32.to_le_bytes().to_vec()]
        } else {
            self.map.keys().collect()
        }
    }

    /// Combine per-CPU slots into one value; `None` when nothing was recorded.
    fn combine(&self, slots: &[Vec<u8>]) -> Option<MapValue> {
        Some(match self.shape.layout.value {
            ValueKind::Value(Ty::Int) if self.shape.value_meaning == ValueMeaning::Ptr => {
                MapValue::Ptr(i64_at(slots.first()?, 0) as u64)
            }
            ValueKind::Value(Ty::Int) => MapValue::Int(i64_at(slots.first()?, 0)),
            ValueKind::Value(Ty::Bytes(_)) if self.shape.value_meaning == ValueMeaning::Buf => {
                MapValue::Str(crate::output::bytes::escape_buf(slots.first()?))
            }
            ValueKind::Value(Ty::Bytes(_)) => MapValue::Str(str_at(slots.first()?)),
            ValueKind::Agg(AggKind::Sum) => {
                let any = slots.iter().any(|s| i64_at(s, 0) != 0) || !self.shape.layout.is_array();
                if !any {
                    return None;
                }
                MapValue::Int(slots.iter().map(|s| i64_at(s, 0)).fold(0i64, i64::wrapping_add))
            }
            ValueKind::Agg(k @ (AggKind::Min | AggKind::Max)) => {
                let seen = slots.iter().filter(|s| i64_at(s, 8) != 0).map(|s| i64_at(s, 0));
                let v = if k == AggKind::Min { seen.min() } else { seen.max() };
                MapValue::Int(v?)
            }
            ValueKind::Agg(AggKind::Avg) => {
                let count: u64 = slots.iter().map(|s| i64_at(s, 0) as u64).sum();
                let total: i64 = slots.iter().map(|s| i64_at(s, 8)).fold(0, i64::wrapping_add);
                if count == 0 {
                    return None;
                }
                match self.shape.agg {
                    Some(AggOp::Stats) => MapValue::Stats { count, total },
                    _ => MapValue::Avg { count, total },
                }
            }
            ValueKind::Agg(AggKind::Hist) | ValueKind::RingBuf | ValueKind::StackTrace { .. } => return None,
        })
    }

    /// Everything in the map, decoded.
    pub fn dump(&self) -> Result<MapDump, String> {
        self.dump_reading(|k| self.slots(k))
    }

    /// Everything in the map, decoded, and the map emptied as it is read
    /// (`reset_on_scrape`): each entry is read and deleted in one step, so
    /// no update is lost between the two. The keyless (array) form is read
    /// and then zeroed.
    pub fn take(&self) -> Result<MapDump, String> {
        if self.shape.layout.is_array() {
            let dump = self.dump()?;
            self.zero()?;
            return Ok(dump);
        }
        self.dump_reading(|k| self.take_slots(k))
    }

    /// `BPF_MAP_LOOKUP_AND_DELETE_ELEM` on one key; its per-CPU slots.
    fn take_slots(&self, key: &[u8]) -> Result<Vec<Vec<u8>>, String> {
        let size = self.shape.layout.value_size() as usize;
        let (stride, n) = if self.shape.layout.is_percpu() { (size.div_ceil(8) * 8, self.ncpus) } else { (size, 1) };
        let mut buf = vec![0u8; stride * n];
        let rc = crate::kernel::sys::map_lookup_and_delete(std::os::fd::AsFd::as_fd(&self.map), key, &mut buf);
        if rc == 0 {
            return Ok(buf.chunks(stride).map(|c| c[..size].to_vec()).collect());
        }
        match -rc {
            libc::ENOENT => Ok(Vec::new()),
            // Kernels before 5.14 can't do it for hash maps: read, then delete.
            libc::EINVAL | libc::ENOTSUP | 524 => {
                let slots = self.slots(key)?;
                let _ = self.map.delete(key);
                Ok(slots)
            }
            e => Err(format!("map '{}': {}", self.name, std::io::Error::from_raw_os_error(e))),
        }
    }

    fn dump_reading(&self, read: impl Fn(&[u8]) -> Result<Vec<Vec<u8>>, String>) -> Result<MapDump, String> {
        let keyless = self.shape.layout.key.is_empty();
        let mut entries = Vec::new();
        if self.shape.layout.value == ValueKind::Agg(AggKind::Hist) {
            let nparts: usize = self.shape.layout.key.iter().map(|t| t.slot_size() as usize).sum();
            let (len, lhist) = match self.shape.agg {
                Some(AggOp::Lhist { min, max, step }) => (output::lhist_len(min, max, step), Some((min, max, step))),
                Some(AggOp::Quantiles { .. }) => (probes_ebpf::quantile::BUCKETS, None),
                Some(AggOp::HistBits { bits }) => (probes_ebpf::quantile::hist_len(bits), None),
                _ => (output::HIST_LEN, None),
            };
            let mut groups: BTreeMap<Vec<u8>, Vec<u64>> = BTreeMap::new();
            for key in self.all_keys() {
                let bucket = i64_at(&key, nparts) as usize;
                let count: u64 = read(&key)?.iter().map(|s| i64_at(s, 0) as u64).sum();
                let counts = groups.entry(key[..nparts].to_vec()).or_insert_with(|| vec![0; len]);
                if bucket < len {
                    counts[bucket] += count;
                }
            }
            // A group whose buckets are all 0 was zeroed (`m.zero()`): it
            // still prints, empty, as bpftrace prints a zeroed histogram.
            for (k, counts) in groups {
                let value = match (lhist, self.shape.agg) {
                    (Some((min, max, step)), _) => MapValue::Lhist { min, max, step, counts },
                    (None, Some(AggOp::Quantiles { unit_ns })) => MapValue::Quantiles { unit_ns, counts },
                    (None, Some(AggOp::HistBits { bits })) => MapValue::Hist { bits, counts },
                    (None, _) => MapValue::Hist { bits: 0, counts },
                };
                entries.push((self.key_parts(&k), value));
            }
        } else {
            for key in self.all_keys() {
                let slots = read(&key)?;
                if slots.is_empty() {
                    continue; // deleted since the keys were listed
                }
                if let Some(v) = self.combine(&slots) {
                    entries.push((self.key_parts(&key), v));
                }
            }
        }
        Ok(MapDump { name: self.name.clone(), keyless, entries })
    }

    /// Encode a userspace key (`m[k]`).
    fn encode_key(&self, key: &Dynamic) -> Result<Vec<u8>, String> {
        let layout = &self.shape.layout;
        if layout.key.is_empty() {
            return Ok(0u32.to_le_bytes().to_vec());
        }
        let parts: Vec<Dynamic> = match key.clone().try_cast::<rhai::Array>() {
            Some(a) if layout.key.len() > 1 || a.len() == 1 => a,
            _ => vec![key.clone()],
        };
        if parts.len() != layout.key.len() {
            return Err(format!("map '{}' has {}-part keys, got {}", self.name, layout.key.len(), parts.len()));
        }
        let mut out = Vec::new();
        for (i, (p, ty)) in parts.iter().zip(&layout.key).enumerate() {
            let mut slot = vec![0u8; ty.slot_size() as usize];
            if matches!((ty, self.shape.key_sems.get(i)), (Ty::Bytes(_), Some(ValueMeaning::Buf))) && slot.len() >= 8 {
                buf_slot(&mut slot, p);
                out.extend_from_slice(&slot);
                continue;
            }
            match ty {
                Ty::Int => {
                    // A name (`syscall_name(n)` in userspace) where the kernel keeps the number.
                    let named =
                        |t: crate::util::names::NameTable| p.clone().into_string().ok().and_then(|s| t.number(&s));
                    let v = match (p.as_int(), self.shape.key_sems.get(i)) {
                        (Ok(v), _) => Some(v),
                        (Err(_), Some(ValueMeaning::Name(t))) => named(*t),
                        _ => None,
                    };
                    let v = v.ok_or_else(|| format!("map '{}' has integer keys", self.name))?;
                    out.extend_from_slice(&v.to_le_bytes());
                }
                Ty::Bytes(_) => {
                    let s = match p.read_lock::<Buf>() {
                        Some(b) => b.escaped(),
                        None => p.clone().into_string().map_err(|_| format!("map '{}' has string keys", self.name))?,
                    };
                    let n = s.len().min(slot.len().saturating_sub(1));
                    slot[..n].copy_from_slice(&s.as_bytes()[..n]);
                    out.extend_from_slice(&slot);
                }
            }
        }
        Ok(out)
    }

    fn key_dynamic(&self, key: &[u8]) -> Dynamic {
        parts_dynamic(self.key_parts(key))
    }
}

impl MapBackend for KernelMap {
    fn print(&self) -> Result<(), String> {
        let dump = self.dump()?;
        output::sink::map(&dump);
        Ok(())
    }
    fn clear(&self) -> Result<(), String> {
        if self.shape.layout.is_array() {
            return self.zero();
        }
        for key in self.all_keys() {
            let _ = self.map.delete(&key);
        }
        Ok(())
    }
    fn zero(&self) -> Result<(), String> {
        let size = self.shape.layout.value_size() as usize;
        for key in self.all_keys() {
            let r = if self.shape.layout.is_percpu() {
                self.map.update_percpu(&key, &vec![vec![0u8; size]; self.ncpus], MapFlags::ANY)
            } else {
                self.map.update(&key, &vec![0u8; size], MapFlags::ANY)
            };
            r.map_err(|e| e.to_string())?;
        }
        Ok(())
    }
    fn len(&self) -> Result<usize, String> {
        Ok(self.dump()?.entries.len())
    }
    fn folded(&self) -> Result<Vec<String>, String> {
        self.folded_lines()
    }
    fn keys(&self) -> Result<rhai::Array, String> {
        if self.shape.layout.value == ValueKind::Agg(AggKind::Hist) {
            let dump = self.dump()?;
            return Ok(dump.entries.into_iter().map(|(k, _)| parts_dynamic(k)).collect());
        }
        Ok(self.all_keys().iter().map(|k| self.key_dynamic(k)).collect())
    }
    fn get(&self, key: &Dynamic) -> Result<Dynamic, String> {
        if self.shape.layout.value == ValueKind::Agg(AggKind::Hist) {
            // A distribution: m[k].percentile(p), m[k].count(), ...
            return self.distribution(Some(key)).map(Dynamic::from);
        }
        let k = self.encode_key(key)?;
        Ok(match self.combine(&self.slots(&k)?) {
            None => Dynamic::from(0i64),
            Some(MapValue::Int(i)) => Dynamic::from(i),
            Some(MapValue::Ptr(p)) => Dynamic::from(p as i64),
            Some(MapValue::Str(s)) => Dynamic::from(s),
            Some(MapValue::Avg { count, total }) | Some(MapValue::Stats { count, total }) => {
                Dynamic::from(total / count.max(1) as i64)
            }
            Some(_) => Dynamic::UNIT,
        })
    }
    fn aggregate(&self, key: &Dynamic, agg: &str, args: &[Dynamic]) -> Result<(), String> {
        let ValueKind::Agg(kind) = self.shape.layout.value else {
            return Err(format!("map '{}' holds plain values, not {agg}()", self.name));
        };
        let int = |i: usize| -> Result<i64, String> {
            let a = args.get(i).ok_or_else(|| format!("{agg}() needs a value"))?;
            a.as_int().or_else(|_| a.as_bool().map(i64::from)).map_err(|_| format!("{agg}() takes integers"))
        };
        let mut k = match (self.shape.layout.key.is_empty(), kind) {
            (true, AggKind::Hist) => Vec::new(),
            _ => self.encode_key(key)?,
        };
        if kind == AggKind::Hist {
            let v = int(0)?;
            let bucket = match agg {
                "hist" => match self.shape.agg {
                    Some(AggOp::HistBits { bits }) => probes_ebpf::quantile::hist_bucket(v, bits),
                    _ => probes_ebpf::quantile::log2_bucket(v),
                },
                "lhist" => probes_ebpf::quantile::linear_bucket(v, int(1)?, int(2)?, int(3)?),
                _ => probes_ebpf::quantile::bucket(v) as u64,
            };
            k.extend_from_slice(&bucket.to_le_bytes());
        }
        let size = self.shape.layout.value_size() as usize;
        let cpus = libbpf_rs::num_possible_cpus().unwrap_or(1).max(1);
        let mut slots = self.slots(&k)?;
        if slots.len() != cpus {
            slots = vec![vec![0u8; size]; cpus];
        }
        let slot = &mut slots[0];
        let get = |s: &[u8], at: usize| i64::from_le_bytes(s[at..at + 8].try_into().unwrap_or([0; 8]));
        let put = |s: &mut [u8], at: usize, v: i64| s[at..at + 8].copy_from_slice(&v.to_le_bytes());
        match kind {
            AggKind::Hist => {
                let n = get(slot, 0).wrapping_add(1);
                put(slot, 0, n);
            }
            AggKind::Sum => {
                let add = if agg == "count" { 1 } else { int(0)? };
                let n = get(slot, 0).wrapping_add(add);
                put(slot, 0, n);
            }
            AggKind::Min | AggKind::Max => {
                let v = int(0)?;
                let better = if kind == AggKind::Min { v < get(slot, 0) } else { v > get(slot, 0) };
                if get(slot, 8) == 0 || better {
                    put(slot, 0, v);
                    put(slot, 8, 1);
                }
            }
            AggKind::Avg => {
                let v = int(0)?;
                let (n, total) = (get(slot, 0).wrapping_add(1), get(slot, 8).wrapping_add(v));
                put(slot, 0, n);
                put(slot, 8, total);
            }
        }
        self.map.update_percpu(&k, &slots, MapFlags::ANY).map_err(|e| format!("map '{}': {e}", self.name))
    }
    fn holds_integers(&self) -> bool {
        // Aggregations other than histograms: the kernel combines the CPUs' slots as userspace does.
        let kernel_reads_it = match self.shape.layout.value {
            ValueKind::Value(Ty::Int) => true,
            ValueKind::Agg(kind) => kind != AggKind::Hist,
            _ => false,
        };
        kernel_reads_it && self.shape.value_meaning == ValueMeaning::Plain
    }
    fn set(&self, key: &Dynamic, value: &Dynamic) -> Result<(), String> {
        let ValueKind::Value(ty) = self.shape.layout.value else {
            return Err(format!("map '{}' holds an aggregation; userspace can only write plain-value maps", self.name));
        };
        let k = self.encode_key(key)?;
        let mut v = vec![0u8; ty.slot_size() as usize];
        match ty {
            Ty::Int => {
                let n = value.as_int().map_err(|_| format!("map '{}' holds integers", self.name))?;
                v.copy_from_slice(&n.to_le_bytes());
            }
            Ty::Bytes(_) if self.shape.value_meaning == ValueMeaning::Buf && v.len() >= 8 => buf_slot(&mut v, value),
            Ty::Bytes(_) => {
                let text = crate::output::bytes::text_of(value);
                let n = text.len().min(v.len().saturating_sub(1));
                v[..n].copy_from_slice(&text.as_bytes()[..n]);
            }
        }
        self.map.update(&k, &v, MapFlags::ANY).map_err(|e| format!("map '{}': {e}", self.name))
    }
    fn contains(&self, key: &Dynamic) -> Result<bool, String> {
        let k = self.encode_key(key)?;
        Ok(!self.slots(&k)?.is_empty())
    }
    fn remove(&self, key: &Dynamic) -> Result<(), String> {
        let k = self.encode_key(key)?;
        let _ = self.map.delete(&k);
        Ok(())
    }
    fn entries(&self) -> Result<rhai::Array, String> {
        let dump = self.dump()?;
        Ok(dump.entries.into_iter().map(|(k, v)| Dynamic::from(vec![parts_dynamic(k), value_dynamic(&v)])).collect())
    }
    fn distribution(&self, key: Option<&Dynamic>) -> Result<Distribution, String> {
        let dump = self.dump()?;
        let Some(key) = key else {
            return Distribution::merged(&self.name, dump.entries.into_iter().map(|(_, v)| v).collect());
        };
        let parts = self.key_parts(&self.encode_key(key)?);
        let value = dump.entries.into_iter().find(|(k, _)| *k == parts).map(|(_, v)| v);
        Distribution::of_key(&self.name, format!("[{}]", key_text(&parts)), value)
    }
}

/// A key as `m[...]` shows it in errors.
fn key_text(parts: &[KeyPart]) -> String {
    let text: Vec<String> = parts
        .iter()
        .map(|p| match p {
            KeyPart::Int(i) => i.to_string(),
            KeyPart::Ptr(p) => format!("{p:#x}"),
            KeyPart::Str(s) => format!("{s:?}"),
        })
        .collect();
    text.join(", ")
}

/// A decoded value as Rhai sees it.
fn value_dynamic(v: &MapValue) -> Dynamic {
    match v {
        MapValue::Int(i) => Dynamic::from(*i),
        MapValue::Ptr(p) => Dynamic::from(*p as i64),
        MapValue::Str(s) => Dynamic::from(s.clone()),
        MapValue::Avg { count, total } => Dynamic::from(total / (*count).max(1) as i64),
        MapValue::Stats { count, total } => {
            let mut m = rhai::Map::new();
            m.insert("count".into(), Dynamic::from(*count as i64));
            m.insert("total".into(), Dynamic::from(*total));
            m.insert("avg".into(), Dynamic::from(total / (*count).max(1) as i64));
            Dynamic::from(m)
        }
        MapValue::Hist { counts: c, .. }
        | MapValue::Lhist { counts: c, .. }
        | MapValue::Quantiles { counts: c, .. } => {
            Dynamic::from(c.iter().map(|&n| Dynamic::from(n as i64)).collect::<rhai::Array>())
        }
    }
}

/// The per-CPU array counting, per probe, records lost (first `u64`) and
/// control messages lost (second `u64`).
pub fn create_lost_counters(probes: u32) -> Result<libbpf_rs::MapHandle> {
    create_map(MapType::PercpuArray, "rtrace_lost", 4, 16, probes, 0)
        .map_err(|e| anyhow!("cannot create the lost-event counters: {e}"))
}

/// `-c`: the followed pids, starting with the command's. Children are
/// added by the follow program; 64K entries at most (allocated on demand).
pub fn create_follow_map(pid: i32) -> Result<libbpf_rs::MapHandle> {
    let map = create_map(MapType::Hash, "rtrace_follow", 8, 8, 1 << 16, BPF_F_NO_PREALLOC)
        .map_err(|e| anyhow!("cannot create the -c pid map: {e}"))?;
    map.update(&(pid as i64).to_ne_bytes(), &1i64.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
        .map_err(|e| anyhow!("cannot fill the -c pid map: {e}"))?;
    Ok(map)
}

/// The per-CPU counts of failed stack captures (collisions, map full).
pub fn create_stack_lost_counters() -> Result<libbpf_rs::MapHandle> {
    create_map(MapType::PercpuArray, "rtrace_stk_lost", 4, 8, 2, 0)
        .map_err(|e| anyhow!("cannot create the lost-stack counters: {e}"))
}

/// Default entries of a stack map of `depth` frames: what 16 MiB of frames
/// hold, as a power of two from 4096 to 65536 (16384 at the full 127
/// frames). Stack maps are preallocated, and a stack whose hash bucket is
/// taken is lost, so more entries than distinct stacks keeps losses rare.
pub fn default_stack_entries(depth: u32) -> u32 {
    let fit = (16u32 << 20) / (depth.max(1) * 8);
    let pow2 = if fit.is_power_of_two() { fit } else { fit.next_power_of_two() / 2 };
    pow2.clamp(4096, 65536)
}

/// The stop flag every program checks first (one u64 in an array).
pub fn create_stop_flag() -> Result<libbpf_rs::MapHandle> {
    create_map(MapType::Array, "rtrace_stop", 4, 8, 1, 0).map_err(|e| anyhow!("cannot create the stop flag: {e}"))
}

/// The reader's "about to sleep" flag: one slot, raised by the reader
/// before it sleeps and lowered by the first record after that, which wakes it.
pub fn create_wake_flag() -> Result<libbpf_rs::MapHandle> {
    create_map(MapType::Array, "rtrace_wake", 4, 8, 1, 0).map_err(|e| anyhow!("cannot create the wake-up flag: {e}"))
}

/// Raise the stop flag: from now on every program returns at once.
pub fn set_stop_flag(map: &libbpf_rs::MapHandle) -> Result<()> {
    map.update(&0u32.to_ne_bytes(), &1u64.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
        .map_err(|e| anyhow!("cannot stop the probes: {e}"))
}

/// A stack trace map of `depth` frames per stack.
pub fn create_stack_map(depth: u32, entries: u32) -> Result<libbpf_rs::MapHandle> {
    create_map(MapType::StackTrace, "rtrace_stacks", 4, depth * 8, entries, 0)
        .map_err(|e| anyhow!("cannot create a stack map: {e}"))
}

/// A decoded key as Rhai sees it: one value, or an array for tuple keys.
fn parts_dynamic(parts: Vec<KeyPart>) -> Dynamic {
    let mut values: Vec<Dynamic> = parts
        .into_iter()
        .map(|p| match p {
            KeyPart::Int(i) => Dynamic::from(i),
            KeyPart::Ptr(p) => Dynamic::from(p as i64),
            KeyPart::Str(s) => Dynamic::from(s),
        })
        .collect();
    if values.len() == 1 {
        values.pop().unwrap_or(Dynamic::UNIT)
    } else {
        Dynamic::from(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_stack_entries_scale_with_depth() {
        assert_eq!(default_stack_entries(127), 16384);
        assert_eq!(default_stack_entries(64), 32768);
        assert_eq!(default_stack_entries(3), 65536);
        assert_eq!(default_stack_entries(1), 65536);
        for depth in 1..=127 {
            let n = default_stack_entries(depth);
            assert!(n.is_power_of_two() && (4096..=65536).contains(&n), "{depth}: {n}");
            assert!(
                n as u64 * depth as u64 * 8 <= 16 << 20 || n == 4096,
                "{depth}: {n} entries exceed 16 MiB of frames"
            );
        }
    }
}
