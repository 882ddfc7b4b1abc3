//! `rtrace TOOL [ARGS...]`, `rtrace --list-tools` and `rtrace tools`: the
//! command line split into rtrace's own options and the tool's arguments,
//! and the list of embedded tools.

use clap::CommandFactory;

use super::Cli;
use crate::config::Trace;
use crate::kernel::LiveKernel;
use crate::script::{tools, Session};

/// What the command line asks for, as far as tools are concerned.
pub enum Invocation {
    /// Not a tool: parse the whole command line as usual.
    Normal,
    /// `rtrace tools`: list the tools.
    List,
    /// rtrace's own options (with argv[0]), the tool's name and its arguments.
    Tool { rtrace_args: Vec<String>, name: String, args: Vec<String> },
}

/// Whether `word` is one of rtrace's options that takes a value (`-p PID`).
fn takes_value(word: &str) -> bool {
    let cmd = Cli::command();
    let found = cmd.get_arguments().any(|a| {
        a.get_action().takes_values()
            && (a.get_short().is_some_and(|s| word == format!("-{s}"))
                || a.get_long().is_some_and(|l| word == format!("--{l}")))
    });
    found
}

/// Find the first word that is not an rtrace option or an option's value:
/// when it is not an existing file and names an embedded tool, everything
/// after it belongs to the tool (its own `-p`, `-h`, ...).
pub fn classify(argv: &[String]) -> Invocation {
    let mut i = 1;
    while i < argv.len() {
        let w = argv[i].as_str();
        if w == "--" || w == "-e" || w == "-l" {
            return Invocation::Normal;
        }
        if w.starts_with('-') && w.len() > 1 {
            i += if takes_value(w) { 2 } else { 1 };
            continue;
        }
        // A script file of that name wins; a directory can't be a script, so a tool's name still runs the tool.
        let path = std::path::Path::new(w);
        if path.exists() && !(path.is_dir() && tools::find(w).is_some()) {
            return Invocation::Normal;
        }
        if w == "tools" && i + 1 == argv.len() {
            return Invocation::List;
        }
        if tools::find(w).is_some() {
            return Invocation::Tool {
                rtrace_args: argv[..i].to_vec(),
                name: w.to_string(),
                args: argv[i + 1..].to_vec(),
            };
        }
        return Invocation::Normal;
    }
    Invocation::Normal
}

/// Let the script ask `probe_error(spec)` of the running kernel.
pub fn install_probe_check(session: &Session) {
    let check: tools::SpecCheck =
        std::sync::Arc::new(|spec| crate::probes::check::attach_problem(spec, &Trace::default(), &LiveKernel));
    let members: tools::MemberCheck = std::sync::Arc::new(|what, member| kernel_has(&LiveKernel, what, member));
    let mut registry = session.registry.lock().unwrap();
    registry.spec_check = Some(check);
    registry.member_check = Some(members);
    registry.probe_list = Some(std::sync::Arc::new(super::list::probe_names));
}

/// `kernel_has(what, member)`: `what` is `struct NAME` / `union NAME` (BTF)
/// or `tracepoint:CAT:NAME` (its format).
fn kernel_has(k: &dyn crate::kernel::Kernel, what: &str, member: &str) -> bool {
    if let Some(tp) = what.strip_prefix("tracepoint:") {
        let Some((category, name)) = tp.split_once(':') else { return false };
        return k.tracepoint_format(category, name).is_ok_and(|f| f.field(member).is_some());
    }
    let Some(btf) = k.btf() else { return false };
    let id = match what.strip_prefix("union ") {
        Some(name) => btf.union_named(name.trim()),
        None => btf.struct_named(what.strip_prefix("struct ").unwrap_or(what).trim()),
    };
    id.is_some_and(|id| btf.member(id, member).is_some())
}

/// `rtrace --list-tools`: one line per tool.
pub fn print_list() -> i32 {
    let mut text = String::new();
    for (name, desc) in tools::list() {
        text.push_str(&format!("{name:<16}{desc}\n"));
    }
    crate::util::print_out(&text)
}

/// The error for a script path that can't be read: when it looks like a
/// tool's name, say that there is no such tool.
pub fn missing_script(path: &str, err: &std::io::Error) -> String {
    let looks_like_name = !path.contains('/') && !path.contains('.');
    if looks_like_name && err.kind() == std::io::ErrorKind::NotFound {
        format!("no script file or tool named '{path}' (rtrace --list-tools lists the tools)")
    } else {
        format!("cannot read {path}: {err}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn tool_arguments_are_split_off() {
        let Some((name, _)) = tools::TOOLS.first() else { return };
        match classify(&words(&format!("rtrace -q -d 1s {name} -p 12 -h"))) {
            Invocation::Tool { rtrace_args, name: n, args } => {
                assert_eq!(rtrace_args, words("rtrace -q -d 1s"));
                assert_eq!(&n, name);
                assert_eq!(args, words("-p 12 -h"));
            }
            _ => panic!("not a tool run"),
        }
        assert!(matches!(classify(&words(&format!("rtrace -e x {name}"))), Invocation::Normal));
        assert!(matches!(classify(&words("rtrace tools")), Invocation::List));
        assert!(matches!(classify(&words("rtrace no_such_tool_x -p 1")), Invocation::Normal));
    }
}
