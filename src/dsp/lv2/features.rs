//! The host features an LV2 plugin may require: URID map/unmap, options (sample rate,
//! block lengths, sequence size), bounded block length, the worker schedule and default
//! state. Each instance gets its own feature block at a stable (boxed) address, because
//! plugins keep the pointers for their whole life.

use lv2_raw::core::LV2Feature;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::{Mutex, OnceLock};

pub const URID_MAP: &str = "http://lv2plug.in/ns/ext/urid#map";
pub const URID_UNMAP: &str = "http://lv2plug.in/ns/ext/urid#unmap";
pub const OPTIONS: &str = "http://lv2plug.in/ns/ext/options#options";
pub const BOUNDED_BLOCK: &str = "http://lv2plug.in/ns/ext/buf-size#boundedBlockLength";
pub const WORKER_SCHEDULE: &str = "http://lv2plug.in/ns/ext/worker#schedule";
pub const LOAD_DEFAULT_STATE: &str = "http://lv2plug.in/ns/ext/state#loadDefaultState";
/// Plugins that require these need only the host to behave as xrunlab always does: run
/// live, and never share a buffer between an input and an output port.
pub const IS_LIVE: &str = "http://lv2plug.in/ns/lv2core#isLive";
pub const IN_PLACE_BROKEN: &str = "http://lv2plug.in/ns/lv2core#inPlaceBroken";

/// Required features a plugin may list and still be hosted.
pub const SUPPORTED_FEATURES: &[&str] = &[
    URID_MAP,
    URID_UNMAP,
    OPTIONS,
    BOUNDED_BLOCK,
    WORKER_SCHEDULE,
    LOAD_DEFAULT_STATE,
    IS_LIVE,
    IN_PLACE_BROKEN,
];

/// Bytes of each atom sequence port buffer, announced as `buf-size:sequenceSize`.
pub const SEQUENCE_BYTES: usize = 8192;

/// One URID table for the process: URIDs are then the same in every instance, and a URI
/// mapped once (at instantiation) is a lookup afterwards. Plugins map in `instantiate`;
/// one that maps in `run` would take this lock in the cycle, which the allocation test
/// would show.
struct UridTable {
    ids: HashMap<CString, u32>,
    uris: Vec<CString>,
}

fn table() -> &'static Mutex<UridTable> {
    static T: OnceLock<Mutex<UridTable>> = OnceLock::new();
    T.get_or_init(|| {
        Mutex::new(UridTable {
            ids: HashMap::new(),
            uris: Vec::new(),
        })
    })
}

/// The URID of `uri` (never 0).
pub fn urid(uri: &CStr) -> u32 {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&id) = t.ids.get(uri) {
        return id;
    }
    t.uris.push(uri.to_owned());
    let id = t.uris.len() as u32;
    t.ids.insert(uri.to_owned(), id);
    id
}

pub fn urid_of(uri: &str) -> u32 {
    urid(&CString::new(uri).expect("URI constants have no NUL"))
}

/// Calls plugins made to map or unmap. They take the table's lock (a futex, which neither
/// an allocation count nor a pthread_mutex count sees), so the no-allocation test reads this
/// to prove no plugin maps in `run`.
static MAP_CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub fn map_calls() -> u64 {
    MAP_CALLS.load(std::sync::atomic::Ordering::Relaxed)
}

// SAFETY: called by a plugin through the URID map feature, which passes a NUL-terminated
// URI (null is refused here); the handle is unused.
unsafe extern "C" fn map_uri(_handle: *mut c_void, uri: *const c_char) -> u32 {
    MAP_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if uri.is_null() {
        return 0;
    }
    urid(CStr::from_ptr(uri))
}

// SAFETY: called by a plugin through the URID unmap feature; the returned pointer is into a
// CString the table keeps for the life of the process.
unsafe extern "C" fn unmap_urid(_handle: *mut c_void, id: u32) -> *const c_char {
    MAP_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = table().lock().unwrap_or_else(|e| e.into_inner());
    // The CString's heap buffer never moves when the Vec grows, so the pointer stays valid.
    match (id as usize).checked_sub(1).and_then(|i| t.uris.get(i)) {
        Some(s) => s.as_ptr(),
        None => std::ptr::null(),
    }
}

/// The feature structs of one instance. Boxed by the caller; every pointer in `features`
/// points into this struct or at static strings.
pub struct FeatureBlock {
    map: lv2_sys::LV2_URID_Map,
    unmap: lv2_sys::LV2_URID_Unmap,
    rate: f32,
    block: [i32; 3],
    sequence_size: i32,
    options: [lv2_sys::LV2_Options_Option; 6],
    schedule: lv2_sys::LV2_Worker_Schedule,
    features: Vec<LV2Feature>,
}

// SAFETY: the raw pointers refer to the block itself (boxed, so they survive the move) and to
// static data; the block moves between threads with its instance and is used by one thread
// at a time. The callbacks it hands out lock the URID table, so any thread may call them.
unsafe impl Send for FeatureBlock {}

const URIS: [&CStr; 8] = [
    c"http://lv2plug.in/ns/ext/urid#map",
    c"http://lv2plug.in/ns/ext/urid#unmap",
    c"http://lv2plug.in/ns/ext/options#options",
    c"http://lv2plug.in/ns/ext/buf-size#boundedBlockLength",
    c"http://lv2plug.in/ns/ext/worker#schedule",
    c"http://lv2plug.in/ns/ext/state#loadDefaultState",
    c"http://lv2plug.in/ns/lv2core#isLive",
    c"http://lv2plug.in/ns/lv2core#inPlaceBroken",
];

impl FeatureBlock {
    /// Features for an instance at `rate` Hz that is run with 1..=`max_frames` frames.
    /// `schedule` is the worker's schedule function and its handle.
    pub fn new(
        rate: u32,
        max_frames: usize,
        schedule: lv2_sys::LV2_Worker_Schedule,
    ) -> Box<FeatureBlock> {
        let max = max_frames as i32;
        let mut b = Box::new(FeatureBlock {
            map: lv2_sys::LV2_URID_Map {
                handle: std::ptr::null_mut(),
                map: Some(map_uri),
            },
            unmap: lv2_sys::LV2_URID_Unmap {
                handle: std::ptr::null_mut(),
                unmap: Some(unmap_urid),
            },
            rate: rate as f32,
            block: [1, max, max],
            sequence_size: SEQUENCE_BYTES as i32,
            options: [EMPTY_OPTION; 6],
            schedule,
            features: Vec::new(),
        });
        let (int, float) = (
            urid_of("http://lv2plug.in/ns/ext/atom#Int"),
            urid_of("http://lv2plug.in/ns/ext/atom#Float"),
        );
        let opt = |key: &str, ty: u32, value: *const c_void| lv2_sys::LV2_Options_Option {
            context: lv2_sys::LV2_Options_Context_LV2_OPTIONS_INSTANCE,
            subject: 0,
            key: urid_of(key),
            size: 4,
            type_: ty,
            value,
        };
        b.options = [
            opt(
                "http://lv2plug.in/ns/ext/parameters#sampleRate",
                float,
                std::ptr::addr_of!(b.rate).cast(),
            ),
            opt(
                "http://lv2plug.in/ns/ext/buf-size#minBlockLength",
                int,
                std::ptr::addr_of!(b.block[0]).cast(),
            ),
            opt(
                "http://lv2plug.in/ns/ext/buf-size#maxBlockLength",
                int,
                std::ptr::addr_of!(b.block[1]).cast(),
            ),
            opt(
                "http://lv2plug.in/ns/ext/buf-size#nominalBlockLength",
                int,
                std::ptr::addr_of!(b.block[2]).cast(),
            ),
            opt(
                "http://lv2plug.in/ns/ext/buf-size#sequenceSize",
                int,
                std::ptr::addr_of!(b.sequence_size).cast(),
            ),
            EMPTY_OPTION,
        ];
        let data: [*mut c_void; 8] = [
            std::ptr::addr_of_mut!(b.map).cast(),
            std::ptr::addr_of_mut!(b.unmap).cast(),
            b.options.as_mut_ptr().cast(),
            std::ptr::null_mut(),
            std::ptr::addr_of_mut!(b.schedule).cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        ];
        b.features = URIS
            .iter()
            .zip(data)
            .map(|(uri, data)| LV2Feature {
                uri: uri.as_ptr(),
                data,
            })
            .collect();
        b
    }

    pub fn features(&self) -> &[LV2Feature] {
        &self.features
    }

    /// The map feature struct, for lilv's state functions.
    pub fn map_ptr(&mut self) -> *mut lv2_raw::LV2UridMap {
        std::ptr::addr_of_mut!(self.map).cast()
    }
}

const EMPTY_OPTION: lv2_sys::LV2_Options_Option = lv2_sys::LV2_Options_Option {
    context: 0,
    subject: 0,
    key: 0,
    size: 0,
    type_: 0,
    value: std::ptr::null(),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urids_are_stable_and_unmap() {
        let a = urid_of("urn:xrunlab:test:a");
        let b = urid_of("urn:xrunlab:test:b");
        assert_ne!(a, 0);
        assert_ne!(a, b);
        assert_eq!(urid_of("urn:xrunlab:test:a"), a);
        // SAFETY: `b` was mapped above, so unmap returns the table's NUL-terminated string,
        // which is never freed.
        let s = unsafe { CStr::from_ptr(unmap_urid(std::ptr::null_mut(), b)) };
        assert_eq!(s.to_str().unwrap(), "urn:xrunlab:test:b");
        // SAFETY: unmap ignores its handle and reads nothing through a pointer.
        assert!(unsafe { unmap_urid(std::ptr::null_mut(), 0) }.is_null());
        assert_eq!(URIS.len(), SUPPORTED_FEATURES.len());
        for (u, s) in URIS.iter().zip(SUPPORTED_FEATURES) {
            assert_eq!(u.to_str().unwrap(), *s);
        }
    }

    #[test]
    fn options_point_into_the_block() {
        let b = FeatureBlock::new(
            48000,
            256,
            lv2_sys::LV2_Worker_Schedule {
                handle: std::ptr::null_mut(),
                schedule_work: None,
            },
        );
        // SAFETY: option 0 (the sample rate, type Float) points at the block's `rate`, an f32
        // alive as long as `b`.
        let rate = unsafe { *(b.options[0].value as *const f32) };
        assert_eq!(rate, 48000.0);
        // SAFETY: option 2 (the maximum block length, type Int) points into the block's
        // `block` array of i32, alive as long as `b`.
        let max = unsafe { *(b.options[2].value as *const i32) };
        assert_eq!(max, 256);
        assert_eq!(b.options[5].key, 0, "the list ends with an empty option");
        assert_eq!(b.features().len(), SUPPORTED_FEATURES.len());
    }
}
