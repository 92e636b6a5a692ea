//! The distribution summaries moved to [`crate::common::stats`] (the engine and the stressors
//! use them too, docs/ARCHITECTURE.md §2); this path stays for callers not yet moved.
pub use crate::common::stats::*;
