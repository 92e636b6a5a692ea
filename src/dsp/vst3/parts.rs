//! A VST3 binary and one class of it made ready: the loaded module, the component with its
//! controller (`Parts`) and the component's audio buses. Both the catalog (which describes a
//! class by making it ready once) and the instance (which runs it) build on this, so neither
//! imports the other for it.

use super::host::{Handler, HostApp, MemStream};
use std::ffi::c_void;
use std::path::PathBuf;
use vst3::Steinberg::Vst::{
    BusDirections_::{kInput, kOutput},
    BusInfo,
    BusTypes_::kMain,
    IAudioProcessor, IComponent, IComponentHandler, IComponentTrait, IConnectionPoint,
    IConnectionPointTrait, IEditController, IEditControllerTrait,
    MediaTypes_::kAudio,
};
use vst3::Steinberg::{
    kResultOk, tresult, FUnknown, IBStream, IPluginBaseTrait, IPluginFactory, IPluginFactoryTrait,
    TUID,
};
use vst3::{ComPtr, ComWrapper, Interface};

/// A loaded VST3 binary: `ModuleEntry` called, its factory held, never unloaded (`ModuleExit`
/// is not called: plugins' threads and static data may outlive any one instance, and a
/// process hosts few binaries).
pub struct Module {
    pub path: PathBuf,
    pub factory: ComPtr<IPluginFactory>,
}

// SAFETY: a VST3 factory's createInstance and class queries may be called from any thread
// the host chooses (hosts scan from worker threads); nothing in a `Module` changes after
// loading, and it is never released.
unsafe impl Send for Module {}
// SAFETY: as for Send.
unsafe impl Sync for Module {}

/// One audio bus as the component declares it.
#[derive(Debug, Clone, Copy)]
pub struct Bus {
    pub channels: u32,
    pub main: bool,
}

/// The audio buses of a component on one side.
///
/// # Safety
/// `parts` holds an initialised component, called from its main thread.
pub(super) unsafe fn audio_buses(parts: &Parts, input: bool) -> Vec<Bus> {
    let dir = if input { kInput } else { kOutput } as i32;
    let c = &parts.component;
    // SAFETY: the caller's contract; `info` is a valid out-struct.
    unsafe {
        (0..c.getBusCount(kAudio as i32, dir))
            .filter_map(|i| {
                let mut info: BusInfo = std::mem::zeroed();
                (c.getBusInfo(kAudio as i32, dir, i, &mut info) == kResultOk).then_some(Bus {
                    channels: info.channelCount.max(0) as u32,
                    main: info.busType == kMain as i32,
                })
            })
            .collect()
    }
}

/// Why a class could not be made ready: refused (not hostable: exit 2) or its
/// initialisation failed (exit 3).
pub enum PartsError {
    Refused(String),
    Init(String),
}

/// A plugin's component and controller, initialised with xrunlab's host context.
pub struct Parts {
    // Field order is release order: DPF (and the SDK's own warnings) want the processor's
    // and controller's references gone before the component's last one.
    pub processor: ComPtr<IAudioProcessor>,
    pub controller: Option<ComPtr<IEditController>>,
    /// The controller is its own object, initialised and connected here.
    separate: Option<ComPtr<IEditController>>,
    pub component: ComPtr<IComponent>,
    pub handler: ComWrapper<Handler>,
    _host: ComWrapper<HostApp>,
}

pub(super) fn result_text(r: tresult) -> String {
    use vst3::Steinberg::*;
    let name = match r {
        x if x == kResultFalse => "kResultFalse",
        x if x == kInvalidArgument => "kInvalidArgument",
        x if x == kNotImplemented => "kNotImplemented",
        x if x == kInternalError => "kInternalError",
        x if x == kNotInitialized => "kNotInitialized",
        x if x == kOutOfMemory => "kOutOfMemory",
        x if x == kNoInterface => "kNoInterface",
        _ => "an unknown result",
    };
    format!("{name} ({r})")
}

impl Parts {
    /// Create the class `cid` of `module` and initialise its component and controller.
    pub fn new(module: &Module, cid: &TUID) -> std::result::Result<Parts, PartsError> {
        let host = ComWrapper::new(HostApp);
        let context = host
            .as_com_ref::<vst3::Steinberg::Vst::IHostApplication>()
            .map_or(std::ptr::null_mut(), |r| r.as_ptr().cast::<FUnknown>());
        let create = |cid: &TUID, iid: &[u8; 16]| -> Option<*mut c_void> {
            let mut obj = std::ptr::null_mut();
            // SAFETY: the factory's createInstance with a class id and interface id of 16
            // bytes each; on success `obj` holds a reference the caller owns.
            let r = unsafe {
                module
                    .factory
                    .createInstance(cid.as_ptr(), iid.as_ptr().cast(), &mut obj)
            };
            (r == kResultOk && !obj.is_null()).then_some(obj)
        };
        let component = create(cid, &IComponent::IID)
            // SAFETY: createInstance returned an IComponent with a reference for us.
            .and_then(|p| unsafe { ComPtr::from_raw(p.cast::<IComponent>()) })
            .ok_or_else(|| PartsError::Refused("its factory refused to create it".into()))?;
        // SAFETY: initialize on the new component with a host context that outlives it
        // (kept in `Parts`, which terminates the component first).
        let r = unsafe { component.initialize(context) };
        if r != kResultOk {
            return Err(PartsError::Init(format!(
                "its initialize failed with {}",
                result_text(r)
            )));
        }
        let terminate = |c: &ComPtr<IComponent>| {
            // SAFETY: the component was initialised above.
            unsafe { c.terminate() };
        };
        let Some(processor) = component.cast::<IAudioProcessor>() else {
            terminate(&component);
            return Err(PartsError::Refused(
                "its component is no audio processor (no IAudioProcessor)".into(),
            ));
        };
        let handler = ComWrapper::new(Handler::default());
        let mut parts = Parts {
            component,
            processor,
            controller: None,
            separate: None,
            handler,
            _host: host,
        };
        if let Some(single) = parts.component.cast::<IEditController>() {
            parts.controller = Some(single);
        } else {
            let mut ccid: TUID = [0; 16];
            // SAFETY: the component is initialised; `ccid` is a TUID to fill.
            let named = unsafe { parts.component.getControllerClassId(&mut ccid) } == kResultOk;
            let ctl = named
                .then(|| create(&ccid, &IEditController::IID))
                .flatten()
                // SAFETY: createInstance returned an IEditController with a reference for us.
                .and_then(|p| unsafe { ComPtr::from_raw(p.cast::<IEditController>()) });
            // SAFETY: initialize on the new controller with the same host context.
            if let Some(ctl) = ctl.filter(|c| unsafe { c.initialize(context) } == kResultOk) {
                parts.connect(&ctl, true);
                parts.separate = Some(ctl.clone());
                parts.controller = Some(ctl);
                if let Ok(state) = parts.component_state() {
                    parts.controller_takes(&state);
                }
            }
        }
        if let (Some(ctl), Some(h)) = (
            &parts.controller,
            parts.handler.as_com_ref::<IComponentHandler>(),
        ) {
            // SAFETY: a main-thread call on the initialised controller; the handler lives as
            // long as `Parts`, and the controller takes its own reference.
            unsafe { ctl.setComponentHandler(h.as_ptr()) };
        }
        Ok(parts)
    }

    /// Connect (or disconnect) a separate controller and the component both ways.
    fn connect(&self, ctl: &ComPtr<IEditController>, on: bool) {
        let (Some(a), Some(b)) = (
            self.component.cast::<IConnectionPoint>(),
            ctl.cast::<IConnectionPoint>(),
        ) else {
            return;
        };
        // SAFETY: both are initialised objects of this plugin; main-thread calls.
        unsafe {
            if on {
                a.connect(b.as_ptr());
                b.connect(a.as_ptr());
            } else {
                a.disconnect(b.as_ptr());
                b.disconnect(a.as_ptr());
            }
        }
    }

    /// The component's state, as `IComponent::getState` writes it.
    pub fn component_state(&self) -> std::result::Result<Vec<u8>, String> {
        let stream = ComWrapper::new(MemStream::default());
        let s = stream
            .as_com_ref::<IBStream>()
            .map_or(std::ptr::null_mut(), |r| r.as_ptr());
        // SAFETY: a main-thread call on the initialised component with a stream that lives
        // through it.
        let r = unsafe { self.component.getState(s) };
        if r != kResultOk {
            return Err(format!("its getState failed with {}", result_text(r)));
        }
        Ok(stream.bytes())
    }

    /// Give the component `state` (and a separate controller too, as the SDK says).
    pub fn set_component_state(&self, state: &[u8]) -> std::result::Result<(), String> {
        let stream = ComWrapper::new(MemStream::with(state));
        let s = stream
            .as_com_ref::<IBStream>()
            .map_or(std::ptr::null_mut(), |r| r.as_ptr());
        // SAFETY: as in `component_state`.
        let r = unsafe { self.component.setState(s) };
        if r != kResultOk {
            return Err(format!("its setState failed with {}", result_text(r)));
        }
        self.controller_takes(state);
        Ok(())
    }

    fn controller_takes(&self, state: &[u8]) {
        // An empty state (a plugin without parameters) is not passed on: DPF asserts on it.
        let Some(ctl) = self.separate.as_ref().filter(|_| !state.is_empty()) else {
            return;
        };
        let stream = ComWrapper::new(MemStream::with(state));
        if let Some(s) = stream.as_com_ref::<IBStream>() {
            // SAFETY: a main-thread call on the initialised controller.
            unsafe { ctl.setComponentState(s.as_ptr()) };
        }
    }
}

impl Drop for Parts {
    fn drop(&mut self) {
        if let Some(ctl) = self.separate.take() {
            self.connect(&ctl, false);
            // SAFETY: the controller was initialised in `new`.
            unsafe { ctl.terminate() };
        }
        // SAFETY: a controller that is the component is released with it, not terminated
        // twice; setComponentHandler(null) lets it drop our handler first.
        unsafe {
            if let Some(ctl) = &self.controller {
                ctl.setComponentHandler(std::ptr::null_mut());
            }
            self.component.terminate();
        }
    }
}
