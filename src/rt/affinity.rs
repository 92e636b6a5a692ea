//! CPU affinity and the set of CPUs a measurement may use.

use crate::error::{Error, Result};

/// Pin thread `tid` (0 = calling thread) to exactly the given CPUs.
pub fn set_affinity(tid: libc::pid_t, cpus: &[usize]) -> Result<()> {
    if cpus.is_empty() {
        return Err(Error::usage("an affinity needs at least one CPU"));
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET bounds are checked below.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c >= libc::CPU_SETSIZE as usize {
            return Err(Error::usage(format!("CPU {c} is beyond CPU_SETSIZE")));
        }
        // SAFETY: c < CPU_SETSIZE was checked just above, so the bit is inside `set`.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: set is initialised and its size is passed.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        let err = std::io::Error::last_os_error();
        Err(match err.raw_os_error() {
            Some(libc::EINVAL) => Error::cannot_measure(format!(
                "cannot pin to CPU(s) {cpus:?}: not online or not allowed by this process's cpuset \
                 (allowed: {:?}); a SCHED_DEADLINE thread also may not be pinned to fewer CPUs than its root domain",
                allowed_cpus().unwrap_or_default()
            )),
            _ => Error::io(format!("sched_setaffinity to {cpus:?}"), err),
        })
    }
}

/// CPUs the calling thread may run on (its cpuset and affinity mask).
pub fn allowed_cpus() -> Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data, for which all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is writable and its size is passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(Error::io(
            "sched_getaffinity",
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: every c is below CPU_SETSIZE, so CPU_ISSET reads inside the initialised set.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// The kernel's largest CPU count (NR_CPUS at most 8192): a CPU number at or above it names no
/// CPU on any machine, and refusing it before expanding a range keeps `0-4294967295` from
/// allocating gigabytes.
pub const MAX_CPUS: usize = 8192;

/// Why a CPU list was refused: its form, or a CPU at or above the bound (kept as typed, so
/// that a number too large for any integer type is named as the user wrote it).
enum CpuListError {
    Form,
    Beyond(String),
}

/// The kernel's CPU list format (`0-3,8,10-11`) with every CPU below `limit`. Each bound is
/// checked before a range is expanded, so the list never holds more than `limit` CPUs.
fn parse_cpus_below(s: &str, limit: usize) -> std::result::Result<Vec<usize>, CpuListError> {
    let cpu = |t: &str| -> std::result::Result<usize, CpuListError> {
        let t = t.trim();
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(CpuListError::Form);
        }
        match t.parse::<usize>() {
            Ok(c) if c < limit => Ok(c),
            _ => {
                let digits = t.trim_start_matches('0');
                Err(CpuListError::Beyond(
                    if digits.is_empty() { "0" } else { digits }.to_string(),
                ))
            }
        }
    };
    let mut out = Vec::new();
    if s.trim().is_empty() {
        return Ok(out);
    }
    // `0,,1` is a slip (a CPU left out), not a shorter list.
    for part in s.trim().split(',').map(str::trim) {
        if part.is_empty() {
            return Err(CpuListError::Form);
        }
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (cpu(a)?, cpu(b)?);
                if a > b {
                    return Err(CpuListError::Form);
                }
                out.extend(a..=b);
            }
            None => out.push(cpu(part)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Parse the kernel's CPU list format (`0-3,8,10-11`), as in /sys/devices/system/cpu/online.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>> {
    parse_cpus_below(s, MAX_CPUS).map_err(|e| match e {
        CpuListError::Form => Error::usage(format!("bad CPU list '{s}': expected e.g. 0-3,8")),
        CpuListError::Beyond(c) => Error::usage(format!(
            "CPU {c} in '{s}' is not available (no machine has more than {MAX_CPUS} CPUs)"
        )),
    })
}

/// Resolve a user's `--cpus` selection against the CPUs this process may use (its affinity
/// mask, within the online CPUs); None = all. A CPU outside them is named with the ones
/// that are allowed, before any range is expanded past them.
pub fn select_cpus(spec: Option<&str>) -> Result<Vec<usize>> {
    let allowed = allowed_cpus()?;
    let Some(spec) = spec else { return Ok(allowed) };
    let not_available = |c: &dyn std::fmt::Display| {
        Error::usage(format!(
            "CPU {c} is not available to this process (allowed: {})",
            format_cpu_list(&allowed)
        ))
    };
    let limit = allowed.last().map_or(0, |&c| c + 1);
    let wanted = parse_cpus_below(spec, limit).map_err(|e| match e {
        CpuListError::Form => Error::usage(format!("bad CPU list '{spec}': expected e.g. 0-3,8")),
        CpuListError::Beyond(c) => not_available(&c),
    })?;
    if wanted.is_empty() {
        return Err(Error::usage(format!("--cpus '{spec}' selects no CPU")));
    }
    if let Some(c) = wanted.iter().find(|c| !allowed.contains(c)) {
        return Err(not_available(c));
    }
    Ok(wanted)
}

/// Inverse of `parse_cpu_list`.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        let v = parse_cpu_list("0-3,8,10-11\n").unwrap();
        assert_eq!(v, vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(format_cpu_list(&v), "0-3,8,10-11");
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("0,,1").is_err());
        assert_eq!(parse_cpu_list("\n").unwrap(), Vec::<usize>::new());
        // Bounded before expanding: these once panicked (capacity overflow) or took 34 GB.
        for big in ["0-18446744073709551615", "0-4294967295", "8192"] {
            assert_eq!(parse_cpu_list(big).unwrap_err().exit_code(), 2, "{big}");
        }
    }

    #[test]
    fn pinning_to_an_allowed_cpu_works() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        let first = cpus[0];
        std::thread::spawn(move || set_affinity(0, &[first]).unwrap())
            .join()
            .unwrap();
        assert!(select_cpus(Some("4095")).is_err());
    }

    #[test]
    fn a_cpu_beyond_the_allowed_ones_is_named_with_them() {
        let allowed = format_cpu_list(&allowed_cpus().unwrap());
        for (spec, cpu) in [
            ("0-18446744073709551615", "18446744073709551615"),
            ("0-18446744073709551616", "18446744073709551616"),
            ("0-4294967295", "4294967295"),
            ("8192", "8192"),
        ] {
            let e = select_cpus(Some(spec)).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            let want = format!("CPU {cpu} is not available to this process (allowed: {allowed})");
            assert_eq!(e.to_string(), want);
        }
        for bad in ["x", "1-", "-1", "1-0", "0x1"] {
            let e = select_cpus(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("bad CPU list"), "{bad}: {e}");
        }
    }
}
