//! One CLAP plugin instance as an engine [`Plugin`].
//!
//! Bus mapping (the track's bus is stereo), as for LV2 but by CLAP port: the bus feeds the
//! main audio input port (the one flagged main, else the first) — one channel gets the mid
//! `(L+R)/2`, two or more get L and R — and every other input port (a sidechain) gets a
//! buffer of silence of its own; the main output port's first channel (mono) or first two
//! become L and R, other outputs are discarded; a plugin with no audio input adds its output
//! to the bus. Parameters given as `clap:ID(name=value,…)` go to the plugin as parameter
//! events in the silent priming block, before the clock starts.
//!
//! Everything is allocated here; `process` copies, calls the plugin with pointer tables and
//! an event list built in advance, and copies back, without allocating or locking.

use super::catalog::{self, Found};
use super::host::{AudioThread, HostShared, MainThread};
use crate::dsp::{Plugin, PluginContext};
use crate::error::{Error, Result};
use crate::rt::crash::{self, Label, Phase};
use clap_sys::audio_buffer::clap_audio_buffer;
use clap_sys::events::{
    clap_event_header, clap_event_note, clap_event_param_value, clap_input_events,
    clap_output_events, CLAP_CORE_EVENT_SPACE_ID, CLAP_EVENT_NOTE_OFF, CLAP_EVENT_NOTE_ON,
    CLAP_EVENT_PARAM_VALUE,
};
use clap_sys::ext::latency::{clap_plugin_latency, CLAP_EXT_LATENCY};
use clap_sys::id::clap_id;
use clap_sys::plugin::clap_plugin;
use clap_sys::process::clap_process;
use std::ffi::c_void;

/// The events of the next block: the parameter values given when it was made (first block
/// only), the parameters moved since the last block (`Plugin::set_control`), and a note.
struct Events {
    params: Box<[clap_event_param_value]>,
    send_params: bool,
    /// One event per parameter the host may move, in `Found::params` order.
    moves: Box<[clap_event_param_value]>,
    /// Which of `moves` go in the next block, in the order they were moved; `n_moved` of them.
    moved: Box<[usize]>,
    n_moved: usize,
    note: clap_event_note,
    send_note: bool,
}

impl Events {
    fn len(&self) -> u32 {
        (if self.send_params {
            self.params.len()
        } else {
            0
        } + self.n_moved) as u32
            + u32::from(self.send_note)
    }

    /// Send `value` to the parameter `slot` in the next block. Real-time safe.
    fn set(&mut self, slot: usize, value: f64) {
        if !self.moved[..self.n_moved].contains(&slot) {
            self.moved[self.n_moved] = slot;
            self.n_moved += 1;
        }
        self.moves[slot].value = value;
    }
}

unsafe extern "C" fn events_size(list: *const clap_input_events) -> u32 {
    // SAFETY: `ctx` is the instance's boxed `Events`, alive during `process`.
    unsafe { (*((*list).ctx as *const Events)).len() }
}

unsafe extern "C" fn events_get(
    list: *const clap_input_events,
    index: u32,
) -> *const clap_event_header {
    // SAFETY: as in `events_size`.
    let e = unsafe { &*((*list).ctx as *const Events) };
    let n_params = if e.send_params { e.params.len() } else { 0 };
    let i = index as usize;
    if i < n_params {
        &e.params[i].header
    } else if i < n_params + e.n_moved {
        &e.moves[e.moved[i - n_params]].header
    } else if i == n_params + e.n_moved && e.send_note {
        &e.note.header
    } else {
        std::ptr::null()
    }
}

/// Output events are accepted and dropped: nothing reads them, and keeping them would
/// allocate.
unsafe extern "C" fn events_push(
    _: *const clap_output_events,
    _: *const clap_event_header,
) -> bool {
    true
}

/// The channel buffers of one side and the pointer tables CLAP reads them through.
struct Side {
    channels: Vec<Vec<Box<[f32]>>>,
    _pointers: Vec<Box<[*mut f32]>>,
    buffers: Box<[clap_audio_buffer]>,
    main: Option<usize>,
}

impl Side {
    fn new(ports: &[catalog::AudioPort], frames: usize) -> Side {
        let mut channels: Vec<Vec<Box<[f32]>>> = ports
            .iter()
            .map(|p| {
                (0..p.channels)
                    .map(|_| vec![0.0f32; frames].into_boxed_slice())
                    .collect()
            })
            .collect();
        let mut pointers: Vec<Box<[*mut f32]>> = channels
            .iter_mut()
            .map(|chs| chs.iter_mut().map(|c| c.as_mut_ptr()).collect())
            .collect();
        let buffers = pointers
            .iter_mut()
            .zip(ports)
            .map(|(ptrs, p)| clap_audio_buffer {
                data32: ptrs.as_mut_ptr(),
                data64: std::ptr::null_mut(),
                channel_count: p.channels,
                latency: 0,
                constant_mask: 0,
            })
            .collect();
        let main = ports
            .iter()
            .position(|p| p.main)
            .or((!ports.is_empty()).then_some(0));
        Side {
            channels,
            _pointers: pointers,
            buffers,
            main,
        }
    }

    fn main_channels(&mut self) -> &mut [Box<[f32]>] {
        match self.main {
            Some(m) => &mut self.channels[m],
            None => &mut [],
        }
    }
}

pub struct ClapPlugin {
    // Field order is drop order where it matters: `Drop` stops the main-thread server and
    // destroys the plugin before any of these go.
    main_thread: Option<MainThread>,
    plugin: *const clap_plugin,
    host: Box<HostShared>,
    inputs: Side,
    outputs: Side,
    events: Box<Events>,
    in_events: Box<clap_input_events>,
    out_events: Box<clap_output_events>,
    steady_time: i64,
    active: bool,
    processing: bool,
    adds: bool,
    latency: Option<u32>,
    label: Label,
    /// The port index of each parameter the host may move, in `Found::params` order.
    ports: Box<[usize]>,
}

// SAFETY: the instance and the buffers it points into move together to the engine's thread
// and are used there by one thread at a time (every method takes `&mut self`); the
// main-thread server only reaches the plugin's main-thread functions, which CLAP allows
// beside `process`, and `HostShared`, which is Sync.
unsafe impl Send for ClapPlugin {}

/// Parse `name=value,…` against the plugin's parameters (`dsp::files::parse_params`), each
/// value with its parameter's CLAP id.
pub fn parse_params(found: &Found, params: &str) -> Result<Vec<(clap_id, f64)>> {
    let values =
        crate::dsp::files::parse_params(&super::KIND, &found.desc.uri, &found.params, params)?;
    Ok(values
        .into_iter()
        .map(|(slot, v)| (found.params[slot].id, v))
        .collect())
}

impl ClapPlugin {
    pub fn new(found: &Found, params: &[(clap_id, f64)], ctx: &PluginContext) -> Result<Self> {
        let uri = &found.desc.uri;
        let name = &found.desc.name;
        let module = match (&found.desc.unhostable, &found.file) {
            (Some(why), _) if !found.init_failed => {
                return Err(Error::usage(format!(
                    "clap:{uri} ({name}) cannot be hosted: {why}"
                )))
            }
            (_, Some(file)) => super::catalog::load(file)
                .map_err(|why| Error::cannot_measure(format!("clap:{uri} ({name}): {why}")))?,
            (_, None) => return Err(Error::usage(format!("clap:{uri} is not a plugin"))),
        };
        let frames = ctx.max_frames.max(1);
        let label = Label::new(&format!("clap:{uri} ({name})"));
        let in_plugin = crash::enter(label, Phase::Instantiating);
        let host = HostShared::new();
        // SAFETY: the host is boxed in the instance, which destroys the plugin first (Drop).
        let plugin = unsafe { module.create(host.host(), &found.id) }.ok_or_else(|| {
            Error::cannot_measure(format!(
                "clap:{uri} ({name}): its factory refused to create it"
            ))
        })?;
        host.set_plugin(plugin);
        // From here on `Drop` cleans up: build the struct first, then initialise.
        let mut p = ClapPlugin {
            main_thread: None,
            plugin,
            host,
            inputs: Side::new(&[], 0),
            outputs: Side::new(&[], 0),
            events: Box::new(Events {
                params: params
                    .iter()
                    .map(|&(id, value)| param_event(id, value))
                    .collect(),
                send_params: true,
                moves: found
                    .params
                    .iter()
                    .map(|p| param_event(p.id, 0.0))
                    .collect(),
                moved: vec![0; found.params.len()].into_boxed_slice(),
                n_moved: 0,
                note: clap_event_note {
                    header: header::<clap_event_note>(CLAP_EVENT_NOTE_ON),
                    note_id: -1,
                    port_index: 0,
                    channel: 0,
                    key: 69,
                    velocity: 0.8,
                },
                send_note: false,
            }),
            in_events: Box::new(clap_input_events {
                ctx: std::ptr::null_mut(),
                size: Some(events_size),
                get: Some(events_get),
            }),
            out_events: Box::new(clap_output_events {
                ctx: std::ptr::null_mut(),
                try_push: Some(events_push),
            }),
            steady_time: 0,
            active: false,
            processing: false,
            adds: false,
            latency: None,
            label,
            ports: found.params.iter().map(|p| p.port).collect(),
        };
        p.in_events.ctx = (&mut *p.events as *mut Events).cast::<c_void>();
        // SAFETY: main-thread calls on the live plugin from the thread that created it,
        // in CLAP's order: init, then the port queries, then activate.
        unsafe {
            if !(*plugin).init.is_some_and(|f| f(plugin)) {
                return Err(Error::cannot_measure(format!(
                    "clap:{uri} ({name}): {}",
                    catalog::init_failure(&p.host)
                )));
            }
            let ins = catalog::audio_ports(plugin, true);
            let outs = catalog::audio_ports(plugin, false);
            p.adds = ins.is_empty();
            p.inputs = Side::new(&ins, frames);
            p.outputs = Side::new(&outs, frames);
            let activate = (*plugin).activate.ok_or_else(|| {
                Error::usage(format!("clap:{uri} ({name}) has no activate function"))
            })?;
            if !activate(plugin, f64::from(ctx.rate), 1, frames as u32) {
                return Err(Error::cannot_measure(format!(
                    "clap:{uri} ({name}) refused to activate at {} Hz, up to {frames} frames",
                    ctx.rate
                )));
            }
            p.active = true;
        }
        // One silent block before the clock starts, carrying the parameters: plugins
        // allocate lazily on their first block and settle their latency after it.
        let (mut l, mut r) = (vec![0.0f32; frames], vec![0.0f32; frames]);
        drop(in_plugin);
        p.process(&mut l, &mut r);
        let _in_plugin = crash::enter(label, Phase::Instantiating);
        // SAFETY: a main-thread call on the active plugin from the thread that created it.
        p.latency = unsafe {
            catalog::extension::<clap_plugin_latency>(plugin, CLAP_EXT_LATENCY)
                .and_then(|e| e.get)
                .map(|get| get(plugin))
        };
        p.main_thread =
            Some(MainThread::start(&p.host, label).map_err(|e| {
                Error::io(format!("clap:{uri}: starting its main-thread server"), e)
            })?);
        Ok(p)
    }
}

fn param_event(id: clap_id, value: f64) -> clap_event_param_value {
    clap_event_param_value {
        header: header::<clap_event_param_value>(CLAP_EVENT_PARAM_VALUE),
        param_id: id,
        cookie: std::ptr::null_mut(),
        note_id: -1,
        port_index: -1,
        channel: -1,
        key: -1,
        value,
    }
}

fn header<T>(kind: u16) -> clap_event_header {
    clap_event_header {
        size: std::mem::size_of::<T>() as u32,
        time: 0,
        space_id: CLAP_CORE_EVENT_SPACE_ID,
        type_: kind,
        flags: 0,
    }
}

impl Drop for ClapPlugin {
    fn drop(&mut self) {
        // The server goes first: no main-thread call may overlap the teardown.
        self.main_thread = None;
        let p = self.plugin;
        let _in_plugin = crash::enter(self.label, Phase::Instantiating);
        // SAFETY: the plugin is live (created in `new`) and nothing else calls it now;
        // stop_processing is an audio-thread call, so this thread says it is one meanwhile.
        unsafe {
            if self.processing {
                let _audio = AudioThread::enter();
                if let Some(stop) = (*p).stop_processing {
                    stop(p);
                }
            }
            if let Some(deactivate) = (*p).deactivate.filter(|_| self.active) {
                deactivate(p);
            }
            if let Some(destroy) = (*p).destroy {
                destroy(p);
            }
        }
    }
}

impl Plugin for ClapPlugin {
    fn process(&mut self, left: &mut [f32], right: &mut [f32]) {
        let n = left.len().min(right.len());
        match self.inputs.main_channels() {
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
        let p = self.plugin;
        let process = clap_process {
            steady_time: self.steady_time,
            frames_count: n as u32,
            transport: std::ptr::null(),
            audio_inputs: self.inputs.buffers.as_ptr(),
            audio_outputs: self.outputs.buffers.as_mut_ptr(),
            audio_inputs_count: self.inputs.buffers.len() as u32,
            audio_outputs_count: self.outputs.buffers.len() as u32,
            in_events: &*self.in_events,
            out_events: &*self.out_events,
        };
        let in_plugin = crash::enter(self.label, Phase::Processing);
        let audio = AudioThread::enter();
        // SAFETY: the plugin is active; the process struct points at buffers and event lists
        // this instance owns, sized for `max_frames` ≥ n (the Plugin contract); `&mut self`
        // keeps any other audio-thread call from overlapping.
        unsafe {
            if !self.processing {
                self.processing = (*p).start_processing.is_none_or(|start| start(p));
            }
            if let Some(f) = (*p).process {
                f(p, &process);
            }
        }
        drop(audio);
        drop(in_plugin);
        self.steady_time += n as i64;
        self.events.send_params = false;
        self.events.n_moved = 0;
        self.events.send_note = false;
        let adds = self.adds;
        crate::dsp::format::to_stereo(self.outputs.main_channels(), left, right, n, adds);
    }

    fn note_on(&mut self) {
        self.events.note.header.type_ = CLAP_EVENT_NOTE_ON;
        self.events.send_note = true;
    }

    fn note_off(&mut self) {
        self.events.note.header.type_ = CLAP_EVENT_NOTE_OFF;
        self.events.send_note = true;
    }

    fn latency_frames(&self) -> Option<u32> {
        self.latency
    }

    fn set_control(&mut self, index: usize, value: f32) -> bool {
        match self.ports.iter().position(|&p| p == index) {
            Some(slot) => {
                self.events.set(slot, f64::from(value));
                true
            }
            None => false,
        }
    }

    fn save_state(&mut self) -> Option<Result<Vec<u8>>> {
        let _in_plugin = crash::enter(self.label, Phase::Instantiating);
        let p = self.plugin;
        // SAFETY: the plugin is live; `&mut self` keeps `process` from overlapping, and the
        // main-thread server waits meanwhile.
        let r = super::host::as_main_thread(|| unsafe { super::state::save(p) })?;
        Some(r.map_err(|e| Error::cannot_measure(format!("{}: {e}", self.label.as_str()))))
    }

    fn restore_state(&mut self, state: &[u8]) -> Option<Result<()>> {
        let _in_plugin = crash::enter(self.label, Phase::Instantiating);
        let p = self.plugin;
        // SAFETY: as in `save_state`.
        let r = super::host::as_main_thread(|| unsafe { super::state::load(p, state) })?;
        Some(r.map_err(|e| Error::cannot_measure(format!("{}: {e}", self.label.as_str()))))
    }
}
