//! The cycle record and its accounting moved to [`crate::common::cycle`] (shared by every
//! layer, docs/ARCHITECTURE.md §2); this path stays for callers not yet moved.
pub use crate::common::cycle::*;
