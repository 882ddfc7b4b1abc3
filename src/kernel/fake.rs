//! A kernel made of fixtures captured on a real machine
//! (`tests/fixtures/kernel/`): its tracepoint list, some tracepoint
//! formats, raw tracepoint names, a few kernel functions and a small table
//! of kernel types (`btf.txt`, see `fake_btf`), two CPUs, and no kprobe
//! PMU or fentry. compile runs against it without root, with the same
//! answers on every machine.
//!
//! To add a format: copy `/sys/kernel/tracing/events/CAT/NAME/format` to
//! `tests/fixtures/kernel/formats/CAT/NAME`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use super::btf::BtfTypes;
use super::fake_btf::FakeBtf;
use super::tracefs::unknown_tracepoint_message_in;
use super::tracepoint_format::{parse_format, TracepointFormat};
use super::Kernel;

pub struct FakeKernel {
    tracepoints: Vec<(String, String)>,
    /// Format texts by (category, name).
    formats: BTreeMap<(String, String), String>,
    raw: Vec<String>,
    functions: Vec<super::functions::KernelFunction>,
    btf: FakeBtf,
}

fn lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect()
}

impl FakeKernel {
    /// The kernel of `tests/fixtures/kernel/`.
    pub fn from_fixtures() -> FakeKernel {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernel");
        let mut tracepoints: Vec<(String, String)> = lines(&dir.join("available_events"))
            .iter()
            .filter_map(|l| l.split_once(':'))
            .map(|(c, n)| (c.to_string(), n.to_string()))
            .collect();
        tracepoints.sort();
        let mut formats = BTreeMap::new();
        for category in std::fs::read_dir(dir.join("formats")).into_iter().flatten().flatten() {
            for event in std::fs::read_dir(category.path()).into_iter().flatten().flatten() {
                let key = (
                    category.file_name().to_string_lossy().into_owned(),
                    event.file_name().to_string_lossy().into_owned(),
                );
                let path = event.path();
                let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                formats.insert(key, text);
            }
        }
        let mut raw = lines(&dir.join("raw_tracepoints"));
        raw.sort();
        let functions = super::functions::parse_filter_functions(&lines(&dir.join("kernel_functions")).join("\n"));
        let btf_path = dir.join("btf.txt");
        let btf_text = std::fs::read_to_string(&btf_path).unwrap_or_else(|e| panic!("{}: {e}", btf_path.display()));
        FakeKernel { tracepoints, formats, raw, functions, btf: FakeBtf::parse(&btf_text) }
    }
}

impl Kernel for FakeKernel {
    fn tracepoint_format(&self, category: &str, name: &str) -> Result<TracepointFormat> {
        match self.formats.get(&(category.to_string(), name.to_string())) {
            Some(text) => parse_format(category, name, text),
            None if self.tracepoint_exists(category, name)? => {
                bail!(
                    "no fixture for tracepoint {category}:{name} (add tests/fixtures/kernel/formats/{category}/{name})"
                )
            }
            None => bail!("{}", unknown_tracepoint_message_in(&self.tracepoints, category, name)),
        }
    }
    fn tracepoint_exists(&self, category: &str, name: &str) -> Result<bool> {
        Ok(self.tracepoints.binary_search(&(category.to_string(), name.to_string())).is_ok())
    }
    fn category_events(&self, category: &str) -> Result<Vec<String>> {
        Ok(self.tracepoints.iter().filter(|(c, _)| c == category).map(|(_, n)| n.clone()).collect())
    }
    fn tracepoints(&self) -> Result<&[(String, String)]> {
        Ok(&self.tracepoints)
    }
    fn raw_tracepoints(&self) -> Result<&[String]> {
        Ok(&self.raw)
    }
    fn kernel_functions(&self) -> &[super::functions::KernelFunction] {
        &self.functions
    }
    fn fentry_available(&self) -> bool {
        false
    }
    fn trampoline_loads(&self, _function: &str) -> bool {
        false
    }
    fn kprobes_available(&self) -> bool {
        false
    }
    fn bpf_lsm_refused(&self) -> Option<String> {
        None
    }
    fn btf(&self) -> Option<&dyn BtfTypes> {
        Some(&self.btf)
    }
    /// Two, as on the machine the goldens were first made on.
    fn possible_cpus(&self) -> u32 {
        2
    }
}
