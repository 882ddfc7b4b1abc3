//! Reading x86-64 ELF files (executables, PIE, shared objects): function
//! symbols with their file offsets, sections and notes.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, Sym};
use object::Endianness;

type Header = elf::FileHeader64<Endianness>;

/// A function symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    /// Virtual address as linked (for PIE and shared objects, relative to the load base).
    pub addr: u64,
    pub size: u64,
    /// An indirect function (`STT_GNU_IFUNC`): `addr` is its resolver, which
    /// picks the implementation when the program is loaded.
    pub ifunc: bool,
}

/// One loadable segment.
#[derive(Clone, Copy, Debug)]
struct Segment {
    vaddr: u64,
    filesz: u64,
    offset: u64,
    exec: bool,
}

/// One ELF note.
#[derive(Clone, Debug)]
pub struct Note {
    pub name: Vec<u8>,
    pub n_type: u32,
    pub desc: Vec<u8>,
}

/// An ELF file read into memory.
pub struct ElfFile {
    pub path: PathBuf,
    data: Vec<u8>,
    endian: Endianness,
    segments: Vec<Segment>,
}

impl ElfFile {
    pub fn open(path: &Path) -> Result<ElfFile> {
        let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        ElfFile::parse(path, data)
    }

    pub fn parse(path: &Path, data: Vec<u8>) -> Result<ElfFile> {
        if data.len() < 5 || &data[..4] != b"\x7fELF" {
            bail!("{} is not an ELF file", path.display());
        }
        if data[4] != elf::ELFCLASS64 {
            bail!("{} is a 32-bit ELF file; only 64-bit binaries can be probed", path.display());
        }
        let header = Header::parse(&*data).map_err(|e| anyhow!("{}: bad ELF header: {e}", path.display()))?;
        let endian = header.endian().map_err(|e| anyhow!("{}: {e}", path.display()))?;
        let phdrs = header.program_headers(endian, &*data).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        let segments = phdrs
            .iter()
            .filter(|p| p.p_type(endian) == elf::PT_LOAD)
            .map(|p| Segment {
                vaddr: p.p_vaddr(endian),
                filesz: p.p_filesz(endian),
                offset: p.p_offset(endian),
                exec: p.p_flags(endian) & elf::PF_X != 0,
            })
            .collect();
        Ok(ElfFile { path: path.to_path_buf(), data, endian, segments })
    }

    fn header(&self) -> &Header {
        // Checked in `parse`.
        Header::parse(&*self.data).expect("ELF header")
    }

    /// The file offset of virtual address `addr` (inside a PT_LOAD segment's file part).
    pub fn addr_to_offset(&self, addr: u64) -> Option<u64> {
        self.segments.iter().find(|s| addr >= s.vaddr && addr - s.vaddr < s.filesz).map(|s| addr - s.vaddr + s.offset)
    }

    /// Like [`ElfFile::addr_to_offset`], for code: only executable segments.
    pub fn code_addr_to_offset(&self, addr: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| s.exec && addr >= s.vaddr && addr - s.vaddr < s.filesz)
            .map(|s| addr - s.vaddr + s.offset)
    }

    /// The virtual address (as linked) of file offset `offset`, in an
    /// executable segment.
    pub fn code_offset_to_addr(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| s.exec && offset >= s.offset && offset - s.offset < s.filesz)
            .map(|s| offset - s.offset + s.vaddr)
    }

    /// Defined function symbols (indirect functions too) from .symtab and .dynsym, one per name
    /// (.symtab first; for versioned .dynsym names the default version),
    /// sorted by name.
    pub fn functions(&self) -> Result<Vec<Function>> {
        let endian = self.endian;
        let data = &*self.data;
        let sections = self.header().sections(endian, data).map_err(|e| anyhow!("{}: {e}", self.path.display()))?;
        let mut out: Vec<Function> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for sh_type in [elf::SHT_SYMTAB, elf::SHT_DYNSYM] {
            let Ok(table) = sections.symbols(endian, data, sh_type) else { continue };
            let versions =
                if sh_type == elf::SHT_DYNSYM { sections.versions(endian, data).ok().flatten() } else { None };
            // Default versions first, then hidden (older) ones.
            for hidden_pass in [false, true] {
                for (index, sym) in table.enumerate() {
                    let hidden = versions.as_ref().is_some_and(|v| v.version_index(endian, index).is_hidden());
                    if hidden != hidden_pass {
                        continue;
                    }
                    let ifunc = sym.st_type() == elf::STT_GNU_IFUNC;
                    if (sym.st_type() != elf::STT_FUNC && !ifunc) || sym.st_shndx(endian) == elf::SHN_UNDEF {
                        continue;
                    }
                    let addr = sym.st_value(endian);
                    if addr == 0 {
                        continue;
                    }
                    let Ok(name) = table.symbol_name(endian, sym) else { continue };
                    if name.is_empty() {
                        continue;
                    }
                    let name = String::from_utf8_lossy(name).into_owned();
                    if seen.insert(name.clone()) {
                        out.push(Function { name, addr, size: sym.st_size(endian), ifunc });
                    }
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The link-time address of the defined symbol `name` (any type: data
    /// objects too), from .symtab or .dynsym.
    pub fn symbol_addr(&self, name: &str) -> Option<u64> {
        let endian = self.endian;
        let data = &*self.data;
        let sections = self.header().sections(endian, data).ok()?;
        for sh_type in [elf::SHT_SYMTAB, elf::SHT_DYNSYM] {
            let Ok(table) = sections.symbols(endian, data, sh_type) else { continue };
            for sym in table.iter() {
                if sym.st_shndx(endian) == elf::SHN_UNDEF {
                    continue;
                }
                if table.symbol_name(endian, sym).ok() == Some(name.as_bytes()) {
                    return Some(sym.st_value(endian));
                }
            }
        }
        None
    }

    /// The link-time address of the section named `name`.
    pub fn section_addr(&self, name: &str) -> Option<u64> {
        let sections = self.header().sections(self.endian, &*self.data).ok()?;
        let (_, sh) = sections.section_by_name(self.endian, name.as_bytes())?;
        Some(sh.sh_addr(self.endian))
    }

    /// The notes of section `name` (empty when there is none).
    pub fn notes(&self, name: &str) -> Result<Vec<Note>> {
        let endian = self.endian;
        let data = &*self.data;
        let sections = self.header().sections(endian, data).map_err(|e| anyhow!("{}: {e}", self.path.display()))?;
        let Some((_, sh)) = sections.section_by_name(endian, name.as_bytes()) else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        let Some(mut iter) = sh.notes(endian, data).map_err(|e| anyhow!("{}: {name}: {e}", self.path.display()))?
        else {
            return Ok(out);
        };
        while let Some(note) = iter.next().map_err(|e| anyhow!("{}: {name}: {e}", self.path.display()))? {
            out.push(Note { name: note.name().to_vec(), n_type: note.n_type(endian), desc: note.desc().to_vec() });
        }
        Ok(out)
    }
}

/// The function containing `addr`, if any (`functions` as from [`ElfFile::functions`]).
pub fn function_at(functions: &[Function], addr: u64) -> Option<&Function> {
    functions.iter().filter(|f| addr >= f.addr && (addr - f.addr < f.size.max(1))).min_by_key(|f| addr - f.addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_binary_has_main_and_offsets() {
        let exe = std::env::current_exe().unwrap();
        let f = ElfFile::open(&exe).unwrap();
        let funcs = f.functions().unwrap();
        let main = funcs.iter().find(|s| s.name == "main").expect("main in the test binary");
        let off = f.addr_to_offset(main.addr).expect("main lies in a PT_LOAD segment");
        assert!(off > 0);
        assert_eq!(function_at(&funcs, main.addr).map(|f| f.name.as_str()), Some("main"));
    }

    #[test]
    fn not_elf() {
        let e = ElfFile::parse(Path::new("x"), b"hello world".to_vec()).err().unwrap();
        assert!(e.to_string().contains("not an ELF file"), "{e}");
    }
}
