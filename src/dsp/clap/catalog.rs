//! What is installed: every `.clap` file on the CLAP search path (CLAP_PATH, then ~/.clap and
//! /usr/lib/clap, as the CLAP spec's entry.h gives them for Linux), each plugin its factory
//! offers (one file may hold several), and whether xrunlab can host it. A plugin is described
//! by creating and initialising it once with a host of our own and asking its extensions for
//! its audio ports, note ports and parameters, then destroying it. That probe runs in a
//! contained child process per file (`dsp::files::contained`): a file whose entry or plugin
//! crashes or hangs in `init` is listed as unhostable with why, and xrunlab goes on.

use super::host::HostShared;
use super::KIND;
use crate::dsp::contain::stage;
use crate::dsp::files;
use crate::dsp::format::{PluginDesc, PortDesc, PortKind};
use crate::error::{Error, Result};
use crate::rt::crash::{self, Label, Phase};
use clap_sys::entry::clap_plugin_entry;
use clap_sys::ext::audio_ports::{
    clap_audio_port_info, clap_plugin_audio_ports, CLAP_AUDIO_PORT_IS_MAIN, CLAP_EXT_AUDIO_PORTS,
};
use clap_sys::ext::note_ports::{clap_plugin_note_ports, CLAP_EXT_NOTE_PORTS};
use clap_sys::ext::params::{clap_param_info, clap_plugin_params, CLAP_EXT_PARAMS};
use clap_sys::factory::plugin_factory::{clap_plugin_factory, CLAP_PLUGIN_FACTORY_ID};
use clap_sys::host::clap_host;
use clap_sys::id::clap_id;
use clap_sys::plugin::clap_plugin;
use clap_sys::version::clap_version_is_compatible;
use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// A loaded `.clap` file: its entry initialised, never unloaded (plugins' threads and
/// static data may outlive any one instance, and a process hosts few files).
pub struct Module {
    pub path: PathBuf,
    factory: *const clap_plugin_factory,
}

// SAFETY: the factory is a table of functions CLAP requires to be thread-safe
// (`get_plugin_count`, `get_plugin_descriptor`, `create_plugin` may be called from any
// thread), and the module is never unloaded.
unsafe impl Send for Module {}
// SAFETY: as for Send: nothing in a `Module` is mutated after loading.
unsafe impl Sync for Module {}

impl Module {
    /// A new, uninitialised instance of the plugin `id` with `host`.
    ///
    /// # Safety
    /// `host` is a valid `clap_host` that outlives the plugin.
    pub unsafe fn create(&self, host: *const clap_host, id: &CStr) -> Option<*const clap_plugin> {
        // SAFETY: the factory's create_plugin is thread-safe (see `Module`); the caller keeps
        // `host` alive as long as the plugin.
        let p = unsafe { (*self.factory).create_plugin?(self.factory, host, id.as_ptr()) };
        (!p.is_null()).then_some(p)
    }
}

/// One audio port as the plugin declares it.
#[derive(Debug, Clone, Copy)]
pub struct AudioPort {
    pub channels: u32,
    pub main: bool,
}

/// One parameter, with its CLAP id.
pub type Param = crate::dsp::files::Param<clap_id>;

/// One plugin found on the search path.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct Found {
    /// The file it is in, when that file loaded (a probe child found it; this process loads
    /// the file only to instantiate the plugin).
    pub file: Option<PathBuf>,
    pub id: CString,
    pub desc: PluginDesc,
    pub params: Vec<Param>,
    /// Its `init` returned false when it was described: instantiating it reports that
    /// failure (exit 3) with the plugin's own log lines, rather than refusing it as unhostable.
    pub init_failed: bool,
}

/// The directories searched, in order.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("CLAP_PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".clap"));
    }
    dirs.push("/usr/lib/clap".into());
    dirs
}

/// Load `path` once per process: dlopen it, find `clap_entry`, initialise it and get its
/// plugin factory. The error says why it is not a CLAP plugin file.
pub fn load(path: &Path) -> std::result::Result<&'static Module, String> {
    type Cache = Mutex<HashMap<PathBuf, std::result::Result<&'static Module, String>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(hit) = cache.get(path) {
        return hit.clone();
    }
    let loaded = load_uncached(path).map(|m| &*Box::leak(Box::new(m)));
    cache.insert(path.to_path_buf(), loaded.clone());
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
    stage("dlopen (the library's constructors)");
    // SAFETY: dlopen runs the library's constructors, which is what loading a plugin means;
    // the path is NUL-terminated. The handle is never closed (see `Module`).
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(format!("it does not load: {}", dl_error()));
    }
    // SAFETY: a symbol lookup in a handle just opened, with a NUL-terminated name.
    stage("dlsym(clap_entry)");
    let entry = unsafe { libc::dlsym(handle, c"clap_entry".as_ptr()) } as *const clap_plugin_entry;
    // SAFETY: `clap_entry` is, by the CLAP ABI, a `clap_plugin_entry` that lives as long as
    // the library, which is never unloaded.
    let Some(entry) = (unsafe { entry.as_ref() }) else {
        return Err("it is a shared library but not a CLAP plugin (no clap_entry symbol)".into());
    };
    if !clap_version_is_compatible(entry.clap_version) {
        let v = entry.clap_version;
        return Err(format!(
            "it is built for CLAP {}.{}.{}, which this host cannot load",
            v.major, v.minor, v.revision
        ));
    }
    let (Some(init), Some(get_factory)) = (entry.init, entry.get_factory) else {
        return Err("its clap_entry has no init or get_factory".into());
    };
    // SAFETY: the entry's init is called once per process with the file's path, as CLAP
    // requires before anything else; get_factory after it.
    stage("clap_entry.init");
    let factory = unsafe {
        if !init(c_path.as_ptr()) {
            return Err("its clap_entry init failed".into());
        }
        stage("clap_entry.get_factory");
        get_factory(CLAP_PLUGIN_FACTORY_ID.as_ptr()) as *const clap_plugin_factory
    };
    if factory.is_null() {
        return Err("it offers no plugin factory".into());
    }
    Ok(Module {
        path: path.to_path_buf(),
        factory,
    })
}

/// The text of a C string the plugin owns (empty when null).
pub(super) fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: CLAP strings are NUL-terminated and live as long as their descriptor.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The extension `id` of a live plugin, or null.
///
/// # Safety
/// `p` is a live, initialised plugin and `T` the struct the extension `id` names.
pub(super) unsafe fn extension<T>(p: *const clap_plugin, id: &CStr) -> Option<&'static T> {
    // SAFETY: the caller's contract; the plugin's extension table lives as long as it does
    // (callers do not keep the reference past the instance).
    unsafe {
        let f = (*p).get_extension?;
        (f(p, id.as_ptr()) as *const T).as_ref()
    }
}

/// The audio ports of a live plugin on one side.
///
/// # Safety
/// `p` is a live, initialised plugin, called from its main thread.
pub(super) unsafe fn audio_ports(p: *const clap_plugin, input: bool) -> Vec<AudioPort> {
    // SAFETY: the caller's contract.
    let Some(ext) = (unsafe { extension::<clap_plugin_audio_ports>(p, CLAP_EXT_AUDIO_PORTS) })
    else {
        return Vec::new();
    };
    let (Some(count), Some(get)) = (ext.count, ext.get) else {
        return Vec::new();
    };
    // SAFETY: the plugin's own functions on the plugin; `info` is a valid out-struct.
    unsafe {
        (0..count(p, input))
            .filter_map(|i| {
                let mut info: clap_audio_port_info = std::mem::zeroed();
                get(p, i, input, &mut info).then_some(AudioPort {
                    channels: info.channel_count,
                    main: info.flags & CLAP_AUDIO_PORT_IS_MAIN != 0,
                })
            })
            .collect()
    }
}

/// A parameter's name as `name=value` takes it: lower case, runs of anything but letters and
/// digits as one `_`.
pub fn symbol_of(name: &str) -> String {
    let mut s = String::new();
    for c in name.trim().chars() {
        if c.is_alphanumeric() {
            s.extend(c.to_lowercase());
        } else if !s.ends_with('_') {
            s.push('_');
        }
    }
    s.trim_end_matches('_').to_string()
}

/// What a probe of one plugin found: ports, parameters, note inputs.
///
/// # Safety
/// `p` is a live, initialised plugin, called from its main thread.
unsafe fn ports_and_params(p: *const clap_plugin) -> (Vec<PortDesc>, Vec<Param>) {
    let mut ports = Vec::new();
    let port = |ports: &mut Vec<PortDesc>, symbol: String, kind, input| {
        ports.push(PortDesc::signal(ports.len(), symbol, kind, input))
    };
    for input in [true, false] {
        let side = if input { "in" } else { "out" };
        // SAFETY: the caller's contract.
        for (k, a) in unsafe { audio_ports(p, input) }.iter().enumerate() {
            for c in 0..a.channels {
                port(&mut ports, format!("{side}{k}.{c}"), PortKind::Audio, input);
            }
        }
        // SAFETY: the caller's contract.
        let notes = unsafe { extension::<clap_plugin_note_ports>(p, CLAP_EXT_NOTE_PORTS) };
        // SAFETY: the plugin's own function.
        let n = notes
            .and_then(|e| e.count)
            .map_or(0, |f| unsafe { f(p, input) });
        for k in 0..n {
            port(
                &mut ports,
                format!("notes_{side}{k}"),
                PortKind::AtomSequence,
                input,
            );
        }
    }
    let mut params = Vec::new();
    // SAFETY: the caller's contract.
    let ext = unsafe { extension::<clap_plugin_params>(p, CLAP_EXT_PARAMS) };
    if let Some((count, get_info)) = ext.and_then(|e| Some((e.count?, e.get_info?))) {
        // SAFETY: the plugin's own functions; `info` is a valid out-struct.
        unsafe {
            for i in 0..count(p) {
                let mut info: clap_param_info = std::mem::zeroed();
                if !get_info(p, i, &mut info) {
                    continue;
                }
                let name = text(info.name.as_ptr());
                let readonly = info.flags & clap_sys::ext::params::CLAP_PARAM_IS_READONLY != 0;
                ports.push(PortDesc {
                    index: ports.len(),
                    symbol: symbol_of(&name),
                    name: name.clone(),
                    kind: PortKind::Control,
                    input: !readonly,
                    optional: true,
                    default: Some(info.default_value as f32),
                    minimum: Some(info.min_value as f32),
                    maximum: Some(info.max_value as f32),
                    steps: (info.flags & clap_sys::ext::params::CLAP_PARAM_IS_STEPPED != 0)
                        .then(|| (info.max_value - info.min_value).round().max(1.0) as u32),
                    unsupported_class: None,
                });
                if !readonly {
                    params.push(Param {
                        id: info.id,
                        port: ports.len() - 1,
                        symbol: symbol_of(&name),
                        name,
                        min: info.min_value,
                        max: info.max_value,
                    });
                }
            }
        }
    }
    (ports, params)
}

/// Create, initialise, describe and destroy the plugin `index` of `module`.
fn probe(module: &'static Module, index: u32) -> Option<Found> {
    // SAFETY: the factory's functions are thread-safe (see `Module`); the descriptor lives
    // as long as the module.
    stage(&format!("its factory's get_plugin_descriptor({index})"));
    let d = unsafe {
        let f = &*module.factory;
        f.get_plugin_descriptor?(module.factory, index).as_ref()?
    };
    let id = CString::new(text(d.id)).ok()?;
    let name = text(d.name);
    let class = {
        let mut v = Vec::new();
        let mut f = d.features;
        // SAFETY: `features` is a null-terminated array of C strings (or null).
        unsafe {
            while !f.is_null() && !(*f).is_null() && v.len() < 8 {
                v.push(text(*f));
                f = f.add(1);
            }
        }
        v.join(", ")
    };
    let mut desc = PluginDesc {
        uri: id.to_string_lossy().into_owned(),
        name: name.clone(),
        class,
        ports: Vec::new(),
        required_features: Vec::new(),
        latency_port: None,
        unhostable: None,
    };
    let mut params = Vec::new();
    let mut init_failed = false;
    let host = HostShared::new();
    let label = Label::new(&format!("clap:{} ({name})", desc.uri));
    let _in_plugin = crash::enter(label, Phase::Instantiating);
    // SAFETY: create_plugin with a live host that outlives the plugin (destroyed below);
    // init, the extension queries and destroy are main-thread calls made from this thread.
    let plugin = desc.uri.clone();
    unsafe {
        stage(&format!("clap_plugin_factory.create_plugin ({plugin})"));
        let p = module.create(host.host(), &id).unwrap_or(std::ptr::null());
        stage(&format!("clap_plugin.init ({plugin})"));
        if p.is_null() {
            desc.unhostable = Some("its factory refused to create it".into());
        } else if !(*p).init.is_some_and(|f| f(p)) {
            init_failed = true;
            desc.unhostable = Some(init_failure(&host));
        } else {
            stage(&format!("describing {plugin} (its extensions)"));
            (desc.ports, params) = ports_and_params(p);
            if (*p).process.is_none() || (*p).activate.is_none() {
                desc.unhostable = Some("it has no process or activate function".into());
            }
        }
        if !p.is_null() {
            stage(&format!("clap_plugin.destroy ({plugin})"));
            if let Some(destroy) = (*p).destroy {
                destroy(p);
            }
        }
    }
    Some(Found {
        file: Some(module.path.clone()),
        id,
        desc,
        params,
        init_failed,
    })
}

/// The reason an `init` that returned false gives, with what the plugin logged.
pub(super) fn init_failure(host: &HostShared) -> String {
    let lines = host.log_lines();
    if lines.is_empty() {
        "its init failed (it logged no reason)".into()
    } else {
        format!("its init failed: {}", lines.join("; "))
    }
}

/// Every plugin of the file at `path`, or the file as one unhostable entry saying why;
/// probed in a contained child, once per process.
pub fn plugins_of(path: &Path) -> Vec<Found> {
    files::contained(&KIND, path, probe_file, broken)
}

/// The probe child's side (`plugins probe-child --format clap`): probe `file` here and
/// write what it holds into `dir`.
pub fn probe_child(dir: &Path, file: &Path) -> Result<()> {
    files::probe_child(dir, file, probe_file)
}

/// Every plugin of the file at `path` probed in this process (the probe child's work).
fn probe_file(path: &Path) -> Vec<Found> {
    let module = match load(path) {
        Ok(m) => m,
        Err(why) => return vec![broken(path, why)],
    };
    stage("its factory's get_plugin_count");
    // SAFETY: the factory's count is thread-safe (see `Module`).
    let n = unsafe {
        (*module.factory)
            .get_plugin_count
            .map_or(0, |f| f(module.factory))
    };
    if n == 0 {
        return vec![broken(path, "its factory offers no plugins".into())];
    }
    (0..n).filter_map(|i| probe(module, i)).collect()
}

fn broken(path: &Path, why: String) -> Found {
    Found {
        file: None,
        id: CString::default(),
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

/// The plugins of the `.clap` files directly in `dir` (`dsp::files::in_dir`): a file holding
/// one plugin by its path (`clap:/dir/X.clap`), one holding several by their ids.
pub fn in_dir(dir: &Path) -> Vec<PluginDesc> {
    files::in_dir(&KIND, dir, plugins_of)
}

/// Everything installed, sorted by identifier; probed once per process.
pub fn all() -> &'static [Found] {
    static ALL: OnceLock<Vec<Found>> = OnceLock::new();
    ALL.get_or_init(|| files::catalog(&KIND, search_dirs(), plugins_of))
}

/// Find a plugin by id, by name (case-insensitive), by the last part of its id, or by the
/// path of its `.clap` file (when the file holds one). Unknown or ambiguous is the user's
/// mistake (exit 2).
pub fn resolve(target: &str) -> Result<Found> {
    if let Some(one) = files::by_path(&KIND, target, plugins_of) {
        return one;
    }
    let all = all();
    if let Some(f) = all.iter().find(|f| f.desc.uri == target) {
        return Ok(f.clone());
    }
    let t = target.to_lowercase();
    let tail = |id: &str| id.rsplit(['.', '/']).next().unwrap_or(id).to_lowercase();
    let named: Vec<&Found> = all
        .iter()
        .filter(|f| f.desc.name.to_lowercase() == t)
        .collect();
    let tails: Vec<&Found> = all
        .iter()
        .filter(|f| f.file.is_some() && tail(&f.desc.uri) == t)
        .collect();
    files::the_one(&KIND, target, &named)
        .or_else(|| files::the_one(&KIND, target, &tails))
        .unwrap_or_else(|| {
            Err(Error::usage(crate::dsp::format::unknown_message(
                "CLAP", target,
            )))
        })
}
