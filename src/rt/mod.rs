//! The real-time toolbox (docs/ARCHITECTURE.md §2): policies, affinity, memory locking, the
//! `/dev/cpu_dma_latency` guard, RT thread spawning, clocks, stop requests and the line a
//! crashing plugin leaves.

pub mod affinity;
pub mod clock;
pub mod crash;
pub mod dma_latency;
pub mod interrupt;
pub mod memory;
pub mod policy;
pub mod thread;

pub use policy::Policy;
