//! Splitting a `--stress-cmd` string into argv the way a user expects from a shell's quoting,
//! without anything else a shell does: no variables, globs, pipes, redirections or `;`.
//! The command is then executed directly, so metacharacters reach it as literal text.

use crate::error::{Error, Result};

/// Split `s` into words. Whitespace separates words; `'…'` keeps everything literally;
/// `"…"` keeps everything except that `\"` and `\\` are unescaped; outside quotes `\x`
/// is a literal `x`. Adjacent quoted and unquoted parts join into one word (`a'b c'` is
/// one word), and `''` is an empty word.
pub fn split_argv(s: &str) -> Result<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    // A word exists once any part of it was seen, even an empty quoted part.
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err(unterminated(s, '\'')),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => cur.push(c),
                            Some(c) => {
                                cur.push('\\');
                                cur.push(c);
                            }
                            None => return Err(unterminated(s, '"')),
                        },
                        Some(c) => cur.push(c),
                        None => return Err(unterminated(s, '"')),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => cur.push(c),
                    None => {
                        return Err(Error::usage(format!(
                            "--stress-cmd '{s}' ends with a lone backslash"
                        )))
                    }
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    if words.is_empty() {
        return Err(Error::usage("--stress-cmd needs a command"));
    }
    Ok(words)
}

fn unterminated(s: &str, q: char) -> Error {
    Error::usage(format!("--stress-cmd '{s}': unterminated {q} quote"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn shell_metacharacters_stay_literal() {
        assert_eq!(
            split_argv("echo 'a;b' $HOME | x").unwrap(),
            v(&["echo", "a;b", "$HOME", "|", "x"])
        );
        assert_eq!(
            split_argv("rm -rf * && reboot > /dev/null").unwrap(),
            v(&["rm", "-rf", "*", "&&", "reboot", ">", "/dev/null"])
        );
    }

    #[test]
    fn quoting_rules() {
        assert_eq!(
            split_argv(r#"  a "b c" 'd "e"' f\ g "h\"i" '' x'y z'w "\n" "#).unwrap(),
            v(&["a", "b c", "d \"e\"", "f g", "h\"i", "", "xy zw", "\\n"])
        );
        assert!(split_argv("a 'b").is_err());
        assert!(split_argv("a \"b").is_err());
        assert!(split_argv("a \\").is_err());
        assert!(split_argv("   ").is_err());
    }
}
