//! Build-time outputs:
//! - every tool in stdlib/tools/ (`NAME.rhai`) embedded into the binary:
//!   `$OUT_DIR/tools.rs` with one `(name, source)` pair per file, sorted by name;
//! - the man page (rtrace.1) and bash/zsh/fish completions from the clap
//!   definition in src/cli/args.rs, into `target/<profile>/share/`, where
//!   `scripts/install.sh` picks them up (see docs/cli.md, "Installing").

use std::fmt::Write;
use std::io::Write as _;
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
        f.write_all(tool_completion(shell, &value_options(&cmd)).as_bytes())?;
    }
    Ok(())
}

/// rtrace's options that take a value (`-e -d ... --ring-size`), as words.
fn value_options(cmd: &clap::Command) -> String {
    let mut words = Vec::new();
    for a in cmd.get_arguments().filter(|a| !a.is_positional() && a.get_action().takes_values()) {
        words.extend(a.get_short().map(|c| format!("-{c}")));
        words.extend(a.get_long().map(|l| format!("--{l}")));
    }
    words.join(" ")
}

/// Completion of tool names (where a script or tool is expected) and of a
/// tool's options (after its name, read from `rtrace TOOL -h`), added to
/// clap's completion of rtrace's own options and their values.
fn tool_completion(shell: Shell, value_options: &str) -> String {
    match shell {
        Shell::Bash => format!(
            r#"
# The tool named so far on the line (the first word that is neither an
# option nor an option's value), if any.
_rtrace_tool_named() {{
    local i w skip=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${{COMP_WORDS[i]}}"
        if [[ -n "$skip" ]]; then skip=""; continue; fi
        case " {value_options} " in *" $w "*) skip=1; continue ;; esac
        [[ "$w" == -* ]] && continue
        rtrace --list-tools 2>/dev/null | awk '{{print $1}}' | grep -qx -- "$w" && echo "$w"
        return
    done
}}
_rtrace_with_tools() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" tool
    tool="$(_rtrace_tool_named)"
    if [[ -n "$tool" ]]; then
        COMPREPLY=( $(compgen -W "$(rtrace "$tool" -h 2>/dev/null | sed -n '/^options:/,/^$/p' | grep -oE '(^ +|, )--?[A-Za-z0-9][-_A-Za-z0-9]*' | sed 's/^ *//; s/^, //')" -- "$cur") )
        return 0
    fi
    _rtrace "$@"
    case " {value_options} " in *" $prev "*) return 0 ;; esac
    if [[ "$cur" != -* ]]; then
        COMPREPLY+=( $(compgen -W "$(rtrace --list-tools 2>/dev/null | awk '{{print $1}}')" -- "$cur") )
    fi
    return 0
}}
complete -F _rtrace_with_tools -o bashdefault -o default rtrace
"#
        ),
        Shell::Fish => format!(
            r#"
# Tools where a script or tool is expected, and a tool's own options after its name.
function __rtrace_tool_named
    set -l words (commandline -opc)
    set -l skip 0
    for w in $words[2..-1]
        if test $skip = 1; set skip 0; continue; end
        if contains -- $w {value_options}; set skip 1; continue; end
        if string match -q -- '-*' $w; continue; end
        if rtrace --list-tools 2>/dev/null | string replace -r ' .*' '' | string match -q -x -- $w
            echo $w
        end
        return
    end
end
function __rtrace_tool_options
    rtrace (__rtrace_tool_named) -h 2>/dev/null | sed -n '/^options:/,/^$/p' | string match -r -a -- '(?:^ +|, )(--?[A-Za-z0-9][-_A-Za-z0-9]*)' | string match -r -- '^--?[A-Za-z0-9].*'
end
function __rtrace_in_tool
    set -l tool (__rtrace_tool_named)
    test -n "$tool"
end
complete -c rtrace -n 'not __rtrace_in_tool' -a '(rtrace --list-tools 2>/dev/null | string replace -r "  +" \t)'
complete -c rtrace -n '__rtrace_in_tool' -f -a '(__rtrace_tool_options)'
"#
        ),
        _ => String::new(),
    }
}
