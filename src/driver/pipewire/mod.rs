//! PipeWire's client library as `watch` uses it, beside JACK's (`driver::jack`): libpipewire
//! loaded with dlopen and the few structs of its public ABI its profiler stream needs
//! ([`ffi`]), and the profiler's SPA POD read from its bytes ([`pod`]). What the watch makes
//! of them (the adapter, the per-node tracking) is `measure::watch::pipewire`.

pub mod ffi;
pub mod pod;
