//! One VST3 plugin instance as an engine [`Plugin`].
//!
//! A VST3 plugin is a component (`IComponent` + `IAudioProcessor`) and an edit controller
//! (`IEditController`): one object for both, or a separate controller class the component
//! names, which is created, initialised, connected (`IConnectionPoint`) and given the
//! component's state, in the order the VST3 SDK's hosting notes give. The controller is
//! what names parameters and converts plain values to the normalized ones the processor gets.
//!
//! Bus mapping, as for CLAP but by VST3 bus: the track's stereo bus feeds the main audio
//! input bus (the first of type main, else the first) — one channel gets `(L+R)/2`, two or
//! more get L and R — and every other input bus (a sidechain) is activated and gets a buffer
//! of silence of its own; the main output bus's first channel (mono) or first two become L
//! and R; a plugin with no audio input adds its output to the bus. Parameters given as
//! `vst3:ID(name=value,…)` go to the processor as parameter changes in the silent priming
//! block, before the clock starts.
//!
//! Everything is allocated here; `process` copies, calls the plugin with bus tables,
//! parameter changes and event lists built in advance (host.rs), and copies back, without
//! allocating or locking.

use super::catalog::{self, Found};
use super::host::{speakers, Changes, Events, SinkChanges};
use super::parts::{audio_buses, result_text, Bus, Parts, PartsError};
use crate::dsp::{Plugin, PluginContext};
use crate::error::{Error, Result};
use crate::rt::crash::{self, Label, Phase};
use vst3::Steinberg::Vst::SpeakerArr::{kMono, kStereo};
use vst3::Steinberg::Vst::{
    AudioBusBuffers, AudioBusBuffers__type0, BusDirections_::kInput, BusDirections_::kOutput,
    IAudioProcessor, IAudioProcessorTrait, IComponentTrait, IEditControllerTrait, IEventList,
    IParameterChanges, MediaTypes_::kAudio, MediaTypes_::kEvent, ProcessContext, ProcessData,
    ProcessModes_::kRealtime, ProcessSetup, SpeakerArrangement, SymbolicSampleSizes_::kSample32,
};
use vst3::Steinberg::{kResultOk, FUnknown};
use vst3::{ComPtr, ComWrapper};

/// Parse `name=value,…` against the plugin's parameters (`dsp::files::parse_params`), each
/// value with its parameter's index in `found.params`.
pub fn parse_params(found: &Found, params: &str) -> Result<Vec<(usize, f64)>> {
    crate::dsp::files::parse_params(&super::KIND, &found.desc.uri, &found.params, params)
}

/// The channel buffers of one side and the tables VST3 reads them through.
struct Side {
    channels: Vec<Vec<Box<[f32]>>>,
    _pointers: Vec<Box<[*mut f32]>>,
    buses: Box<[AudioBusBuffers]>,
    main: Option<usize>,
}

impl Side {
    fn new(buses: &[Bus], frames: usize) -> Side {
        let mut channels: Vec<Vec<Box<[f32]>>> = buses
            .iter()
            .map(|b| {
                (0..b.channels)
                    .map(|_| vec![0.0f32; frames].into_boxed_slice())
                    .collect()
            })
            .collect();
        let mut pointers: Vec<Box<[*mut f32]>> = channels
            .iter_mut()
            .map(|chs| chs.iter_mut().map(|c| c.as_mut_ptr()).collect())
            .collect();
        let buses_out = pointers
            .iter_mut()
            .zip(buses)
            .map(|(ptrs, b)| AudioBusBuffers {
                numChannels: b.channels as i32,
                silenceFlags: 0,
                __field0: AudioBusBuffers__type0 {
                    channelBuffers32: ptrs.as_mut_ptr(),
                },
            })
            .collect();
        let main = buses
            .iter()
            .position(|b| b.main)
            .or((!buses.is_empty()).then_some(0));
        Side {
            channels,
            _pointers: pointers,
            buses: buses_out,
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

/// The arrangement a bus of `channels` speakers asks for when the plugin gives none.
fn arrangement_for(channels: u32) -> SpeakerArrangement {
    match channels {
        1 => kMono,
        2 => kStereo,
        n => (1u64 << n.min(63)) - 1,
    }
}

pub struct Vst3Plugin {
    // Field order is drop order where it matters: `Drop` stops processing and deactivates
    // before `parts` terminates the plugin and the buffers go.
    parts: Parts,
    params: Vec<catalog::Param>,
    changes: ComWrapper<Changes>,
    out_changes: ComWrapper<SinkChanges>,
    events: ComWrapper<Events>,
    out_events: ComWrapper<Events>,
    context: Box<ProcessContext>,
    inputs: Side,
    outputs: Side,
    active: bool,
    processing: bool,
    adds: bool,
    latency: u32,
    label: Label,
}

// SAFETY: the instance and the buffers it points into move together to the engine's thread
// and are used there by one thread at a time (every method takes `&mut self`); the host
// objects are atomics (or a lock, off the audio thread) and Sync.
unsafe impl Send for Vst3Plugin {}

/// Bus arrangements for `buses`: the plugin's own, else by channel count.
///
/// # Safety
/// `p` is an initialised processor, called from its main thread.
unsafe fn arrangements(p: &ComPtr<IAudioProcessor>, dir: i32, buses: &[Bus]) -> Vec<u64> {
    (0..buses.len())
        .map(|i| {
            let mut arr: SpeakerArrangement = 0;
            // SAFETY: the caller's contract; `arr` is a valid out-value.
            let ok = unsafe { p.getBusArrangement(dir, i as i32, &mut arr) } == kResultOk;
            if ok && speakers(arr) == buses[i].channels {
                arr
            } else {
                arrangement_for(buses[i].channels)
            }
        })
        .collect()
}

impl Vst3Plugin {
    pub fn new(found: &Found, params: &[(usize, f64)], ctx: &PluginContext) -> Result<Self> {
        let uri = &found.desc.uri;
        let name = &found.desc.name;
        let module = match (&found.desc.unhostable, &found.file) {
            (Some(why), _) if !found.init_failed => {
                return Err(Error::usage(format!(
                    "vst3:{uri} ({name}) cannot be hosted: {why}"
                )))
            }
            (_, Some(bundle)) => super::catalog::load(bundle)
                .map_err(|why| Error::cannot_measure(format!("vst3:{uri} ({name}): {why}")))?,
            (_, None) => return Err(Error::usage(format!("vst3:{uri} is not a plugin"))),
        };
        let frames = ctx.max_frames.max(1);
        let label = Label::new(&format!("vst3:{uri} ({name})"));
        let in_plugin = crash::enter(label, Phase::Instantiating);
        let parts = Parts::new(module, &found.cid).map_err(|e| match e {
            PartsError::Refused(why) => {
                Error::cannot_measure(format!("vst3:{uri} ({name}): {why}"))
            }
            PartsError::Init(why) => Error::cannot_measure(format!("vst3:{uri} ({name}): {why}")),
        })?;
        // SAFETY: main-thread calls on the initialised parts from the thread that created
        // them, in the SDK's order: arrangements, bus activation, setup, then setActive.
        let (ins, outs) = unsafe {
            let ins = audio_buses(&parts, true);
            let outs = audio_buses(&parts, false);
            let mut a_in = arrangements(&parts.processor, kInput as i32, &ins);
            let mut a_out = arrangements(&parts.processor, kOutput as i32, &outs);
            // A plugin may refuse and keep its own: the bus infos read again say which.
            parts.processor.setBusArrangements(
                a_in.as_mut_ptr(),
                a_in.len() as i32,
                a_out.as_mut_ptr(),
                a_out.len() as i32,
            );
            let ins = audio_buses(&parts, true);
            let outs = audio_buses(&parts, false);
            for (dir, n) in [(kInput, ins.len()), (kOutput, outs.len())] {
                for i in 0..n {
                    parts
                        .component
                        .activateBus(kAudio as i32, dir as i32, i as i32, 1);
                }
            }
            for i in 0..parts.component.getBusCount(kEvent as i32, kInput as i32) {
                parts
                    .component
                    .activateBus(kEvent as i32, kInput as i32, i, 1);
            }
            (ins, outs)
        };
        let ids = found.params.iter().map(|p| p.id);
        let mut p = Vst3Plugin {
            parts,
            params: found.params.clone(),
            changes: ComWrapper::new(Changes::new(ids)),
            out_changes: ComWrapper::new(SinkChanges::default()),
            events: ComWrapper::new(Events::new(true)),
            out_events: ComWrapper::new(Events::new(false)),
            // SAFETY: ProcessContext is plain integers and floats; zero is a valid value.
            context: Box::new(unsafe { std::mem::zeroed() }),
            adds: ins.is_empty(),
            inputs: Side::new(&ins, frames),
            outputs: Side::new(&outs, frames),
            active: false,
            processing: false,
            latency: 0,
            label,
        };
        p.context.sampleRate = f64::from(ctx.rate);
        p.context.state = vst3::Steinberg::Vst::ProcessContext_::StatesAndFlags_::kContTimeValid;
        let mut setup = ProcessSetup {
            processMode: kRealtime as i32,
            symbolicSampleSize: kSample32 as i32,
            maxSamplesPerBlock: frames as i32,
            sampleRate: f64::from(ctx.rate),
        };
        // SAFETY: main-thread calls on the initialised parts, as above.
        unsafe {
            let r = p.parts.processor.setupProcessing(&mut setup);
            if r != kResultOk {
                return Err(Error::cannot_measure(format!(
                    "vst3:{uri} ({name}) refused to process at {} Hz, up to {frames} frames: {}",
                    ctx.rate,
                    result_text(r)
                )));
            }
            let r = p.parts.component.setActive(1);
            if r != kResultOk {
                return Err(Error::cannot_measure(format!(
                    "vst3:{uri} ({name}) refused to activate: {}",
                    result_text(r)
                )));
            }
            p.active = true;
        }
        for &(slot, plain) in params {
            p.send(slot, plain);
        }
        // One silent block before the clock starts, carrying the parameters: plugins
        // allocate lazily on their first block and settle their latency after it.
        let (mut l, mut r) = (vec![0.0f32; frames], vec![0.0f32; frames]);
        drop(in_plugin);
        p.process(&mut l, &mut r);
        let _in_plugin = crash::enter(label, Phase::Instantiating);
        // SAFETY: a main-thread call on the active processor.
        p.latency = unsafe { p.parts.processor.getLatencySamples() };
        Ok(p)
    }

    /// Queue the plain `value` of the parameter `slot` for the next block; false without a
    /// controller to convert it.
    fn send(&mut self, slot: usize, value: f64) -> bool {
        let (Some(ctl), Some(param)) = (&self.parts.controller, self.params.get(slot)) else {
            return false;
        };
        // SAFETY: a pure conversion on the initialised controller (no state changes), made
        // between blocks by the thread that owns the instance.
        let norm = unsafe { ctl.plainParamToNormalized(param.id, value) };
        self.changes.set(slot, norm.clamp(0.0, 1.0));
        true
    }
}

impl Drop for Vst3Plugin {
    fn drop(&mut self) {
        let _in_plugin = crash::enter(self.label, Phase::Instantiating);
        // SAFETY: the parts are live; nothing else calls them now.
        unsafe {
            if self.processing {
                self.parts.processor.setProcessing(0);
            }
            if self.active {
                self.parts.component.setActive(0);
            }
        }
    }
}

impl Plugin for Vst3Plugin {
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
        let ptr = |w: Option<*mut FUnknown>| w.unwrap_or(std::ptr::null_mut());
        let mut data = ProcessData {
            processMode: kRealtime as i32,
            symbolicSampleSize: kSample32 as i32,
            numSamples: n as i32,
            numInputs: self.inputs.buses.len() as i32,
            numOutputs: self.outputs.buses.len() as i32,
            inputs: self.inputs.buses.as_mut_ptr(),
            outputs: self.outputs.buses.as_mut_ptr(),
            inputParameterChanges: ptr(self
                .changes
                .as_com_ref::<IParameterChanges>()
                .map(|r| r.as_ptr().cast()))
            .cast(),
            outputParameterChanges: ptr(self
                .out_changes
                .as_com_ref::<IParameterChanges>()
                .map(|r| r.as_ptr().cast()))
            .cast(),
            inputEvents: ptr(self
                .events
                .as_com_ref::<IEventList>()
                .map(|r| r.as_ptr().cast()))
            .cast(),
            outputEvents: ptr(self
                .out_events
                .as_com_ref::<IEventList>()
                .map(|r| r.as_ptr().cast()))
            .cast(),
            processContext: &mut *self.context,
        };
        let in_plugin = crash::enter(self.label, Phase::Processing);
        // SAFETY: the component is active; `data` points at buffers, lists and a context
        // this instance owns, sized for `max_frames` ≥ n (the Plugin contract); `&mut self`
        // keeps any other call from overlapping.
        unsafe {
            if !self.processing {
                // kNotImplemented is allowed here: only that it was asked matters.
                self.parts.processor.setProcessing(1);
                self.processing = true;
            }
            self.parts.processor.process(&mut data);
        }
        drop(in_plugin);
        self.context.continousTimeSamples += n as i64;
        self.changes.clear();
        self.events.clear();
        let adds = self.adds;
        crate::dsp::format::to_stereo(self.outputs.main_channels(), left, right, n, adds);
    }

    fn note_on(&mut self) {
        self.events.note(true);
    }

    fn note_off(&mut self) {
        self.events.note(false);
    }

    fn latency_frames(&self) -> Option<u32> {
        Some(self.latency)
    }

    fn set_control(&mut self, index: usize, value: f32) -> bool {
        match self.params.iter().position(|p| p.port == index) {
            Some(slot) => self.send(slot, f64::from(value)),
            None => false,
        }
    }

    fn save_state(&mut self) -> Option<Result<Vec<u8>>> {
        let _in_plugin = crash::enter(self.label, Phase::Instantiating);
        Some(
            self.parts
                .component_state()
                .map_err(|e| Error::cannot_measure(format!("{}: {e}", self.label.as_str()))),
        )
    }

    fn restore_state(&mut self, state: &[u8]) -> Option<Result<()>> {
        let _in_plugin = crash::enter(self.label, Phase::Instantiating);
        Some(
            self.parts
                .set_component_state(state)
                .map_err(|e| Error::cannot_measure(format!("{}: {e}", self.label.as_str()))),
        )
    }
}
