//! Flush-to-zero for the duration of a `process` call.
//!
//! A reverb tail decays exponentially: left alone, every recursive filter state ends up in
//! the subnormal range, where x86 cores take a microcode assist of ~100 cycles per operation
//! and a plugin that costs 30 ns/frame suddenly costs microseconds (an xrun made by the
//! plugin, not by the system we measure). The classic DC-offset trick (adding ~1e-20) does
//! not cover this filterbank: every band above the lowest one is a highpass, which removes
//! the offset again, and its states still decay into subnormals. Setting FTZ (results
//! flushed) and DAZ (inputs treated as zero) covers every operation, costs two instructions
//! per block, and is restored on exit so the host thread's floating-point environment is
//! left as found.

/// Sets flush-to-zero (and denormals-are-zero where the hardware has it) while alive.
pub struct FlushToZero {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    saved: u64,
}

impl FlushToZero {
    #[cfg(target_arch = "x86_64")]
    #[inline]
    pub fn new() -> Self {
        // MXCSR bit 15 = FTZ, bit 6 = DAZ.
        const FTZ_DAZ: u32 = (1 << 15) | (1 << 6);
        let mut csr: u32 = 0;
        // SAFETY: stmxcsr/ldmxcsr only read/write the 4-byte locations given; SSE is part of
        // the x86_64 baseline. Only the flush bits are changed.
        unsafe {
            core::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack, preserves_flags));
            let new = csr | FTZ_DAZ;
            core::arch::asm!("ldmxcsr [{}]", in(reg) &new, options(nostack, readonly, preserves_flags));
        }
        FlushToZero { saved: csr as u64 }
    }

    #[cfg(target_arch = "aarch64")]
    #[inline]
    pub fn new() -> Self {
        // FPCR bit 24 = FZ (flushes both inputs and results on AArch64).
        let fpcr: u64;
        // SAFETY: reading/writing FPCR is allowed at EL0; only the FZ bit is changed.
        unsafe {
            core::arch::asm!("mrs {}, fpcr", out(reg) fpcr, options(nomem, nostack, preserves_flags));
            core::arch::asm!("msr fpcr, {}", in(reg) fpcr | (1 << 24), options(nomem, nostack, preserves_flags));
        }
        FlushToZero { saved: fpcr }
    }

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    #[inline]
    pub fn new() -> Self {
        FlushToZero {}
    }
}

impl Default for FlushToZero {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for FlushToZero {
    #[inline]
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        {
            let csr = self.saved as u32;
            // SAFETY: restores the value read in `new`.
            unsafe {
                core::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack, readonly, preserves_flags));
            }
        }
        #[cfg(target_arch = "aarch64")]
        // SAFETY: restores the value read in `new`.
        unsafe {
            core::arch::asm!("msr fpcr, {}", in(reg) self.saved, options(nomem, nostack, preserves_flags));
        }
    }
}

// Where FlushToZero sets the FPU's flush mode (x86_64, aarch64): elsewhere it does nothing.
#[cfg(all(test, any(target_arch = "x86_64", target_arch = "aarch64")))]
mod tests {
    use super::*;

    #[test]
    fn subnormals_flush_inside_and_not_after() {
        let tiny = std::hint::black_box(f32::MIN_POSITIVE);
        {
            let _g = FlushToZero::new();
            let r = std::hint::black_box(tiny) * std::hint::black_box(0.25f32);
            assert_eq!(r, 0.0, "subnormal result not flushed");
        }
        let r = std::hint::black_box(tiny) * std::hint::black_box(0.25f32);
        assert!(r > 0.0 && r < f32::MIN_POSITIVE, "environment not restored");
    }
}
