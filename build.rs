//! Writes the man page (rtrace.1) and bash/zsh/fish completions from the
//! clap definition in src/cli/args.rs, into `target/<profile>/share/`, where
//! `scripts/install.sh` picks them up (see docs/cli.md, "Installing").

use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;

#[allow(dead_code)]
mod args {
    include!("src/cli/args.rs");
}

/// `target/<profile>` from OUT_DIR (`target/<profile>/build/rtrace-*/out`).
fn profile_dir() -> Option<PathBuf> {
    let out = PathBuf::from(std::env::var_os("OUT_DIR")?);
    out.ancestors().nth(3).map(Path::to_path_buf)
}

fn main() -> std::io::Result<()> {
    println!("cargo:rerun-if-changed=src/cli/args.rs");
    println!("cargo:rerun-if-changed=build.rs");
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
