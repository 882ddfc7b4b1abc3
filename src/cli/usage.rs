//! Usage errors (a wrong option value, a missing script): a
//! [`Diagnostic`] marked as one, so rtrace exits 2, as clap's own and
//! bpftrace's; every other error exits 1.

use crate::diag::Diagnostic;

/// A usage error with this message.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Diagnostic::usage(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_exit_2_others_1() {
        let d = super::super::diagnostic_of(&usage("-d x: not a duration"));
        assert!(d.usage);
        assert_eq!(d.to_string(), "rtrace: error: -d x: not a duration");
        assert!(!super::super::diagnostic_of(&anyhow::anyhow!("cannot attach")).usage);
    }

    /// Every `RTRACE_*` name in `text`.
    fn env_names(text: &str) -> std::collections::BTreeSet<String> {
        let mut out = std::collections::BTreeSet::new();
        let mut rest = text;
        while let Some(i) = rest.find("RTRACE_") {
            let name: String = rest[i..].chars().take_while(|c| c.is_ascii_uppercase() || *c == '_').collect();
            rest = &rest[i + name.len()..];
            out.insert(name);
        }
        out
    }

    /// The variables rtrace reads, `--help`'s list and docs/cli.md's table are
    /// the same set (the fuzzer's own, read only by `cargo test`, aside).
    #[test]
    fn help_lists_every_environment_variable_rtrace_reads() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut read = std::collections::BTreeSet::new();
        let mut dirs = vec![root.join("src")];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("fuzz.rs") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    for quoted in text.split('"').skip(1).step_by(2) {
                        if quoted.len() > 7
                            && quoted.starts_with("RTRACE_")
                            && quoted.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                        {
                            read.insert(quoted.to_string());
                        }
                    }
                }
            }
        }
        assert!(read.len() >= 10, "{read:?}");
        let help = super::super::args::AFTER_HELP;
        let env_part = &help[help.find("Environment").unwrap()..help.find("Examples").unwrap()];
        assert_eq!(env_names(env_part), read, "--help's environment list");
        let docs = std::fs::read_to_string(root.join("docs/cli.md")).unwrap();
        let table = &docs[docs.find("## Environment").unwrap()..];
        let table = &table[..table[3..].find("\n## ").map_or(table.len(), |i| i + 3)];
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| `RTRACE_")).collect();
        assert_eq!(env_names(&rows.join("\n")), read, "docs/cli.md's environment table");
        assert_eq!(rows.len(), read.len(), "one row each in docs/cli.md: {rows:#?}");
    }
}
