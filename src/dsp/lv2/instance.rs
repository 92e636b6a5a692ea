//! One LV2 plugin instance as an engine [`Plugin`].
//!
//! Bus mapping (the track's bus is stereo, plugins are not always):
//! - audio inputs: none — nothing is fed; one — the mid `(L+R)/2`; two or more — L and R
//!   into the first two, silence into the rest;
//! - audio outputs: none — the bus passes unchanged; one — copied to L and R; two or more —
//!   the first two become L and R, the rest are discarded;
//! - a plugin with no audio input (an instrument, a generator) *adds* its output to the bus,
//!   as the built-in `sine` does, so a chain keeps what came before it;
//! - control inputs hold their default (the plugin's default state if it has one, else the
//!   port's lv2:default), or the value given as `lv2:URI(symbol=value,…)`;
//! - atom sequence inputs receive a valid empty sequence each cycle (plus a MIDI note on or
//!   off when `note_on`/`note_off` asked for one), outputs get the whole buffer as capacity;
//!   CV ports get buffers of silence.
//!
//! Ports get buffers of their own (never the bus itself), so plugins that are
//! `inPlaceBroken` work. Everything is allocated and connected here; `process` copies,
//! runs, and delivers worker responses without allocating or locking.

use super::features::{self, FeatureBlock, SEQUENCE_BYTES};
use super::worker::{WorkerShared, WorkerThread};
use crate::dsp::format::{PluginDesc, PortKind};
use crate::dsp::{Plugin, PluginContext};
use crate::error::{Error, Result};
use crate::rt::crash::{self, Label, Phase};
use std::ffi::c_void;

/// A sequence buffer: u64 words so the atom header is 8-byte aligned, as LV2 requires.
type AtomBuf = Box<[u64]>;

const SEQUENCE_WORDS: usize = SEQUENCE_BYTES / 8;

pub struct Lv2Plugin {
    // Field order is drop order: the worker thread stops before the instance goes, and the
    // instance goes before the buffers and features it points into.
    worker_thread: Option<WorkerThread>,
    instance: lilv::instance::ActiveInstance,
    worker: Box<WorkerShared>,
    _features: Box<FeatureBlock>,
    audio_in: Vec<Box<[f32]>>,
    audio_out: Vec<Box<[f32]>>,
    _cv: Vec<Box<[f32]>>,
    controls: Box<[f32]>,
    atom_in: Vec<AtomBuf>,
    atom_out: Vec<AtomBuf>,
    latency_port: Option<usize>,
    /// 0: nothing, 1: note on, 2: note off — written into the first atom input next cycle.
    midi_pending: u8,
    urids: Urids,
    adds: bool,
    uri: String,
    /// What the crash line calls it (`lv2:URI (Name)`).
    label: Label,
}

// SAFETY: the instance, its buffers and feature block move together to the engine's thread
// and are used there by one thread at a time (every method takes `&mut self` or only reads
// plain fields); the worker thread only touches `WorkerShared`, which is Sync. LV2 allows an
// instance to be run from a thread other than the one that instantiated it, as long as no
// two of its "audio class" functions run at once.
unsafe impl Send for Lv2Plugin {}

#[derive(Clone, Copy)]
struct Urids {
    sequence: u32,
    chunk: u32,
    midi: u32,
    float: u32,
    double: u32,
    int: u32,
}

impl Urids {
    fn get() -> Urids {
        let u = features::urid_of;
        Urids {
            sequence: u("http://lv2plug.in/ns/ext/atom#Sequence"),
            chunk: u("http://lv2plug.in/ns/ext/atom#Chunk"),
            midi: u("http://lv2plug.in/ns/ext/midi#MidiEvent"),
            float: u("http://lv2plug.in/ns/ext/atom#Float"),
            double: u("http://lv2plug.in/ns/ext/atom#Double"),
            int: u("http://lv2plug.in/ns/ext/atom#Int"),
        }
    }
}

/// Parse `symbol=value,…` against the plugin's control inputs. Unknown symbols and values
/// outside the port's range are the user's mistake (exit 2), named with what is valid.
pub fn parse_params(desc: &PluginDesc, params: &str) -> Result<Vec<(usize, f32)>> {
    let inputs: Vec<_> = desc
        .ports
        .iter()
        .filter(|p| p.kind == PortKind::Control && p.input)
        .collect();
    let valid = || {
        inputs
            .iter()
            .map(|p| format!("{} ({})", p.symbol, p.range_text()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    for kv in params.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (sym, v) = kv.split_once('=').ok_or_else(|| {
            Error::usage(format!(
                "lv2:{}: parameter '{kv}' is not symbol=value; its control inputs are: {}",
                desc.uri,
                valid()
            ))
        })?;
        let (sym, v) = (sym.trim(), v.trim());
        let port = inputs.iter().find(|p| p.symbol == sym).ok_or_else(|| {
            Error::usage(format!(
                "lv2:{} has no control input '{sym}'; its control inputs are: {}",
                desc.uri,
                if inputs.is_empty() {
                    "none".to_string()
                } else {
                    valid()
                }
            ))
        })?;
        let value: f32 = v
            .parse()
            .ok()
            .filter(|x: &f32| x.is_finite())
            .ok_or_else(|| {
                Error::usage(format!(
                    "lv2:{}: {sym}={v} is not a number (valid range {})",
                    desc.uri,
                    port.range_text()
                ))
            })?;
        let below = port.minimum.is_some_and(|m| value < m);
        let above = port.maximum.is_some_and(|m| value > m);
        if below || above {
            return Err(Error::usage(format!(
                "lv2:{}: {sym}={v} is outside the port's range {}",
                desc.uri,
                port.range_text()
            )));
        }
        out.push((port.index, value));
    }
    Ok(out)
}

/// Receives the default state's port values.
struct StatePorts<'a> {
    desc: &'a PluginDesc,
    controls: &'a mut [f32],
    urids: Urids,
}

impl lilv::state::SetPortValue for StatePorts<'_> {
    fn set_port_value(&mut self, symbol: &str, value: lilv::state::Value, size: u32, ty: u32) {
        let Some(p) = self
            .desc
            .ports
            .iter()
            .find(|p| p.symbol == symbol && p.kind == PortKind::Control && p.input)
        else {
            return;
        };
        // SAFETY: lilv hands over a value of `size` bytes whose type is the URID `ty`, in a
        // buffer of its own (malloc'd when the state was read, so aligned for any scalar);
        // each arm reads only a type whose size and URID it has checked.
        let v = unsafe {
            match (ty, size) {
                (t, 4) if t == self.urids.float => *(value as *const f32),
                (t, 8) if t == self.urids.double => *(value as *const f64) as f32,
                (t, 4) if t == self.urids.int => *(value as *const i32) as f32,
                _ => return,
            }
        };
        self.controls[p.index] = v;
    }
}

/// The buffers the ports are connected to, kept by the instance.
struct Ports {
    audio_in: Vec<Box<[f32]>>,
    audio_out: Vec<Box<[f32]>>,
    cv: Vec<Box<[f32]>>,
    atom_in: Vec<AtomBuf>,
    atom_out: Vec<AtomBuf>,
}

/// Connect every port of `instance` to a buffer of its own (controls to their slot in
/// `controls`), for blocks of up to `frames`. `controls` is the boxed slice the instance
/// keeps, so the pointers stay valid as long as it runs.
fn connect_ports(
    instance: &mut lilv::instance::Instance,
    desc: &PluginDesc,
    frames: usize,
    controls: &mut [f32],
    urids: Urids,
) -> Ports {
    let (mut audio_in, mut audio_out, mut cv, mut atom_in, mut atom_out) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for p in &desc.ports {
        let i = p.index;
        // Each port is connected to a buffer of the size its kind needs: audio and CV to
        // `frames` floats (≥ every block `process` runs), a control to its own slot in
        // `controls` (indices run 0..ports.len(), checked by catalog::describe), an atom
        // sequence to SEQUENCE_BYTES (the size announced in the options). The boxes move
        // into the `Lv2Plugin`, which drops them after the instance; a boxed slice's heap
        // data does not move with the box. Unconnected ports are optional ones.
        // SAFETY: so every pointer given to connect_port is valid and large enough for as
        // long as the instance can use it.
        unsafe {
            match (p.kind, p.input) {
                (PortKind::Audio, input) => {
                    let mut b = vec![0.0f32; frames].into_boxed_slice();
                    instance.connect_port_mut(i, b.as_mut_ptr());
                    if input {
                        audio_in.push(b)
                    } else {
                        audio_out.push(b)
                    }
                }
                (PortKind::Control, _) => {
                    instance.connect_port_mut(i, controls.as_mut_ptr().add(i));
                }
                (PortKind::Cv, _) => {
                    let mut b = vec![0.0f32; frames].into_boxed_slice();
                    instance.connect_port_mut(i, b.as_mut_ptr());
                    cv.push(b);
                }
                (PortKind::AtomSequence, input) => {
                    let mut b = vec![0u64; SEQUENCE_WORDS].into_boxed_slice();
                    instance.connect_port_mut(i, b.as_mut_ptr());
                    if input {
                        empty_sequence(&mut b, urids.sequence);
                        atom_in.push(b)
                    } else {
                        output_capacity(&mut b, urids.chunk);
                        atom_out.push(b)
                    }
                }
                // Only optional ports get here (see catalog::describe): leave them
                // unconnected, which lv2:connectionOptional allows.
                (PortKind::Unsupported, _) => {
                    instance.connect_port_mut::<c_void>(i, std::ptr::null_mut())
                }
            }
        }
    }
    Ports {
        audio_in,
        audio_out,
        cv,
        atom_in,
        atom_out,
    }
}

impl Lv2Plugin {
    pub fn new(
        plugin: &lilv::plugin::Plugin,
        desc: &PluginDesc,
        params: &[(usize, f32)],
        ctx: &PluginContext,
    ) -> Result<Lv2Plugin> {
        if let Some(why) = &desc.unhostable {
            return Err(Error::usage(format!(
                "lv2:{} ({}) cannot be hosted: {why}",
                desc.uri, desc.name
            )));
        }
        let frames = ctx.max_frames.max(1);
        let label = Label::new(&format!("lv2:{} ({})", desc.uri, desc.name));
        // The plugin's code runs from here to the end of the priming block.
        let _in_plugin = crash::enter(label, Phase::Instantiating);
        let urids = Urids::get();
        let worker = WorkerShared::new();
        let mut feats = FeatureBlock::new(ctx.rate, frames, worker.schedule_feature());
        // SAFETY: `features` points into the boxed feature block, which the `Lv2Plugin` keeps
        // (`_features`) and drops after the instance (field order), so every feature the
        // plugin keeps a pointer to outlives it. The plugin was checked hostable: lilv
        // verified its data and its port layout is sound (catalog::describe).
        let instance = unsafe { plugin.instantiate(ctx.rate as f64, feats.features()) }
            .ok_or_else(|| {
                Error::cannot_measure(format!(
                    "lv2:{} ({}) failed to instantiate at {} Hz, {} frames (the plugin refused; its own message, if it printed one, is above)",
                    desc.uri, desc.name, ctx.rate, frames
                ))
            })?;
        let mut instance = instance;
        // SAFETY: extension_data is called on a live instance with a URI whose data, when the
        // plugin offers it, is an LV2_Worker_Interface (the worker extension says so); it is
        // attached before the worker thread starts and before the first `run`, as `attach`
        // requires, and the handle stays valid as long as the instance (which drops first).
        unsafe {
            let iface = instance
                .extension_data::<lv2_sys::LV2_Worker_Interface>(
                    "http://lv2plug.in/ns/ext/worker#interface",
                )
                .map_or(std::ptr::null(), |p| p.as_ptr() as *const _);
            worker.attach(iface, instance.handle());
        }

        let mut controls = vec![0.0f32; desc.ports.len()].into_boxed_slice();
        for p in &desc.ports {
            if p.kind == PortKind::Control {
                controls[p.index] = p.default.or(p.minimum).unwrap_or(0.0);
            }
        }
        let Ports {
            audio_in,
            audio_out,
            cv,
            atom_in,
            atom_out,
        } = connect_ports(&mut instance, desc, frames, &mut controls, urids);

        // The plugin's default state (lv2:state in its data), which loadDefaultState asks for
        // and which sets better defaults than the ports' where a plugin has one.
        let w = super::catalog::world();
        let subject = w.new_uri(&desc.uri);
        // SAFETY: `map_ptr` points at the map feature inside the boxed block, alive for this
        // whole function; no other reference to that field is in use while `map` is.
        let map = unsafe { &mut *feats.map_ptr() };
        if let Some(state) = w.new_state(map, &subject) {
            let mut ports = StatePorts {
                desc,
                controls: &mut controls,
                urids,
            };
            state.restore(
                &instance,
                Some(&mut ports),
                lv2_sys::LV2_State_Flags(0),
                feats.features(),
            );
        }
        for &(i, v) in params {
            controls[i] = v;
        }

        let worker_thread = if worker.has_interface() {
            Some(WorkerThread::start(&worker, label).map_err(|e| {
                Error::io(format!("lv2:{}: starting its worker thread", desc.uri), e)
            })?)
        } else {
            None
        };
        // SAFETY: every port is connected (or optional) and the state is restored: what LV2
        // requires before activate; deactivation happens when the instance drops.
        let instance = unsafe { instance.activate() };
        let mut p = Lv2Plugin {
            worker_thread,
            instance,
            worker,
            _features: feats,
            audio_in,
            audio_out,
            _cv: cv,
            controls,
            atom_in,
            atom_out,
            latency_port: desc.latency_port,
            midi_pending: 0,
            urids,
            adds: desc.count(PortKind::Audio, true) == 0,
            uri: desc.uri.clone(),
            label,
        };
        // One silent block before the clock starts: plugins allocate lazily on their first
        // run and report their latency only after it.
        let (mut l, mut r) = (vec![0.0f32; frames], vec![0.0f32; frames]);
        p.process(&mut l, &mut r);
        Ok(p)
    }

    /// The latency the plugin reports on its lv2:latency port, in frames.
    pub fn latency_frames(&self) -> Option<u32> {
        self.latency_port
            .map(|i| self.controls[i])
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| v.round() as u32)
    }

    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Worker requests or responses that did not fit in their ring.
    pub fn worker_dropped(&self) -> u64 {
        self.worker
            .dropped
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn worker_delivered(&self) -> u64 {
        self.worker
            .delivered
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn has_worker(&self) -> bool {
        self.worker_thread.is_some()
    }
}

/// `buf` becomes an empty `atom:Sequence` (header: size, type; body: unit, pad).
fn empty_sequence(buf: &mut [u64], sequence: u32) {
    // atom.size counts the body only: the 8-byte sequence body header.
    buf[0] = 8u64 | (u64::from(sequence) << 32);
    buf[1] = 0;
}

/// An output sequence port: the host announces the whole buffer as an `atom:Chunk`.
fn output_capacity(buf: &mut [u64], chunk: u32) {
    let capacity = (buf.len() * 8 - 8) as u64;
    buf[0] = capacity | (u64::from(chunk) << 32);
}

/// Append one 3-byte MIDI event at frame 0 to an (empty) sequence.
fn push_midi(buf: &mut [u64], midi: u32, bytes: [u8; 3]) {
    // Event: time (i64 frames) then an atom header (size 3, type MidiEvent), then the bytes
    // padded to 8: 8 + 8 + 8 bytes after the sequence's 16-byte header.
    buf[2] = 0;
    buf[3] = 3u64 | (u64::from(midi) << 32);
    buf[4] = u64::from(bytes[0]) | (u64::from(bytes[1]) << 8) | (u64::from(bytes[2]) << 16);
    buf[0] = (buf[0] & !0xffff_ffff) | (8 + 24);
}

impl Plugin for Lv2Plugin {
    fn process(&mut self, left: &mut [f32], right: &mut [f32]) {
        let n = left.len().min(right.len());
        match self.audio_in.as_mut_slice() {
            [] => {}
            [mono] => {
                for ((m, l), r) in mono.iter_mut().zip(left.iter()).zip(right.iter()) {
                    *m = 0.5 * (l + r);
                }
            }
            [a, b, ..] => {
                a[..n].copy_from_slice(&left[..n]);
                b[..n].copy_from_slice(&right[..n]);
            }
        }
        for (k, buf) in self.atom_in.iter_mut().enumerate() {
            empty_sequence(buf, self.urids.sequence);
            if k == 0 && self.midi_pending != 0 {
                let status = if self.midi_pending == 1 { 0x90 } else { 0x80 };
                push_midi(buf, self.urids.midi, [status, 69, 100]);
            }
        }
        self.midi_pending = 0;
        for buf in self.atom_out.iter_mut() {
            output_capacity(buf, self.urids.chunk);
        }
        let in_plugin = crash::enter(self.label, Phase::Processing);
        self.worker.set_in_run(true);
        // SAFETY: the instance is active and its ports connected to buffers this struct owns,
        // sized for `max_frames` ≥ n (the Plugin contract); `&mut self` keeps any other call
        // into the instance from running at the same time.
        unsafe { self.instance.run(n) };
        self.worker.set_in_run(false);
        // SAFETY: this is the thread that just called `run`, and `&mut self` keeps the two
        // from overlapping.
        unsafe { self.worker.deliver() };
        drop(in_plugin);
        let adds = self.adds;
        crate::dsp::format::to_stereo(self.audio_out.as_slice(), left, right, n, adds);
    }

    fn note_on(&mut self) {
        self.midi_pending = 1;
    }

    fn note_off(&mut self) {
        self.midi_pending = 2;
    }

    fn latency_frames(&self) -> Option<u32> {
        Lv2Plugin::latency_frames(self)
    }

    fn set_control(&mut self, index: usize, value: f32) -> bool {
        // The caller names a control input of the description; the latency port is the one
        // output slot here that a stray index could overwrite.
        match self.controls.get_mut(index) {
            Some(c) if Some(index) != self.latency_port => {
                *c = value;
                true
            }
            _ => false,
        }
    }

    fn save_state(&mut self) -> Option<Result<Vec<u8>>> {
        Some(super::state::save(
            self.instance.instance(),
            &self.controls,
            self._features.features(),
        ))
    }

    fn restore_state(&mut self, state: &[u8]) -> Option<Result<()>> {
        Some(super::state::restore(
            self.instance.instance(),
            &mut self.controls,
            state,
            self._features.features(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_are_valid_atoms() {
        let mut b = vec![0u64; SEQUENCE_WORDS];
        empty_sequence(&mut b, 7);
        assert_eq!(
            b[0] & 0xffff_ffff,
            8,
            "an empty sequence's body is its 8-byte header"
        );
        assert_eq!(b[0] >> 32, 7);
        push_midi(&mut b, 9, [0x90, 69, 100]);
        assert_eq!(b[0] & 0xffff_ffff, 32);
        assert_eq!(b[0] >> 32, 7, "the type survives");
        assert_eq!(b[3], 3 | (9 << 32));
        assert_eq!(b[4] & 0xff, 0x90);
        output_capacity(&mut b, 5);
        assert_eq!(b[0] & 0xffff_ffff, (SEQUENCE_BYTES - 8) as u64);
    }
}
