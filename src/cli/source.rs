//! A script file's `#!` first line (`#!/usr/bin/env rtrace`) is dropped,
//! keeping line numbers (the file is read by `safety::read_script`).

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
