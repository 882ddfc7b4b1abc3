//! Where the script comes from: a file, `-` (stdin) or `-e`; a `#!` first
//! line (`#!/usr/bin/env rtrace`) is dropped, keeping line numbers.

use std::io::Read;

use anyhow::{anyhow, Result};

/// (name used in error lines, source text) of the script at `path`; `-` reads stdin.
pub fn read(path: &str) -> Result<(String, String)> {
    if path == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| anyhow!("cannot read the script from stdin: {e}"))?;
        return Ok(("stdin".to_string(), without_shebang(text)));
    }
    let text = std::fs::read_to_string(path).map_err(|e| anyhow!("cannot read {path}: {e}"))?;
    Ok((path.to_string(), without_shebang(text)))
}

/// The source with a `#!...` first line emptied (the line stays, so later
/// lines keep their numbers).
pub fn without_shebang(text: String) -> String {
    if !text.starts_with("#!") {
        return text;
    }
    match text.find('\n') {
        Some(end) => text[end..].to_string(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_line_is_dropped_and_lines_keep_numbers() {
        assert_eq!(without_shebang("#!/usr/bin/env rtrace\nprint(1);\n".into()), "\nprint(1);\n");
        assert_eq!(without_shebang("#!/usr/bin/env rtrace".into()), "");
        assert_eq!(without_shebang("print(1);\n".into()), "print(1);\n");
        assert_eq!(without_shebang(" #!x\n".into()), " #!x\n");
    }
}
