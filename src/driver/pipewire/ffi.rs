//! The few libpipewire-0.3 calls the profiler adapter makes, loaded with dlopen when
//! `watch` first asks for PipeWire: xrunlab neither links libpipewire nor needs its headers
//! or libclang to build, and runs where PipeWire is absent (as libjack is loaded,
//! docs/ARCHITECTURE.md "watch"). The structs are libpipewire's public ABI (pipewire/core.h,
//! extensions/profiler.h, spa/utils/hook.h), stable across 0.3.x and 1.x; interface methods
//! (`pw_core_get_registry`, `pw_registry_bind`…) are C macros over a method table, called
//! here through that table as the macros do.

use std::ffi::{c_char, c_int, c_void};

#[repr(C)]
pub struct SpaList {
    next: *mut SpaList,
    prev: *mut SpaList,
}

#[repr(C)]
pub struct SpaCallbacks {
    pub funcs: *const c_void,
    pub data: *mut c_void,
}

/// `struct spa_hook`: a listener's link in an object's list; zeroed until added.
#[repr(C)]
pub struct SpaHook {
    link: SpaList,
    cb: SpaCallbacks,
    removed: Option<unsafe extern "C" fn(*mut SpaHook)>,
    priv_: *mut c_void,
}

impl SpaHook {
    pub fn zeroed() -> SpaHook {
        SpaHook {
            link: SpaList {
                next: std::ptr::null_mut(),
                prev: std::ptr::null_mut(),
            },
            cb: SpaCallbacks {
                funcs: std::ptr::null(),
                data: std::ptr::null_mut(),
            },
            removed: None,
            priv_: std::ptr::null_mut(),
        }
    }
}

#[repr(C)]
pub struct SpaInterface {
    pub type_: *const c_char,
    pub version: u32,
    pub cb: SpaCallbacks,
}

#[repr(C)]
pub struct SpaPod {
    pub size: u32,
    pub type_: u32,
}

#[repr(C)]
pub struct CoreInfo {
    pub id: u32,
    pub cookie: u32,
    pub user_name: *const c_char,
    pub host_name: *const c_char,
    pub version: *const c_char,
    pub name: *const c_char,
    pub change_mask: u64,
    pub props: *const c_void,
}

pub type Data = *mut c_void;

#[repr(C)]
pub struct CoreEvents {
    pub version: u32,
    pub info: Option<unsafe extern "C" fn(Data, *const CoreInfo)>,
    pub done: Option<unsafe extern "C" fn(Data, u32, c_int)>,
    pub ping: Option<unsafe extern "C" fn(Data, u32, c_int)>,
    pub error: Option<unsafe extern "C" fn(Data, u32, c_int, c_int, *const c_char)>,
    pub remove_id: Option<unsafe extern "C" fn(Data, u32)>,
    pub bound_id: Option<unsafe extern "C" fn(Data, u32, u32)>,
    pub add_mem: Option<unsafe extern "C" fn(Data, u32, u32, c_int, u32)>,
    pub remove_mem: Option<unsafe extern "C" fn(Data, u32)>,
}

#[repr(C)]
pub struct CoreMethods {
    pub version: u32,
    pub add_listener:
        Option<unsafe extern "C" fn(Data, *mut SpaHook, *const CoreEvents, Data) -> c_int>,
    pub hello: Option<unsafe extern "C" fn(Data, u32) -> c_int>,
    pub sync: Option<unsafe extern "C" fn(Data, u32, c_int) -> c_int>,
    pub pong: Option<unsafe extern "C" fn(Data, u32, c_int) -> c_int>,
    pub error: Option<unsafe extern "C" fn(Data, u32, c_int, c_int, *const c_char) -> c_int>,
    pub get_registry: Option<unsafe extern "C" fn(Data, u32, usize) -> *mut c_void>,
}

#[repr(C)]
pub struct RegistryEvents {
    pub version: u32,
    pub global: Option<unsafe extern "C" fn(Data, u32, u32, *const c_char, u32, *const c_void)>,
    pub global_remove: Option<unsafe extern "C" fn(Data, u32)>,
}

#[repr(C)]
pub struct RegistryMethods {
    pub version: u32,
    pub add_listener:
        Option<unsafe extern "C" fn(Data, *mut SpaHook, *const RegistryEvents, Data) -> c_int>,
    pub bind: Option<unsafe extern "C" fn(Data, u32, *const c_char, u32, usize) -> *mut c_void>,
}

#[repr(C)]
pub struct ProfilerEvents {
    pub version: u32,
    pub profile: Option<unsafe extern "C" fn(Data, *const SpaPod)>,
}

pub const PW_TYPE_INTERFACE_PROFILER: &[u8] = b"PipeWire:Interface:Profiler";
pub const PW_VERSION_PROFILER: u32 = 3;
pub const PW_VERSION_REGISTRY: u32 = 3;
pub const PW_ID_CORE: u32 = 0;

/// The entry points, resolved once.
pub struct Lib {
    pub init: unsafe extern "C" fn(*mut c_int, *mut *mut *mut c_char),
    pub get_library_version: unsafe extern "C" fn() -> *const c_char,
    pub thread_loop_new: unsafe extern "C" fn(*const c_char, *const c_void) -> *mut c_void,
    pub thread_loop_get_loop: unsafe extern "C" fn(*mut c_void) -> *mut c_void,
    pub thread_loop_start: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub thread_loop_stop: unsafe extern "C" fn(*mut c_void),
    pub thread_loop_lock: unsafe extern "C" fn(*mut c_void),
    pub thread_loop_unlock: unsafe extern "C" fn(*mut c_void),
    pub thread_loop_destroy: unsafe extern "C" fn(*mut c_void),
    pub context_new: unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> *mut c_void,
    pub context_destroy: unsafe extern "C" fn(*mut c_void),
    pub context_load_module:
        unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char, *mut c_void) -> *mut c_void,
    pub context_connect: unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> *mut c_void,
    pub core_disconnect: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub proxy_add_object_listener:
        unsafe extern "C" fn(*mut c_void, *mut SpaHook, *const c_void, *mut c_void),
    pub proxy_destroy: unsafe extern "C" fn(*mut c_void),
}

// SAFETY: function pointers into a library that stays loaded for the process's life.
unsafe impl Send for Lib {}
// SAFETY: as above; the pointers are never written after loading.
unsafe impl Sync for Lib {}

static LIB: std::sync::OnceLock<std::result::Result<Lib, String>> = std::sync::OnceLock::new();

/// libpipewire-0.3, loaded and initialised once per process.
pub fn lib() -> std::result::Result<&'static Lib, String> {
    LIB.get_or_init(load).as_ref().map_err(|e| e.clone())
}

// Each transmute's target is the `Lib` field the symbol is assigned to.
#[allow(clippy::missing_transmute_annotations)]
fn load() -> std::result::Result<Lib, String> {
    // SAFETY: dlopen runs libpipewire's constructors, which only set up its own state; the
    // handle is never closed, so the symbols below stay valid.
    let h = unsafe {
        libc::dlopen(
            c"libpipewire-0.3.so.0".as_ptr(),
            libc::RTLD_NOW | libc::RTLD_LOCAL,
        )
    };
    if h.is_null() {
        return Err("libpipewire-0.3.so.0 is not installed (apt install libpipewire-0.3-0)".into());
    }
    macro_rules! sym {
        ($name:literal) => {{
            // SAFETY: `h` is a live handle and the name is NUL-terminated.
            let p = unsafe { libc::dlsym(h, concat!($name, "\0").as_ptr().cast()) };
            if p.is_null() {
                return Err(format!("libpipewire-0.3 has no {}", $name));
            }
            // SAFETY: the symbol is libpipewire's function of that name, whose C signature
            // is the field's type (pipewire/*.h).
            unsafe { std::mem::transmute::<*mut c_void, _>(p) }
        }};
    }
    let lib = Lib {
        init: sym!("pw_init"),
        get_library_version: sym!("pw_get_library_version"),
        thread_loop_new: sym!("pw_thread_loop_new"),
        thread_loop_get_loop: sym!("pw_thread_loop_get_loop"),
        thread_loop_start: sym!("pw_thread_loop_start"),
        thread_loop_stop: sym!("pw_thread_loop_stop"),
        thread_loop_lock: sym!("pw_thread_loop_lock"),
        thread_loop_unlock: sym!("pw_thread_loop_unlock"),
        thread_loop_destroy: sym!("pw_thread_loop_destroy"),
        context_new: sym!("pw_context_new"),
        context_destroy: sym!("pw_context_destroy"),
        context_load_module: sym!("pw_context_load_module"),
        context_connect: sym!("pw_context_connect"),
        core_disconnect: sym!("pw_core_disconnect"),
        proxy_add_object_listener: sym!("pw_proxy_add_object_listener"),
        proxy_destroy: sym!("pw_proxy_destroy"),
    };
    // SAFETY: pw_init accepts null argc/argv and may be called more than once.
    unsafe { (lib.init)(std::ptr::null_mut(), std::ptr::null_mut()) };
    Ok(lib)
}

/// The method table and its `data` of an interface object (a `pw_core`, `pw_registry`):
/// what `spa_interface_call` uses.
///
/// # Safety
/// `obj` must be a live libpipewire object whose interface's method table is a `T`.
pub unsafe fn methods<'a, T>(obj: *mut c_void) -> (&'a T, *mut c_void) {
    // SAFETY: the caller's contract: `obj` starts with its `spa_interface`.
    let i = unsafe { &*(obj as *const SpaInterface) };
    // SAFETY: as above: `funcs` is the interface's method table.
    (unsafe { &*(i.cb.funcs as *const T) }, i.cb.data)
}

/// A C string from libpipewire, or "".
///
/// # Safety
/// `p` is null or a NUL-terminated string valid for the call.
pub unsafe fn string(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the caller's contract.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}
