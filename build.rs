//! Build-time outputs:
//! - every tool in stdlib/tools/ (`NAME.rhai`) embedded into the binary:
//!   `$OUT_DIR/tools.rs` with one `(name, source)` pair per file, sorted by name;
//! - the man page (rtrace.1) and bash/zsh/fish completions from the clap
//!   definition in src/cli/args.rs, into `target/<profile>/share/`, where
//!   `scripts/install.sh` picks them up (see docs/cli.md, "Installing").

use std::fmt::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;

#[allow(dead_code)]
mod args {
    include!("src/cli/args.rs");
}

fn main() -> std::io::Result<()> {
    println!("cargo:rerun-if-changed=build.rs");
    embed_tools()?;
    man_page_and_completions()
}

fn embed_tools() -> std::io::Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("stdlib/tools");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
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
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("tools.rs");
    std::fs::write(dest, out)
}

/// `target/<profile>` from OUT_DIR (`target/<profile>/build/rtrace-*/out`).
fn profile_dir() -> Option<PathBuf> {
    let out = PathBuf::from(std::env::var_os("OUT_DIR")?);
    out.ancestors().nth(3).map(Path::to_path_buf)
}

fn man_page_and_completions() -> std::io::Result<()> {
    println!("cargo:rerun-if-changed=src/cli/args.rs");
    let Some(dir) = profile_dir() else { return Ok(()) };
    let share = dir.join("share");
    let mut cmd = args::Cli::command();
    let man = share.join("man/man1");
    std::fs::create_dir_all(&man)?;
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut page)?;
    std::fs::write(man.join("rtrace.1"), page)?;
    for (shell, sub, file) in [
        (Shell::Bash, "bash-completion/completions", "rtrace"),
        (Shell::Zsh, "zsh/site-functions", "_rtrace"),
        (Shell::Fish, "fish/vendor_completions.d", "rtrace.fish"),
    ] {
        let d = share.join(sub);
        std::fs::create_dir_all(&d)?;
        let mut f = std::fs::File::create(d.join(file))?;
        clap_complete::generate(shell, &mut cmd, "rtrace", &mut f);
    }
    Ok(())
}
