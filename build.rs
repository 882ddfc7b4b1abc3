//! Embeds every tool in stdlib/tools/ (`NAME.rhai`) into the binary: writes
//! `$OUT_DIR/tools.rs` with one `(name, source)` pair per file, sorted by name.

use std::fmt::Write;

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("stdlib/tools");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<(String, std::path::PathBuf)> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "rhai"))
                .filter_map(|p| Some((p.file_stem()?.to_str()?.to_string(), p.clone())))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut out = String::from("pub const TOOLS: &[(&str, &str)] = &[\n");
    for (name, path) in &names {
        println!("cargo:rerun-if-changed={}", path.display());
        let _ = writeln!(out, "    ({name:?}, include_str!({:?})),", path.display().to_string());
    }
    out.push_str("];\n");
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("tools.rs");
    std::fs::write(dest, out).unwrap();
}
