//! What is installed: every `.vst3` bundle on the search path (VST3_PATH — xrunlab's own
//! override, as CLAP_PATH is CLAP's — then ~/.vst3, /usr/lib/vst3 and /usr/local/lib/vst3, the
//! VST3 SDK's Linux locations), the binary of each for this machine
//! (`Contents/<arch>-linux/*.so`), each "Audio Module Class" its factory offers, and whether
//! xrunlab can host it. A class is described by creating and initialising it once, asking its
//! component for its buses and its controller for its parameters, then terminating it. That
//! probe runs in a contained child process per bundle (`dsp::files::contained`): a bundle
//! whose entry or class crashes or hangs while loading or initialising is listed as
//! unhostable with why, and xrunlab goes on.

use super::host::wide_text;
use super::parts::{self, audio_buses, Module, Parts};
use super::KIND;
use crate::dsp::clap as clap_format;
use crate::dsp::contain::stage;
use crate::dsp::files;
use crate::dsp::format::{PluginDesc, PortDesc, PortKind};
use crate::error::{Error, Result};
use crate::rt::crash::{self, Label, Phase};
use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use vst3::ComPtr;
use vst3::Steinberg::Vst::{
    BusDirections_::{kInput, kOutput},
    IComponentTrait, IEditControllerTrait,
    MediaTypes_::kEvent,
    ParamID, ParameterInfo,
    ParameterInfo_::ParameterFlags_::{kIsHidden, kIsProgramChange, kIsReadOnly},
};
use vst3::Steinberg::{
    kResultOk, IPluginFactory, IPluginFactory2, IPluginFactory2Trait, IPluginFactoryTrait,
    PClassInfo, PClassInfo2, TUID,
};

/// The class category of a plugin's processor (the SDK's kVstAudioEffectClass).
const AUDIO_MODULE_CLASS: &str = "Audio Module Class";

/// One parameter, with its VST3 id; `min` and `max` are its plain values at normalized 0
/// and 1, in order.
pub type Param = crate::dsp::files::Param<ParamID>;

/// One plugin class found on the search path.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct Found {
    /// Its bundle, when that loaded (a probe child found it; this process loads the bundle
    /// only to instantiate the class).
    pub file: Option<PathBuf>,
    pub cid: TUID,
    pub desc: PluginDesc,
    pub params: Vec<Param>,
    /// Its `initialize` failed when it was described: instantiating it reports that (exit 3)
    /// rather than refusing it as unhostable.
    pub init_failed: bool,
}

/// The directories searched, in order.
pub fn search_dirs() -> Vec<PathBuf> {
    // Set, it replaces the default places, as LV2_PATH does for LV2: the audit lists a
    // folder's plugins by pointing it there, and a test can see only its fixtures.
    if let Some(p) = std::env::var_os("VST3_PATH").filter(|p| !p.is_empty()) {
        return std::env::split_paths(&p).collect();
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".vst3"));
    }
    dirs.push("/usr/lib/vst3".into());
    dirs.push("/usr/local/lib/vst3".into());
    dirs
}

/// The binary of a bundle for this machine: `Contents/<arch>-linux/<name>.so`, or the only
/// `.so` there; a `.vst3` that is a file is the binary itself.
fn binary_of(bundle: &Path) -> std::result::Result<PathBuf, String> {
    if bundle.is_file() {
        return Ok(bundle.to_path_buf());
    }
    if !bundle.is_dir() {
        return Err("no such file or folder".into());
    }
    let arch = format!("{}-linux", std::env::consts::ARCH);
    let dir = bundle.join("Contents").join(&arch);
    let stem = bundle.file_stem().unwrap_or_default();
    let named = dir.join(stem).with_extension("so");
    if named.is_file() {
        return Ok(named);
    }
    let mut sos: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "so"))
                .collect()
        })
        .unwrap_or_default();
    sos.sort();
    sos.into_iter()
        .next()
        .ok_or_else(|| format!("the bundle has no binary for this machine (Contents/{arch}/*.so)"))
}

/// Load the binary of `bundle` once per process: dlopen it, call `ModuleEntry` and get its
/// factory. The error says why it is not a VST3 plugin.
pub fn load(bundle: &Path) -> std::result::Result<&'static Module, String> {
    type Cache = Mutex<HashMap<PathBuf, std::result::Result<&'static Module, String>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(hit) = cache.get(bundle) {
        return hit.clone();
    }
    let loaded = binary_of(bundle)
        .and_then(|b| load_uncached(&b))
        .map(|m| &*Box::leak(Box::new(m)));
    cache.insert(bundle.to_path_buf(), loaded.clone());
    loaded
}

fn dl_error() -> String {
    // SAFETY: dlerror returns a NUL-terminated message or null, valid until the next dl call
    // on this thread; it is copied at once.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown dlopen error".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

fn load_uncached(path: &Path) -> std::result::Result<Module, String> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| "a NUL in its path")?;
    // SAFETY: dlopen runs the library's constructors, which is what loading a plugin means;
    // the path is NUL-terminated. The handle is never closed (see `Module`).
    stage("dlopen (the library's constructors)");
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(format!("it does not load: {}", dl_error()));
    }
    type Entry = unsafe extern "C" fn(*mut c_void) -> bool;
    type GetFactory = unsafe extern "system" fn() -> *mut IPluginFactory;
    // SAFETY: symbol lookups in a handle just opened, with NUL-terminated names.
    let (entry, get_factory) = unsafe {
        (
            libc::dlsym(handle, c"ModuleEntry".as_ptr()),
            libc::dlsym(handle, c"GetPluginFactory".as_ptr()),
        )
    };
    if get_factory.is_null() {
        return Err(
            "it is a shared library but not a VST3 plugin (no GetPluginFactory symbol)".into(),
        );
    }
    if !entry.is_null() {
        // SAFETY: on Linux, `ModuleEntry(void* sharedLibraryHandle)` is the VST3 module's
        // initialisation, called once before its factory; the symbol has that type by the
        // VST3 ABI.
        let entry: Entry = unsafe { std::mem::transmute::<*mut c_void, Entry>(entry) };
        stage("ModuleEntry");
        // SAFETY: as above; the handle is the one the library was opened with.
        if !unsafe { entry(handle) } {
            return Err("its ModuleEntry failed".into());
        }
    }
    // SAFETY: `GetPluginFactory` has this type by the VST3 ABI and returns a factory with a
    // reference the caller owns (or null).
    stage("GetPluginFactory");
    let factory = unsafe {
        let f: GetFactory = std::mem::transmute::<*mut c_void, GetFactory>(get_factory);
        ComPtr::from_raw(f())
    };
    let factory = factory.ok_or("its GetPluginFactory returned no factory")?;
    Ok(Module {
        path: path.to_path_buf(),
        factory,
    })
}

/// A fixed-size C string field as text.
fn c_text(s: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = s
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A class id as VST3 writes it (moduleinfo.json, hosts' caches): 32 hex digits.
pub fn cid_text(cid: &TUID) -> String {
    cid.iter().map(|&b| format!("{:02X}", b as u8)).collect()
}

/// What a probe of one class found: ports (audio channels, event buses, parameters) and the
/// parameters a host may set.
///
/// # Safety
/// `parts` holds an initialised component, called from its main thread.
unsafe fn ports_and_params(parts: &Parts) -> (Vec<PortDesc>, Vec<Param>) {
    let mut ports = Vec::new();
    let port = |ports: &mut Vec<PortDesc>, symbol: String, kind, input| {
        ports.push(PortDesc::signal(ports.len(), symbol, kind, input))
    };
    for input in [true, false] {
        let side = if input { "in" } else { "out" };
        // SAFETY: the caller's contract.
        for (k, b) in unsafe { audio_buses(parts, input) }.iter().enumerate() {
            for c in 0..b.channels {
                port(&mut ports, format!("{side}{k}.{c}"), PortKind::Audio, input);
            }
        }
        let dir = if input { kInput } else { kOutput } as i32;
        // SAFETY: the caller's contract.
        let events = unsafe { parts.component.getBusCount(kEvent as i32, dir) };
        for k in 0..events.max(0) {
            port(
                &mut ports,
                format!("events_{side}{k}"),
                PortKind::AtomSequence,
                input,
            );
        }
    }
    let mut params = Vec::new();
    let Some(ctl) = &parts.controller else {
        return (ports, params);
    };
    // SAFETY: the controller is initialised (Parts); `info` is a valid out-struct; the
    // conversions are main-thread calls from the thread that created it.
    unsafe {
        for i in 0..ctl.getParameterCount() {
            let mut info: ParameterInfo = std::mem::zeroed();
            if ctl.getParameterInfo(i, &mut info) != kResultOk
                || info.flags & (kIsHidden | kIsProgramChange) != 0
            {
                continue;
            }
            let name = wide_text(&info.title);
            let (a, b) = (
                ctl.normalizedParamToPlain(info.id, 0.0),
                ctl.normalizedParamToPlain(info.id, 1.0),
            );
            let (min, max) = if a <= b { (a, b) } else { (b, a) };
            let default = ctl.normalizedParamToPlain(info.id, info.defaultNormalizedValue);
            let readonly = info.flags & kIsReadOnly != 0;
            let symbol = clap_format::catalog::symbol_of(&name);
            let index = ports.len();
            ports.push(PortDesc {
                index,
                symbol: symbol.clone(),
                name: name.clone(),
                kind: PortKind::Control,
                input: !readonly,
                optional: true,
                default: Some(default as f32),
                minimum: Some(min as f32),
                maximum: Some(max as f32),
                steps: u32::try_from(info.stepCount).ok().filter(|&n| n > 0),
                unsupported_class: None,
            });
            if !readonly {
                params.push(Param {
                    id: info.id,
                    port: index,
                    symbol,
                    name,
                    min,
                    max,
                });
            }
        }
    }
    (ports, params)
}

/// Create, initialise, describe and terminate the class `info` of `module`.
fn probe(bundle: &Path, module: &'static Module, index: i32, info: &PClassInfo) -> Found {
    stage(&format!("IPluginFactory2::getClassInfo2({index})"));
    // SAFETY: factory queries are thread-safe (see `Module`); `info2` is a valid out-struct.
    let class = unsafe {
        module
            .factory
            .cast::<IPluginFactory2>()
            .and_then(|f2| {
                let mut info2: PClassInfo2 = std::mem::zeroed();
                (f2.getClassInfo2(index, &mut info2) == kResultOk)
                    .then(|| c_text(&info2.subCategories))
            })
            .unwrap_or_else(|| c_text(&info.category))
    };
    let mut desc = PluginDesc {
        uri: cid_text(&info.cid),
        name: c_text(&info.name),
        class,
        ports: Vec::new(),
        required_features: Vec::new(),
        latency_port: None,
        unhostable: None,
    };
    let label = Label::new(&format!("vst3:{} ({})", desc.uri, desc.name));
    let _in_plugin = crash::enter(label, Phase::Instantiating);
    let mut params = Vec::new();
    let mut init_failed = false;
    stage(&format!(
        "creating and initialising class {} (IComponent/IEditController::initialize)",
        desc.uri
    ));
    match Parts::new(module, &info.cid) {
        Ok(parts) => {
            stage(&format!(
                "describing class {} (buses, parameters)",
                desc.uri
            ));
            // SAFETY: the parts are initialised, and this thread created them.
            (desc.ports, params) = unsafe { ports_and_params(&parts) };
        }
        Err(parts::PartsError::Init(why)) => {
            init_failed = true;
            desc.unhostable = Some(why);
        }
        Err(parts::PartsError::Refused(why)) => desc.unhostable = Some(why),
    }
    stage("terminating the class");
    Found {
        file: Some(bundle.to_path_buf()),
        cid: info.cid,
        desc,
        params,
        init_failed,
    }
}

/// Every audio class of the bundle at `path`, or the bundle as one unhostable entry saying
/// why.
/// Probed in a contained child, once per process.
pub fn plugins_of(path: &Path) -> Vec<Found> {
    files::contained(&KIND, path, probe_bundle, broken)
}

/// The probe child's side (`plugins probe-child --format vst3`): probe the bundle `file`
/// here and write what it holds into `dir`.
pub fn probe_child(dir: &Path, file: &Path) -> Result<()> {
    files::probe_child(dir, file, probe_bundle)
}

/// Every audio class of the bundle at `path` probed in this process (the probe child's work).
fn probe_bundle(path: &Path) -> Vec<Found> {
    let module = match load(path) {
        Ok(m) => m,
        Err(why) => return vec![broken(path, why)],
    };
    let f = &module.factory;
    stage("IPluginFactory::getClassInfo");
    // SAFETY: factory queries are thread-safe (see `Module`); `info` is a valid out-struct.
    let classes: Vec<(i32, PClassInfo)> = unsafe {
        (0..f.countClasses())
            .filter_map(|i| {
                let mut info: PClassInfo = std::mem::zeroed();
                (f.getClassInfo(i, &mut info) == kResultOk
                    && c_text(&info.category) == AUDIO_MODULE_CLASS)
                    .then_some((i, info))
            })
            .collect()
    };
    if classes.is_empty() {
        return vec![broken(
            path,
            "its factory offers no audio module class".into(),
        )];
    }
    classes
        .iter()
        .map(|(i, info)| probe(path, module, *i, info))
        .collect()
}

fn broken(path: &Path, why: String) -> Found {
    Found {
        file: None,
        cid: [0; 16],
        desc: files::broken(path, why),
        params: Vec::new(),
        init_failed: false,
    }
}

impl files::Probed for Found {
    fn desc(&self) -> &PluginDesc {
        &self.desc
    }
    fn into_desc(self) -> PluginDesc {
        self.desc
    }
    fn loaded(&self) -> bool {
        self.file.is_some()
    }
}

/// The plugins of the `.vst3` bundles directly in `dir` (`dsp::files::in_dir`): a bundle
/// holding one plugin by its path (`vst3:/dir/X.vst3`), one holding several by class id.
pub fn in_dir(dir: &Path) -> Vec<PluginDesc> {
    files::in_dir(&KIND, dir, plugins_of)
}

/// Everything installed, sorted by class id; probed once per process.
pub fn all() -> &'static [Found] {
    static ALL: OnceLock<Vec<Found>> = OnceLock::new();
    ALL.get_or_init(|| files::catalog(&KIND, search_dirs(), plugins_of))
}

/// Find a plugin by class id (32 hex digits, any case), by name (case-insensitive) or by the
/// path of its `.vst3` bundle (when it holds one). Unknown or ambiguous is the user's
/// mistake (exit 2).
pub fn resolve(target: &str) -> Result<Found> {
    if let Some(one) = files::by_path(&KIND, target, plugins_of) {
        return one;
    }
    let all = all();
    if let Some(f) = all.iter().find(|f| f.desc.uri.eq_ignore_ascii_case(target)) {
        return Ok(f.clone());
    }
    let t = target.to_lowercase();
    let named: Vec<&Found> = all
        .iter()
        .filter(|f| f.desc.name.to_lowercase() == t)
        .collect();
    files::the_one(&KIND, target, &named).unwrap_or_else(|| {
        Err(Error::usage(crate::dsp::format::unknown_message(
            "VST3", target,
        )))
    })
}
