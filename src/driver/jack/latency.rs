//! Port latencies: what the graph declares for a port, and our answer to the server's
//! latency questions for our own ports.

use crate::error::{Error, Result};

/// The latency range `(min, max)` in frames that the JACK graph assigns to the port called
/// `port` (full name, e.g. `system:capture_1` or `xrunlab:out_1`), as
/// jack_port_get_latency_range reports it:
/// - `LatencyType::Capture`: how long ago the audio now at this port entered the system
///   (for `system:capture_N`, the driver's input latency);
/// - `LatencyType::Playback`: how long until audio written to this port now leaves the
///   system (for `system:playback_N`, the driver's output latency).
///
/// The values are only as complete as the graph: the server recomputes them when ports are
/// connected, so ask after connecting. An unknown port is a usage error naming it.
pub fn port_latency_range(
    client: &jack::Client,
    port: &str,
    mode: jack::LatencyType,
) -> Result<(u32, u32)> {
    let p = client
        .port_by_name(port)
        .ok_or_else(|| Error::usage(format!("no JACK port named `{port}`")))?;
    Ok(p.get_latency_range(mode))
}

/// Frames the engine adds between its input and output ports: every plugin processes the
/// period it is given within the same cycle (no look-ahead, no internal buffering), so what
/// leaves in cycle k arrived in cycle k.
pub const ENGINE_LATENCY_FRAMES: u32 = 0;

/// Combine the ranges of the connected ports on one side of the engine and add `own` frames:
/// the earliest and the latest any of them can be, shifted by what the processing adds
/// (JACK's rule for a client's latency callback). Every input reaches every output (the
/// chain mixes channels), so all ports of a side count.
pub(super) fn through_latency(
    ranges: impl IntoIterator<Item = (u32, u32)>,
    own: u32,
) -> (u32, u32) {
    let (mut lo, mut hi, mut any) = (u32::MAX, 0u32, false);
    for (a, b) in ranges {
        lo = lo.min(a);
        hi = hi.max(b);
        any = true;
    }
    if !any {
        (lo, hi) = (0, 0);
    }
    (lo.saturating_add(own), hi.saturating_add(own))
}

/// Our ports, for JACK's latency callback. It is heap-allocated and handed to libjack as the
/// callback argument, so it must outlive the client: it is freed only after the client is
/// closed, and leaked with it when the client is abandoned.
pub(super) struct LatencyPorts {
    pub(super) ins: Vec<*mut jack::jack_sys::jack_port_t>,
    pub(super) outs: Vec<*mut jack::jack_sys::jack_port_t>,
    pub(super) own: u32,
}

/// jack_set_latency_callback's callback, on the client's notification thread (not the
/// process thread). Capture mode: our outputs carry what entered through our inputs, plus our
/// processing. Playback mode: what enters our inputs leaves through our outputs, plus our
/// processing.
// SAFETY: libjack calls it only with the `arg` registered beside it, a live `LatencyPorts`
// (see the notes inside for each raw call).
pub(super) unsafe extern "C" fn on_latency(
    mode: jack::jack_sys::jack_latency_callback_mode_t,
    arg: *mut libc::c_void,
) {
    // SAFETY: arg is the LatencyPorts registered with this callback, alive until the client
    // is closed (see `LatencyPorts`); the port pointers belong to that client.
    let lp = unsafe { &*(arg as *const LatencyPorts) };
    let get = |p: *mut jack::jack_sys::jack_port_t| {
        let mut r = jack::jack_sys::jack_latency_range_t { min: 0, max: 0 };
        // SAFETY: a registered port of the live client; r is a valid out-pointer.
        unsafe { jack::jack_sys::jack_port_get_latency_range(p, mode, &mut r) };
        (r.min, r.max)
    };
    let (from, to) = if mode == jack::jack_sys::JackCaptureLatency {
        (&lp.ins, &lp.outs)
    } else {
        (&lp.outs, &lp.ins)
    };
    // An unconnected port has no latency to pass on; its (0, 0) would only widen the range.
    // SAFETY: as above.
    let connected = |p: &&*mut jack::jack_sys::jack_port_t| unsafe {
        jack::jack_sys::jack_port_connected(**p) > 0
    };
    let (min, max) = through_latency(from.iter().filter(connected).map(|&p| get(p)), lp.own);
    for &p in to {
        let mut r = jack::jack_sys::jack_latency_range_t { min, max };
        // SAFETY: as above.
        unsafe { jack::jack_sys::jack_port_set_latency_range(p, mode, &mut r) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_through_the_engine_spans_its_connected_ports() {
        assert_eq!(through_latency([], 0), (0, 0));
        assert_eq!(through_latency([], 64), (64, 64));
        assert_eq!(through_latency([(256, 256), (128, 512)], 0), (128, 512));
        assert_eq!(through_latency([(256, 256)], 32), (288, 288));
    }
}
