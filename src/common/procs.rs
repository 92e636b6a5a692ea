//! The processes /proc lists, as the containment of plugin children and the stressors'
//! sessions find what they started: by process group, session, parent, or a mark in the
//! environment. One reader, so both parse `/proc/PID/stat` the same way.

/// What `/proc/PID/stat` says of a process's place in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    pub pid: i32,
    /// `Z` for a zombie (its environment reads empty).
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
}

/// `/proc/PID/stat`'s first fields. The command name may hold spaces and parentheses, so
/// the fields are counted from its last `)`.
pub fn parse_stat(pid: i32, stat: &str) -> Option<Proc> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let mut num = || f.next()?.parse::<i32>().ok();
    Some(Proc {
        pid,
        state,
        ppid: num()?,
        pgrp: num()?,
        session: num()?,
    })
}

/// Every process /proc shows now (one that ends while read is left out).
pub fn all() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            parse_stat(
                pid,
                &std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?,
            )
        })
        .collect()
}

/// The live processes whose environment holds `entry` (`NAME=VALUE`, whole), found by
/// reading each one's environment as /proc lists it and its place in the tree right after:
/// a process that ends in between (its environment then reads empty) is not found, so the
/// gap is kept short. A process created during the listing may be missed: callers that must
/// not miss one scan again until a scan finds none twice.
pub fn marked(entry: &[u8]) -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| environ_has(pid, entry))
        .filter_map(|pid| {
            parse_stat(
                pid,
                &std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?,
            )
        })
        .collect()
}

/// Whether process `pid`'s environment holds the entry `entry` (`NAME=VALUE`, whole).
/// Reading another user's environment needs root; a zombie's reads empty.
pub fn environ_has(pid: i32, entry: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_parentheses_and_spaces_does_not_shift_the_fields() {
        let p = parse_stat(42, "42 (a) b (c) Z 7 42 9 0 -1 4194560").unwrap();
        assert_eq!(
            p,
            Proc {
                pid: 42,
                state: 'Z',
                ppid: 7,
                pgrp: 42,
                session: 9
            }
        );
        assert_eq!(parse_stat(1, "1 (init"), None);
    }

    #[test]
    fn this_process_is_listed_with_its_parent() {
        let me = std::process::id() as i32;
        let p = all()
            .into_iter()
            .find(|p| p.pid == me)
            .expect("we are in /proc");
        assert_eq!(p.ppid, nix::unistd::getppid().as_raw());
        assert_eq!(p.pgrp, nix::unistd::getpgrp().as_raw());
    }
}
