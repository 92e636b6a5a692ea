//! Scheduling policies through the raw `sched_setattr` system call.
//!
//! The raw call is used for every policy (not only DEADLINE) so that one code path sets and
//! explains them all; libc wrappers and helper crates either lack SCHED_DEADLINE or get its
//! struct layout and flags wrong.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

const SCHED_OTHER: u32 = 0;
const SCHED_FIFO: u32 = 1;
const SCHED_RR: u32 = 2;
const SCHED_DEADLINE: u32 = 6;
/// Reclaim unused bandwidth (GRUB), the mainline counterpart of Cucinotta et al.'s SHRUB.
const SCHED_FLAG_RECLAIM: u64 = 0x02;

/// `struct sched_attr` as of Linux 4.13 (SCHED_ATTR_SIZE_VER0, 48 bytes); the utilisation
/// clamp fields of VER1 are not needed and the kernel accepts the shorter size.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

/// A scheduling policy with its parameters. Durations are nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "policy", rename_all = "lowercase")]
pub enum Policy {
    Other {
        nice: i32,
    },
    Fifo {
        priority: u32,
    },
    Rr {
        priority: u32,
    },
    Deadline {
        runtime_ns: u64,
        deadline_ns: u64,
        period_ns: u64,
        reclaim: bool,
    },
}

impl Policy {
    pub fn fifo(priority: u32) -> Self {
        Policy::Fifo { priority }
    }

    /// True for the policies that preempt SCHED_OTHER (and need RT privileges).
    pub fn is_realtime(&self) -> bool {
        !matches!(self, Policy::Other { .. })
    }

    /// Check the values before any system call, so bad input is a usage error (exit 2)
    /// rather than an EINVAL from the kernel.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Policy::Other { nice } if !(-20..=19).contains(&nice) => Err(Error::usage(format!(
                "nice value {nice} is outside -20..19"
            ))),
            Policy::Fifo { priority } | Policy::Rr { priority }
                if !(1..=99).contains(&priority) =>
            {
                Err(Error::usage(format!(
                    "real-time priority {priority} is outside 1..99"
                )))
            }
            Policy::Deadline {
                runtime_ns,
                deadline_ns,
                period_ns,
                ..
            } => {
                if period_ns == 0 {
                    return Err(Error::usage("SCHED_DEADLINE period must not be zero"));
                }
                if runtime_ns == 0 {
                    return Err(Error::usage("SCHED_DEADLINE runtime must not be zero"));
                }
                // The kernel refuses runtimes below 1 µs (its resolution) with EINVAL.
                if runtime_ns < 1024 {
                    return Err(Error::usage(format!(
                        "SCHED_DEADLINE runtime {runtime_ns} ns is below the kernel's minimum of 1024 ns"
                    )));
                }
                if !(runtime_ns <= deadline_ns && deadline_ns <= period_ns) {
                    return Err(Error::usage(format!(
                        "SCHED_DEADLINE needs runtime <= deadline <= period, got runtime {} µs, deadline {} µs, period {} µs",
                        runtime_ns / 1000,
                        deadline_ns / 1000,
                        period_ns / 1000
                    )));
                }
                check_deadline_period(period_ns, deadline_period_limits_us())
            }
            _ => Ok(()),
        }
    }

    fn attr(&self) -> SchedAttr {
        let mut a = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            ..Default::default()
        };
        match *self {
            Policy::Other { nice } => {
                a.sched_policy = SCHED_OTHER;
                a.sched_nice = nice;
            }
            Policy::Fifo { priority } => {
                a.sched_policy = SCHED_FIFO;
                a.sched_priority = priority;
            }
            Policy::Rr { priority } => {
                a.sched_policy = SCHED_RR;
                a.sched_priority = priority;
            }
            Policy::Deadline {
                runtime_ns,
                deadline_ns,
                period_ns,
                reclaim,
            } => {
                a.sched_policy = SCHED_DEADLINE;
                a.sched_runtime = runtime_ns;
                a.sched_deadline = deadline_ns;
                a.sched_period = period_ns;
                if reclaim {
                    a.sched_flags |= SCHED_FLAG_RECLAIM;
                }
            }
        }
        a
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Policy::Other { nice: 0 } => write!(f, "other"),
            Policy::Other { nice } => write!(f, "other:{nice}"),
            Policy::Fifo { priority } => write!(f, "fifo:{priority}"),
            Policy::Rr { priority } => write!(f, "rr:{priority}"),
            Policy::Deadline {
                runtime_ns,
                deadline_ns,
                period_ns,
                reclaim,
            } => {
                write!(f, "deadline:{}us/{}us", runtime_ns / 1000, period_ns / 1000)?;
                if deadline_ns != period_ns {
                    write!(f, "/{}us", deadline_ns / 1000)?;
                }
                if reclaim {
                    write!(f, "+reclaim")?;
                }
                Ok(())
            }
        }
    }
}

/// The kernel's bounds on a SCHED_DEADLINE period.
const PERIOD_MIN_SYSCTL: &str = "/proc/sys/kernel/sched_deadline_period_min_us";
const PERIOD_MAX_SYSCTL: &str = "/proc/sys/kernel/sched_deadline_period_max_us";
/// Their defaults (kernel/sched/deadline.c), for a kernel that does not show them.
const PERIOD_MIN_DEFAULT_US: u64 = 100;
const PERIOD_MAX_DEFAULT_US: u64 = 1 << 22;

/// (min, max) µs a SCHED_DEADLINE period may have on this kernel.
fn deadline_period_limits_us() -> (u64, u64) {
    let read = |path: &str, default: u64| {
        crate::common::input::read_capped(
            std::path::Path::new(path),
            crate::common::input::SYSTEM_FILE_MAX_BYTES,
            "sysctl",
        )
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
    };
    (
        read(PERIOD_MIN_SYSCTL, PERIOD_MIN_DEFAULT_US),
        read(PERIOD_MAX_SYSCTL, PERIOD_MAX_DEFAULT_US),
    )
}

/// The kernel refuses (EINVAL, exit 3 after the measurement began) a period outside its
/// sysctl bounds; said up front, naming the bound.
fn check_deadline_period(period_ns: u64, (min_us, max_us): (u64, u64)) -> Result<()> {
    let (name, limit_us, sysctl) = if period_ns > max_us.saturating_mul(1000) {
        ("above the kernel's maximum", max_us, PERIOD_MAX_SYSCTL)
    } else if period_ns < min_us.saturating_mul(1000) {
        ("below the kernel's minimum", min_us, PERIOD_MIN_SYSCTL)
    } else {
        return Ok(());
    };
    Err(Error::usage(format!(
        "SCHED_DEADLINE period {} is {name} of {limit_us} µs ({sysctl})",
        crate::units::format_ns(period_ns)
    )))
}

/// Parses `other[:NICE]`, `fifo:PRIO`, `rr:PRIO`,
/// `deadline:RUNTIME/PERIOD[/DEADLINE][+reclaim]` with durations such as `500us` or `2ms`.
impl FromStr for Policy {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let prio = |a: Option<&str>, default: u32| -> Result<u32> {
            match a {
                None => Ok(default),
                Some(a) => a
                    .parse()
                    .map_err(|_| Error::usage(format!("bad priority '{a}' in policy '{s}'"))),
            }
        };
        let p = match name.to_ascii_lowercase().as_str() {
            "other" | "normal" | "cfs" => Policy::Other {
                nice: match arg {
                    None => 0,
                    Some(a) => a
                        .parse()
                        .map_err(|_| Error::usage(format!("bad nice value '{a}' in '{s}'")))?,
                },
            },
            "fifo" => Policy::Fifo {
                priority: prio(arg, 80)?,
            },
            "rr" => Policy::Rr {
                priority: prio(arg, 80)?,
            },
            "deadline" | "dl" => {
                let arg = arg.ok_or_else(|| {
                    Error::usage(format!(
                        "'{s}': deadline needs RUNTIME/PERIOD, e.g. deadline:500us/2666us"
                    ))
                })?;
                let (arg, reclaim) = match arg.strip_suffix("+reclaim") {
                    Some(a) => (a, true),
                    None => (arg, false),
                };
                let parts: Vec<&str> = arg.split('/').collect();
                if !(2..=3).contains(&parts.len()) {
                    return Err(Error::usage(format!(
                        "'{s}': deadline needs RUNTIME/PERIOD[/DEADLINE]"
                    )));
                }
                let runtime_ns = crate::units::parse_duration_ns(parts[0])?;
                let period_ns = crate::units::parse_duration_ns(parts[1])?;
                let deadline_ns = match parts.get(2) {
                    Some(d) => crate::units::parse_duration_ns(d)?,
                    None => period_ns,
                };
                Policy::Deadline {
                    runtime_ns,
                    deadline_ns,
                    period_ns,
                    reclaim,
                }
            }
            _ => {
                return Err(Error::usage(format!(
                    "unknown policy '{s}': use other[:NICE], fifo:PRIO, rr:PRIO or deadline:RUNTIME/PERIOD[/DEADLINE][+reclaim]"
                )))
            }
        };
        p.validate()?;
        Ok(p)
    }
}

/// Apply `policy` to thread `tid` (0 = the calling thread).
pub fn set_policy(tid: libc::pid_t, policy: &Policy) -> Result<()> {
    policy.validate()?;
    let mut attr = policy.attr();
    // SAFETY: attr is a properly sized, initialised sched_attr; flags argument must be 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid,
            &mut attr as *mut SchedAttr,
            0u32,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    Err(explain(policy, tid, err))
}

/// The policy of thread `tid` (0 = calling thread) as the kernel reports it.
pub fn get_policy(tid: libc::pid_t) -> Result<Policy> {
    let mut attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        ..Default::default()
    };
    // SAFETY: attr is writable and its size is passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut attr as *mut SchedAttr,
            std::mem::size_of::<SchedAttr>() as u32,
            0u32,
        )
    };
    if rc != 0 {
        return Err(Error::io(
            format!("sched_getattr({tid})"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(match attr.sched_policy {
        SCHED_FIFO => Policy::Fifo {
            priority: attr.sched_priority,
        },
        SCHED_RR => Policy::Rr {
            priority: attr.sched_priority,
        },
        SCHED_DEADLINE => Policy::Deadline {
            runtime_ns: attr.sched_runtime,
            deadline_ns: attr.sched_deadline,
            period_ns: attr.sched_period,
            reclaim: attr.sched_flags & SCHED_FLAG_RECLAIM != 0,
        },
        _ => Policy::Other {
            nice: attr.sched_nice,
        },
    })
}

/// True when thread `tid`'s affinity covers fewer CPUs than are online, i.e. narrower than the
/// default root domain (without exclusive cpusets the only one).
fn pinned_narrower(tid: libc::pid_t) -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid empty set, and the size passed is its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed, written by the kernel only.
    let rc =
        unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    // SAFETY: sysconf has no preconditions; CPU_COUNT reads the set the kernel filled.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    // SAFETY: CPU_COUNT only reads the initialised set.
    rc == 0 && online > 0 && (unsafe { libc::CPU_COUNT(&set) } as i64) < online as i64
}

/// A failed thread (or process) creation, explained when the caller is a SCHED_DEADLINE
/// thread: the kernel refuses fork/clone from one with EAGAIN unless SCHED_FLAG_RESET_ON_FORK
/// was set, because the child would inherit a reservation admission control never saw.
pub fn explain_spawn(what: &str, err: std::io::Error) -> Error {
    let dl = matches!(get_policy(0), Ok(Policy::Deadline { .. }));
    if dl && err.raw_os_error() == Some(libc::EAGAIN) {
        return Error::cannot_measure(format!(
            "cannot create {what}: the calling thread runs SCHED_DEADLINE and the kernel refuses \
             fork/clone from a DEADLINE thread (EAGAIN) — its child would inherit a reservation \
             admission control never admitted. Create threads and processes before switching to \
             DEADLINE, or from a non-DEADLINE thread"
        ));
    }
    Error::io(format!("creating {what}"), err)
}

/// Turn the kernel's terse errno into advice a user can act on.
fn explain(policy: &Policy, tid: libc::pid_t, err: std::io::Error) -> Error {
    let who = if tid == 0 {
        "this thread".to_string()
    } else {
        format!("thread {tid}")
    };
    let deadline = matches!(policy, Policy::Deadline { .. });
    // SAFETY: geteuid has no preconditions.
    let privileged = unsafe { libc::geteuid() } == 0;
    match err.raw_os_error() {
        // Root already: more privilege would not help, so this is not a privilege refusal.
        Some(libc::EPERM) if deadline && privileged && pinned_narrower(tid) => Error::cannot_measure(format!(
            "the kernel refused {policy} for {who} although xrunlab runs as root: a SCHED_DEADLINE \
             thread may not be pinned to fewer CPUs than its root domain (admission control is per \
             root domain). Unpin it (drop --cpus), or give it an exclusive cpuset partition holding \
             just those CPUs (cgroup v2: cpuset.cpus plus cpuset.cpus.partition=root) and run there"
        )),
        Some(libc::EPERM) if deadline => Error::no_privilege(format!(
            "not permitted to set {policy} on {who}: SCHED_DEADLINE needs root or CAP_SYS_NICE \
             (RLIMIT_RTPRIO is not enough), and a DEADLINE thread may not be pinned to fewer CPUs than \
             its root domain: unpin it, or give it an exclusive cpuset"
        )),
        Some(libc::EPERM) => Error::no_privilege(format!(
            "not permitted to set {policy} on {who}: raise RLIMIT_RTPRIO (ulimit -r) — usually by adding \
             the user to the 'audio' group with '@audio - rtprio 95' and '@audio - memlock unlimited' in \
             /etc/security/limits.d/audio.conf, then logging in again — or run as root / with CAP_SYS_NICE"
        )),
        Some(libc::EBUSY) if deadline => Error::cannot_measure(format!(
            "SCHED_DEADLINE admission control refused {policy} for {who}: the total DEADLINE bandwidth \
             would exceed the real-time limit (kernel.sched_rt_runtime_us / sched_rt_period_us, per root \
             domain). Lower the runtime, stop other DEADLINE tasks, or raise /proc/sys/kernel/sched_rt_runtime_us"
        )),
        Some(libc::EINVAL) if deadline => Error::cannot_measure(format!(
            "the kernel rejected {policy} for {who} ({err}): runtime <= deadline <= period must hold, with \
             runtime >= 1 µs and period <= 4 s (kernel.sched_deadline_period_max_us)"
        )),
        Some(libc::EINVAL) => {
            Error::cannot_measure(format!("the kernel rejected {policy} for {who}: {err}"))
        }
        Some(libc::ESRCH) => Error::cannot_measure(format!("{who} does not exist (it may have exited)")),
        _ => Error::cannot_measure(format!("setting {policy} on {who} failed: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sched_attr_has_the_kernel_ver0_size() {
        assert_eq!(std::mem::size_of::<SchedAttr>(), 48);
    }

    #[test]
    fn parses_and_prints_policies() {
        assert_eq!("fifo:90".parse::<Policy>().unwrap(), Policy::fifo(90));
        assert_eq!(
            "rr:5".parse::<Policy>().unwrap(),
            Policy::Rr { priority: 5 }
        );
        assert_eq!(
            "other".parse::<Policy>().unwrap(),
            Policy::Other { nice: 0 }
        );
        let dl: Policy = "deadline:500us/2666us+reclaim".parse().unwrap();
        assert_eq!(
            dl,
            Policy::Deadline {
                runtime_ns: 500_000,
                deadline_ns: 2_666_000,
                period_ns: 2_666_000,
                reclaim: true
            }
        );
        assert_eq!(dl.to_string(), "deadline:500us/2666us+reclaim");
        assert_eq!(dl.to_string().parse::<Policy>().unwrap(), dl);
    }

    #[test]
    fn rejects_bad_values_before_any_syscall() {
        for bad in [
            "fifo:0",
            "fifo:100",
            "rr:x",
            "deadline:3ms/2ms",
            "deadline:1ms/2ms/3ms",
            "deadline:1ms/0ms",
            "deadline:0us/2ms",
            "deadline:1ms",
            "other:40",
            "batch",
        ] {
            let e = bad.parse::<Policy>().unwrap_err();
            assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{bad}: {e}");
        }
    }

    #[test]
    fn deadline_periods_beyond_the_kernels_bounds_are_refused_naming_the_sysctl() {
        let bounds = (100, 4_194_304);
        let e = check_deadline_period(3_600_000_000_000, bounds).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE);
        assert!(
            e.to_string().contains("sched_deadline_period_max_us")
                && e.to_string().contains("4194304 µs"),
            "{e}"
        );
        let e = check_deadline_period(50_000, bounds).unwrap_err();
        assert!(
            e.to_string().contains("sched_deadline_period_min_us"),
            "{e}"
        );
        check_deadline_period(100_000, bounds).unwrap();
        check_deadline_period(4_194_304_000, bounds).unwrap();
        // The sysctl is an unsigned int of µs: no kernel takes two hours.
        let e = "deadline:1s/2h".parse::<Policy>().unwrap_err();
        assert!(
            e.to_string().contains("sched_deadline_period_max_us"),
            "{e}"
        );
    }

    #[test]
    fn eperm_and_ebusy_become_advice() {
        let e = explain(
            &Policy::fifo(80),
            0,
            std::io::Error::from_raw_os_error(libc::EPERM),
        );
        assert!(e.to_string().contains("RLIMIT_RTPRIO"), "{e}");
        assert_eq!(e.exit_code(), crate::error::EXIT_CANNOT_MEASURE);
        assert_eq!(e.kind(), crate::error::ErrorKind::NoPrivilege);
        let dl = Policy::Deadline {
            runtime_ns: 1_000_000,
            deadline_ns: 2_000_000,
            period_ns: 2_000_000,
            reclaim: false,
        };
        let e = explain(&dl, 0, std::io::Error::from_raw_os_error(libc::EBUSY));
        assert!(e.to_string().contains("sched_rt_runtime_us"), "{e}");
        // Admission control is about bandwidth, not privilege.
        assert_eq!(e.kind(), crate::error::ErrorKind::CannotMeasure);
    }

    #[test]
    fn other_policy_round_trips_through_the_kernel() {
        // Setting SCHED_OTHER nice 0 on ourselves needs no privilege.
        let t = std::thread::spawn(|| {
            set_policy(0, &Policy::Other { nice: 0 }).unwrap();
            get_policy(0).unwrap()
        });
        assert_eq!(t.join().unwrap(), Policy::Other { nice: 0 });
    }
}
