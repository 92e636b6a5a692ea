//! JACK names checked before libjack sees them. libjack copies a server name into
//! fixed-size buffers on its stack and builds socket and shared-memory paths from it: a name
//! past its limit smashed the stack (rc 134) in a process that usually runs as root. Flags
//! and `$JACK_DEFAULT_SERVER` (which libjack reads by itself) go through the same checks.

use crate::error::{Error, Result};

/// jack2's JACK_SERVER_NAME_SIZE (common/JackConstants.h) counts the terminating NUL.
pub const SERVER_NAME_SIZE: usize = 256;
/// jack2's JACK_CLIENT_NAME_SIZE, likewise with the NUL.
pub const CLIENT_NAME_SIZE: usize = 64;
/// The longest suffix xrunlab adds to its own client name for a helper client ("-probe").
pub const CLIENT_SUFFIX_MAX: usize = 6;

/// A server name: 1 to 255 bytes, no '/' (libjack puts it in paths) and no NUL.
pub fn check_server(name: &str, from: &str) -> Result<()> {
    check(
        name,
        from,
        "server",
        SERVER_NAME_SIZE - 1,
        "JACK_SERVER_NAME_SIZE",
    )?;
    if name.contains('/') {
        return Err(Error::usage(format!(
            "{from}: a JACK server name cannot contain '/' (libjack builds file paths from it)"
        )));
    }
    Ok(())
}

/// A client name the user gives: short enough that libjack's limit still holds with the
/// suffix of xrunlab's helper clients.
pub fn check_client(name: &str, from: &str) -> Result<()> {
    check(
        name,
        from,
        "client",
        CLIENT_NAME_SIZE - 1 - CLIENT_SUFFIX_MAX,
        "JACK_CLIENT_NAME_SIZE, less the suffix of xrunlab's helper clients",
    )
}

/// The name of a client about to be opened, suffix included.
pub fn check_opened_client(name: &str) -> Result<()> {
    check(
        name,
        "client name",
        "client",
        CLIENT_NAME_SIZE - 1,
        "JACK_CLIENT_NAME_SIZE",
    )
}

/// `$JACK_DEFAULT_SERVER`, when set: libjack reads it by itself, so it is checked as a flag.
pub fn check_environment() -> Result<()> {
    match std::env::var_os("JACK_DEFAULT_SERVER") {
        None => Ok(()),
        Some(v) => match v.to_str() {
            Some(s) => check_server(s, "$JACK_DEFAULT_SERVER"),
            None => Err(Error::usage(
                "$JACK_DEFAULT_SERVER: the JACK server name is not valid UTF-8",
            )),
        },
    }
}

fn check(name: &str, from: &str, what: &str, max: usize, limit: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::usage(format!(
            "{from}: the JACK {what} name is empty"
        )));
    }
    if name.contains('\0') {
        return Err(Error::usage(format!(
            "{from}: the JACK {what} name contains a NUL byte"
        )));
    }
    if name.len() > max {
        return Err(Error::usage(format!(
            "{from}: the JACK {what} name is {} bytes long; libjack takes at most {max} ({limit})",
            name.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_at_and_past_the_limits() {
        assert!(check_server(&"n".repeat(255), "--server").is_ok());
        let e = check_server(&"n".repeat(300), "--server").unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE);
        assert!(e.to_string().contains("300 bytes long"), "{e}");
        assert!(e.to_string().contains("at most 255"), "{e}");
        assert!(check_server("a/b", "--server").is_err());
        assert!(check_server("", "--server").is_err());
        assert!(check_client(&"c".repeat(57), "--client-name").is_ok());
        let e = check_client(&"c".repeat(58), "--client-name").unwrap_err();
        assert!(e.to_string().contains("at most 57"), "{e}");
    }
}
