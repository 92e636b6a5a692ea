//! `xrunlab watch` (docs/methods.md "Watch"): every xrun of the user's own live audio
//! session, recorded while it runs, without adding work to its graph.
//!
//! One module per server adapter (`jack.rs`; `pipewire/`, its profiler; the servers' client
//! libraries are `driver::jack` and `driver::pipewire`). An adapter attaches, reports the
//! server's identity and hands over the xruns it saw since the last poll. `types.rs` holds
//! what the adapters and the loop share; `run.rs` owns the loop that is server-agnostic: the duration, Ctrl-C, a server
//! that goes away (the result ends `server-shutdown`, or with `follow` the gap is recorded
//! and the watch goes on once the server is back) and the DSP-load samples. The one-sentence
//! answer is the report's (`report::text::watch::answer`).
//!
//! The live counters are [`Live`], atomics only, so another thread (a metrics endpoint) can
//! snapshot them at any time without taking a lock the watcher's loop or libjack's
//! notification thread could hold.

pub mod clients;
pub mod cycles;
pub mod inside;
pub mod jack;
pub mod late_now;
pub mod names;
pub mod pipewire;
mod run;
pub mod runs;
pub mod sizes;
pub mod types;

pub use run::*;
pub use types::*;
