//! What is installed: every `.clap` file on the CLAP search path (CLAP_PATH, then ~/.clap and
//! /usr/lib/clap, as the CLAP spec's entry.h gives them for Linux), each plugin its factory
//! offers (one file may hold several), and whether xrunlab can host it. A plugin is described
//! by creating and initialising it once with a host of our own and asking its extensions for
//! its audio ports, note ports and parameters, then destroying it.

use super::host::HostShared;
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

/// One parameter: its CLAP id and what `name=value` matches.
#[derive(Debug, Clone)]
pub struct Param {
    pub id: clap_id,
    /// Its port in the plugin's description (what `Plugin::set_control` names).
    pub port: usize,
    pub symbol: String,
    pub name: String,
    pub min: f64,
    pub max: f64,
}

/// One plugin found on the search path.
#[derive(Clone)]
pub struct Found {
    pub module: Option<&'static Module>,
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

/// Every `*.clap` file under `dir`, a few levels deep (vendors put theirs in folders).
fn clap_files(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.extension().is_some_and(|e| e == "clap") && p.is_file() {
            out.push(p);
        } else if p.is_dir() && depth > 0 {
            clap_files(&p, depth - 1, out);
        }
    }
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
    // SAFETY: dlopen runs the library's constructors, which is what loading a plugin means;
    // the path is NUL-terminated. The handle is never closed (see `Module`).
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(format!("it does not load: {}", dl_error()));
    }
    // SAFETY: a symbol lookup in a handle just opened, with a NUL-terminated name.
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
    let factory = unsafe {
        if !init(c_path.as_ptr()) {
            return Err("its clap_entry init failed".into());
        }
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
        ports.push(PortDesc {
            index: ports.len(),
            name: symbol.clone(),
            symbol,
            kind,
            input,
            optional: false,
            default: None,
            minimum: None,
            maximum: None,
            unsupported_class: None,
        })
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
    unsafe {
        let p = module.create(host.host(), &id).unwrap_or(std::ptr::null());
        if p.is_null() {
            desc.unhostable = Some("its factory refused to create it".into());
        } else if !(*p).init.is_some_and(|f| f(p)) {
            init_failed = true;
            desc.unhostable = Some(init_failure(&host));
        } else {
            (desc.ports, params) = ports_and_params(p);
            if (*p).process.is_none() || (*p).activate.is_none() {
                desc.unhostable = Some("it has no process or activate function".into());
            }
        }
        if !p.is_null() {
            if let Some(destroy) = (*p).destroy {
                destroy(p);
            }
        }
    }
    Some(Found {
        module: Some(module),
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

/// Every plugin of the file at `path`, or the file as one unhostable entry saying why.
pub fn plugins_of(path: &Path) -> Vec<Found> {
    let module = match load(path) {
        Ok(m) => m,
        Err(why) => return vec![broken(path, why)],
    };
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
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Found {
        module: None,
        id: CString::default(),
        desc: PluginDesc {
            uri: path.display().to_string(),
            name: stem,
            class: String::new(),
            ports: Vec::new(),
            required_features: Vec::new(),
            latency_port: None,
            unhostable: Some(format!("{}: {why}", path.display())),
        },
        params: Vec::new(),
        init_failed: false,
    }
}

/// The plugins of the `.clap` files directly in `dir`, as chain elements know them: a file
/// holding one plugin by its path (`clap:/dir/X.clap`, found wherever the folder is), one
/// holding several by their ids, which must then be on the search path.
pub fn in_dir(dir: &Path) -> Vec<PluginDesc> {
    let mut files = Vec::new();
    clap_files(dir, 0, &mut files);
    let mut out = Vec::new();
    for file in files {
        let found = plugins_of(&file);
        let one = found.len() == 1;
        for f in found {
            let mut d = f.desc;
            if one && f.module.is_some() {
                d.uri = file.display().to_string();
            }
            out.push(d);
        }
    }
    out
}

/// Everything installed, sorted by identifier; probed once per process.
pub fn all() -> &'static [Found] {
    static ALL: OnceLock<Vec<Found>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut files = Vec::new();
        for d in search_dirs() {
            clap_files(&d, 3, &mut files);
        }
        let mut seen = std::collections::HashSet::new();
        files.retain(|f| seen.insert(f.canonicalize().unwrap_or_else(|_| f.clone())));
        let mut v: Vec<Found> = files.iter().flat_map(|f| plugins_of(f)).collect();
        // The first of an id on the search path wins, as CLAP_PATH comes first.
        let mut ids = std::collections::HashSet::new();
        v.retain(|f| f.module.is_none() || ids.insert(f.desc.uri.clone()));
        v.sort_by(|a, b| a.desc.uri.cmp(&b.desc.uri));
        v
    })
}

/// Find a plugin by id, by name (case-insensitive) or by the path of its `.clap` file (when
/// the file holds one). Unknown or ambiguous is the user's mistake (exit 2).
pub fn resolve(target: &str) -> Result<Found> {
    if target.ends_with(".clap") && target.contains('/') {
        let found = plugins_of(Path::new(target));
        return match found.as_slice() {
            [one] => Ok(one.clone()),
            many => Err(Error::usage(format!(
                "{target} holds {} CLAP plugins; name one by its id: {}",
                many.len(),
                many.iter()
                    .map(|f| format!("clap:{}", f.desc.uri))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        };
    }
    let all = all();
    if let Some(f) = all.iter().find(|f| f.desc.uri == target) {
        return Ok(f.clone());
    }
    let t = target.to_lowercase();
    let tail = |id: &str| id.rsplit(['.', '/']).next().unwrap_or(id).to_lowercase();
    for found in [
        all.iter()
            .filter(|f| f.desc.name.to_lowercase() == t)
            .collect::<Vec<_>>(),
        all.iter()
            .filter(|f| f.module.is_some() && tail(&f.desc.uri) == t)
            .collect(),
    ] {
        match found.as_slice() {
            [] => continue,
            [one] => return Ok((*one).clone()),
            many => {
                return Err(Error::usage(format!(
                    "clap:{target} names {} installed plugins; use the id: {}",
                    many.len(),
                    many.iter()
                        .map(|f| f.desc.uri.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        }
    }
    Err(Error::usage(crate::dsp::format::unknown_message(
        "CLAP", target,
    )))
}
