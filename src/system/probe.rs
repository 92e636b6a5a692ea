//! Probes that act on the running system instead of reading files. They run only when the
//! [`Root`](super::Root) is the live system; fixture trees get their file-based equivalents.

use crate::rt::policy::{get_policy, set_policy, Policy};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The priority the RT probe asks for: what JACK and most DAWs use for their audio threads
/// (and rtcqs's test), so success means an audio server would get it too.
pub const PROBE_PRIORITY: u32 = 80;

/// Outcome of really trying to get SCHED_FIFO.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RtProbe {
    /// SCHED_FIFO at [`PROBE_PRIORITY`] was set and read back.
    pub obtained: bool,
    /// What happened, in one line (the kernel's refusal with advice when not obtained).
    pub detail: String,
}

impl RtProbe {
    /// The refusal in a few words, for tables and warnings (the full advice is in `detail`).
    pub fn reason(&self) -> String {
        let d = self.detail.as_str();
        if d.contains("not permitted") {
            "operation not permitted (EPERM)".into()
        } else if d.chars().count() > 80 {
            format!("{}…", d.chars().take(79).collect::<String>())
        } else {
            d.into()
        }
    }
}

/// Try SCHED_FIFO [`PROBE_PRIORITY`] on a short-lived thread, read it back, and put the
/// thread back to SCHED_OTHER. A separate thread keeps the caller's own policy untouched
/// whatever happens.
pub fn try_rt_priority() -> RtProbe {
    let policy = Policy::fifo(PROBE_PRIORITY);
    let t = std::thread::Builder::new()
        .name("xr-rtprobe".into())
        .spawn(move || {
            let outcome = match set_policy(0, &policy) {
                Err(e) => RtProbe {
                    obtained: false,
                    detail: e.to_string(),
                },
                Ok(()) => match get_policy(0) {
                    Ok(p) if p == policy => RtProbe {
                        obtained: true,
                        detail: format!("SCHED_FIFO {PROBE_PRIORITY} set, read back and released"),
                    },
                    Ok(p) => RtProbe {
                        obtained: false,
                        detail: format!("asked for {policy}, the kernel reports {p}"),
                    },
                    Err(e) => RtProbe {
                        obtained: false,
                        detail: e.to_string(),
                    },
                },
            };
            // The thread ends right after, but restoring keeps the probe honest if it
            // ever runs on a long-lived thread.
            let _ = set_policy(0, &Policy::Other { nice: 0 });
            outcome
        });
    match t.map(|h| h.join()) {
        Ok(Ok(p)) => p,
        _ => RtProbe {
            obtained: false,
            detail: "the probe thread could not run".into(),
        },
    }
}

/// Can this process open `/dev/cpu_dma_latency` for writing? Opening without writing adds a
/// request with the "no constraint" value and closing removes it, so the probe changes
/// nothing on the system.
pub fn dma_latency_writable(path: &std::path::Path) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// The hypervisor's CPUID signature (leaf 0x4000_0000), e.g. `KVMKVMKVM`, `VMwareVMware`,
/// `Microsoft Hv`. Only meaningful when the CPU's `hypervisor` bit is set, which the caller
/// checks; x86 only.
#[cfg(target_arch = "x86_64")]
pub fn cpuid_hypervisor_signature() -> Option<String> {
    // Leaf 0x4000_0000 is reserved for hypervisors; on bare metal it returns zeros or the
    // highest basic leaf's data, which the printable-ASCII test below rejects.
    let r = std::arch::x86_64::__cpuid(0x4000_0000);
    let bytes: Vec<u8> = [r.ebx, r.ecx, r.edx]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let s: String = bytes
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as char)
        .collect();
    let s = s.trim().to_string();
    (!s.is_empty() && s.chars().all(|c| c.is_ascii_graphic() || c == ' ')).then_some(s)
}

#[cfg(not(target_arch = "x86_64"))]
pub fn cpuid_hypervisor_signature() -> Option<String> {
    None
}

/// Map a CPUID hypervisor signature to the name the rest of the environment uses.
pub fn hypervisor_from_signature(sig: &str) -> String {
    match sig {
        "KVMKVMKVM" => "kvm",
        "Microsoft Hv" => "hyper-v",
        "VMwareVMware" => "vmware",
        "XenVMMXenVMM" => "xen",
        "VBoxVBoxVBox" => "virtualbox",
        "TCGTCGTCGTCG" => "qemu-tcg",
        "ACRNACRNACRN" => "acrn",
        " lrpepyh  vr" | "prl hyperv" => "parallels",
        "bhyve bhyve" => "bhyve",
        "QNXQVMBSQG" => "qnx",
        _ => return sig.to_lowercase(),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dma_probe_reports_missing_device() {
        let d = tempfile::tempdir().unwrap();
        assert!(dma_latency_writable(&d.path().join("nope")).is_err());
        let f = d.path().join("dma");
        std::fs::write(&f, b"").unwrap();
        assert!(dma_latency_writable(&f).is_ok());
    }

    #[test]
    fn signatures_map_to_names() {
        assert_eq!(hypervisor_from_signature("KVMKVMKVM"), "kvm");
        assert_eq!(hypervisor_from_signature("Microsoft Hv"), "hyper-v");
        assert_eq!(hypervisor_from_signature("NewVisor"), "newvisor");
    }

    #[test]
    fn rt_probe_agrees_with_privilege() {
        let p = try_rt_priority();
        // SAFETY: no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            // Root can be refused only by an RT cgroup without runtime or a missing
            // capability, which the detail must then explain.
            if !p.obtained {
                assert!(!p.detail.is_empty());
            }
        } else if !p.obtained {
            assert!(p.detail.contains("RLIMIT_RTPRIO"), "{}", p.detail);
        }
        // Whatever happened, the calling thread's policy is untouched.
        assert!(!get_policy(0).unwrap().is_realtime());
    }
}
