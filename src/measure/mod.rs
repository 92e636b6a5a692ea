//! The analyses (docs/ARCHITECTURE.md §2 `measure/`): statistics shared by every measurement and the
//! measurement-specific analyses built on them.

pub mod audit;
pub mod event;
pub mod latency;
pub mod latencytest;
pub mod loadtest;
pub mod plugin_bench;
pub mod predict;
pub mod reservation;
pub mod rtl;
pub mod run;
pub mod sched;
pub mod sched_observe;
pub mod session;
pub mod watch;
