//! The objects a VST3 plugin calls back into: the host context it is initialised with
//! (`IHostApplication`), the component handler its controller reports edits to, the
//! parameter changes and events of a block, and a memory stream for its state.
//!
//! What the plugin reaches from its audio thread — the block's parameter changes and events,
//! the output lists, the component handler — is built before the first block and answers from
//! atomics: no call there allocates or locks (docs/ARCHITECTURE.md §5). The plugin may keep
//! a reference to any of them (COM reference counts), so none of them points back into the
//! instance that owns it.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;
use vst3::Steinberg::Vst::Event_::EventTypes_::{kNoteOffEvent, kNoteOnEvent};
use vst3::Steinberg::Vst::{
    Event, IComponentHandler, IComponentHandlerTrait, IEventList, IEventListTrait,
    IHostApplication, IHostApplicationTrait, IParamValueQueue, IParamValueQueueTrait,
    IParameterChanges, IParameterChangesTrait, NoteOffEvent, NoteOnEvent, ParamID, ParamValue,
    String128, TChar,
};
use vst3::Steinberg::{
    int32, int64, kInvalidArgument, kNotImplemented, kResultFalse, kResultOk, tresult, IBStream,
    IBStreamTrait, TUID,
};
use vst3::{Class, ComWrapper};

/// `text` into a VST3 wide string, truncated and NUL-terminated.
pub fn copy_wide(text: &str, dst: &mut [TChar]) {
    let mut n = 0;
    for (d, s) in dst.iter_mut().zip(text.encode_utf16()) {
        *d = s;
        n += 1;
    }
    let end = n.min(dst.len().saturating_sub(1));
    if let Some(d) = dst.get_mut(end) {
        *d = 0;
    }
}

/// A VST3 wide string (up to its NUL) as text.
pub fn wide_text(s: &[TChar]) -> String {
    let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
    String::from_utf16_lossy(&s[..end])
}

/// The host context given to `initialize`: a name, and no objects to create (a plugin that
/// separates its controller and asks for messages to pass between the two gets none, and
/// runs without them).
pub struct HostApp;

impl Class for HostApp {
    type Interfaces = (IHostApplication,);
}

impl IHostApplicationTrait for HostApp {
    unsafe fn getName(&self, name: *mut String128) -> tresult {
        // SAFETY: the plugin passes a String128 to fill, or null.
        match unsafe { name.as_mut() } {
            Some(n) => {
                copy_wide("xrunlab", n);
                kResultOk
            }
            None => kInvalidArgument,
        }
    }

    unsafe fn createInstance(
        &self,
        _cid: *mut TUID,
        _iid: *mut TUID,
        obj: *mut *mut c_void,
    ) -> tresult {
        if !obj.is_null() {
            // SAFETY: checked non-null; the out-pointer is the plugin's.
            unsafe { *obj = std::ptr::null_mut() };
        }
        kNotImplemented
    }
}

/// What the controller reports: edits are dropped (there is no UI to follow them), a
/// restart request is noted (the engine never restarts an instance it measures). The plugin
/// may call it from its audio thread: an atomic store only.
#[derive(Default)]
pub struct Handler {
    pub restart_requested: AtomicBool,
}

impl Class for Handler {
    type Interfaces = (IComponentHandler,);
}

impl IComponentHandlerTrait for Handler {
    unsafe fn beginEdit(&self, _id: ParamID) -> tresult {
        kResultOk
    }

    unsafe fn performEdit(&self, _id: ParamID, _value: ParamValue) -> tresult {
        kResultOk
    }

    unsafe fn endEdit(&self, _id: ParamID) -> tresult {
        kResultOk
    }

    unsafe fn restartComponent(&self, _flags: int32) -> tresult {
        self.restart_requested.store(true, Ordering::Relaxed);
        kResultOk
    }
}

/// One parameter's change in the next block: one point at its start.
pub struct Queue {
    id: ParamID,
    value: AtomicU64,
    pending: AtomicBool,
}

impl Class for Queue {
    type Interfaces = (IParamValueQueue,);
}

impl IParamValueQueueTrait for Queue {
    unsafe fn getParameterId(&self) -> ParamID {
        self.id
    }

    unsafe fn getPointCount(&self) -> int32 {
        1
    }

    unsafe fn getPoint(&self, index: int32, offset: *mut int32, value: *mut ParamValue) -> tresult {
        if index != 0 || offset.is_null() || value.is_null() {
            return kInvalidArgument;
        }
        // SAFETY: checked non-null; the plugin's out-pointers.
        unsafe {
            *offset = 0;
            *value = f64::from_bits(self.value.load(Ordering::Relaxed));
        }
        kResultOk
    }

    unsafe fn addPoint(&self, _: int32, _: ParamValue, _: *mut int32) -> tresult {
        kResultFalse
    }
}

/// The parameter changes of the next block, one preallocated queue per parameter the host
/// may set, in the order they were set.
pub struct Changes {
    queues: Box<[ComWrapper<Queue>]>,
    order: Box<[AtomicUsize]>,
    count: AtomicUsize,
}

impl Class for Changes {
    type Interfaces = (IParameterChanges,);
}

impl Changes {
    /// Changes for the parameters `ids`; [`Changes::set`] names them by their index here.
    pub fn new(ids: impl Iterator<Item = ParamID>) -> Changes {
        let queues: Box<[ComWrapper<Queue>]> = ids
            .map(|id| {
                ComWrapper::new(Queue {
                    id,
                    value: AtomicU64::new(0),
                    pending: AtomicBool::new(false),
                })
            })
            .collect();
        let order = queues.iter().map(|_| AtomicUsize::new(0)).collect();
        Changes {
            queues,
            order,
            count: AtomicUsize::new(0),
        }
    }

    /// Send `normalized` to the parameter `slot` in the next block. Real-time safe.
    pub fn set(&self, slot: usize, normalized: f64) {
        let Some(q) = self.queues.get(slot) else {
            return;
        };
        q.value.store(normalized.to_bits(), Ordering::Relaxed);
        if !q.pending.swap(true, Ordering::Relaxed) {
            let n = self.count.load(Ordering::Relaxed);
            self.order[n].store(slot, Ordering::Relaxed);
            self.count.store(n + 1, Ordering::Relaxed);
        }
    }

    /// After a block: nothing is pending. Real-time safe.
    pub fn clear(&self) {
        let n = self.count.swap(0, Ordering::Relaxed);
        for o in &self.order[..n] {
            self.queues[o.load(Ordering::Relaxed)]
                .pending
                .store(false, Ordering::Relaxed);
        }
    }
}

impl IParameterChangesTrait for Changes {
    unsafe fn getParameterCount(&self) -> int32 {
        self.count.load(Ordering::Relaxed) as int32
    }

    unsafe fn getParameterData(&self, index: int32) -> *mut IParamValueQueue {
        let n = self.count.load(Ordering::Relaxed);
        match usize::try_from(index).ok().filter(|&i| i < n) {
            Some(i) => self.queues[self.order[i].load(Ordering::Relaxed)]
                .as_com_ref::<IParamValueQueue>()
                .map_or(std::ptr::null_mut(), |r| r.as_ptr()),
            None => std::ptr::null_mut(),
        }
    }

    unsafe fn addParameterData(
        &self,
        _id: *const ParamID,
        _index: *mut int32,
    ) -> *mut IParamValueQueue {
        std::ptr::null_mut()
    }
}

/// Where the plugin's output parameter changes (meters) go: accepted and dropped, as
/// keeping them would allocate.
pub struct SinkQueue;

impl Class for SinkQueue {
    type Interfaces = (IParamValueQueue,);
}

impl IParamValueQueueTrait for SinkQueue {
    unsafe fn getParameterId(&self) -> ParamID {
        0
    }

    unsafe fn getPointCount(&self) -> int32 {
        0
    }

    unsafe fn getPoint(&self, _: int32, _: *mut int32, _: *mut ParamValue) -> tresult {
        kInvalidArgument
    }

    unsafe fn addPoint(&self, _: int32, _: ParamValue, index: *mut int32) -> tresult {
        if !index.is_null() {
            // SAFETY: checked non-null; the plugin's out-pointer.
            unsafe { *index = 0 };
        }
        kResultOk
    }
}

/// The output parameter changes: every parameter gets the one sink queue.
pub struct SinkChanges {
    queue: ComWrapper<SinkQueue>,
}

impl Class for SinkChanges {
    type Interfaces = (IParameterChanges,);
}

impl Default for SinkChanges {
    fn default() -> SinkChanges {
        SinkChanges {
            queue: ComWrapper::new(SinkQueue),
        }
    }
}

impl IParameterChangesTrait for SinkChanges {
    unsafe fn getParameterCount(&self) -> int32 {
        0
    }

    unsafe fn getParameterData(&self, _: int32) -> *mut IParamValueQueue {
        std::ptr::null_mut()
    }

    unsafe fn addParameterData(
        &self,
        _: *const ParamID,
        index: *mut int32,
    ) -> *mut IParamValueQueue {
        if !index.is_null() {
            // SAFETY: checked non-null; the plugin's out-pointer.
            unsafe { *index = 0 };
        }
        self.queue
            .as_com_ref::<IParamValueQueue>()
            .map_or(std::ptr::null_mut(), |r| r.as_ptr())
    }
}

const NO_NOTE: u8 = 0;
const NOTE_ON: u8 = 1;
const NOTE_OFF: u8 = 2;

/// The events of the next block (at most one note, A4, at its start) when `input`, or a
/// sink for the plugin's output events.
pub struct Events {
    input: bool,
    note: AtomicU8,
}

impl Class for Events {
    type Interfaces = (IEventList,);
}

impl Events {
    pub fn new(input: bool) -> Events {
        Events {
            input,
            note: AtomicU8::new(NO_NOTE),
        }
    }

    /// A note on (`true`) or off in the next block. Real-time safe.
    pub fn note(&self, on: bool) {
        self.note
            .store(if on { NOTE_ON } else { NOTE_OFF }, Ordering::Relaxed);
    }

    pub fn clear(&self) {
        self.note.store(NO_NOTE, Ordering::Relaxed);
    }
}

impl IEventListTrait for Events {
    unsafe fn getEventCount(&self) -> int32 {
        int32::from(self.input && self.note.load(Ordering::Relaxed) != NO_NOTE)
    }

    unsafe fn getEvent(&self, index: int32, e: *mut Event) -> tresult {
        let note = self.note.load(Ordering::Relaxed);
        if !self.input || index != 0 || e.is_null() || note == NO_NOTE {
            return kInvalidArgument;
        }
        // SAFETY: checked non-null; the plugin gives an Event to fill. A zeroed Event is
        // valid (plain integers and floats), and the union member written is the one `type`
        // names.
        unsafe {
            let e = &mut *e;
            *e = std::mem::zeroed();
            if note == NOTE_ON {
                e.r#type = kNoteOnEvent as u16;
                e.__field0.noteOn = NoteOnEvent {
                    channel: 0,
                    pitch: 69,
                    tuning: 0.0,
                    velocity: 0.8,
                    length: 0,
                    noteId: -1,
                };
            } else {
                e.r#type = kNoteOffEvent as u16;
                e.__field0.noteOff = NoteOffEvent {
                    channel: 0,
                    pitch: 69,
                    velocity: 0.0,
                    noteId: -1,
                    tuning: 0.0,
                };
            }
        }
        kResultOk
    }

    unsafe fn addEvent(&self, _: *mut Event) -> tresult {
        if self.input {
            kResultFalse
        } else {
            kResultOk
        }
    }
}

/// A plugin's state in memory: what `getState` writes and `setState` reads. Used off the
/// audio thread only, so a lock is fine here.
#[derive(Default)]
pub struct MemStream {
    inner: Mutex<(Vec<u8>, usize)>,
}

impl Class for MemStream {
    type Interfaces = (IBStream,);
}

impl MemStream {
    pub fn with(bytes: &[u8]) -> MemStream {
        MemStream {
            inner: Mutex::new((bytes.to_vec(), 0)),
        }
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone()
    }

    pub fn rewind(&self) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).1 = 0;
    }
}

impl IBStreamTrait for MemStream {
    unsafe fn read(&self, buffer: *mut c_void, n: int32, done: *mut int32) -> tresult {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (data, pos) = &mut *g;
        let n = usize::try_from(n)
            .unwrap_or(0)
            .min(data.len().saturating_sub(*pos));
        if n > 0 && buffer.is_null() {
            return kInvalidArgument;
        }
        // SAFETY: the plugin's buffer holds at least the `n` bytes it asked for, and `n` is
        // within what the stream holds from `pos`.
        unsafe {
            if n > 0 {
                std::ptr::copy_nonoverlapping(data.as_ptr().add(*pos), buffer.cast::<u8>(), n);
            }
            if !done.is_null() {
                *done = n as int32;
            }
        }
        *pos += n;
        kResultOk
    }

    unsafe fn write(&self, buffer: *mut c_void, n: int32, done: *mut int32) -> tresult {
        let n = usize::try_from(n).unwrap_or(0);
        if n > 0 && buffer.is_null() {
            return kInvalidArgument;
        }
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (data, pos) = &mut *g;
        // SAFETY: the plugin's buffer holds the `n` bytes it says it writes.
        let src = unsafe { std::slice::from_raw_parts(buffer.cast::<u8>(), n) };
        if data.len() < *pos + n {
            data.resize(*pos + n, 0);
        }
        data[*pos..*pos + n].copy_from_slice(src);
        *pos += n;
        if !done.is_null() {
            // SAFETY: checked non-null; the plugin's out-pointer.
            unsafe { *done = n as int32 };
        }
        kResultOk
    }

    unsafe fn seek(&self, to: int64, mode: int32, result: *mut int64) -> tresult {
        use vst3::Steinberg::IBStream_::IStreamSeekMode_::{kIBSeekCur, kIBSeekEnd, kIBSeekSet};
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (data, pos) = &mut *g;
        let base = match mode as u32 {
            m if m == kIBSeekSet => 0,
            m if m == kIBSeekCur => *pos as i64,
            m if m == kIBSeekEnd => data.len() as i64,
            _ => return kInvalidArgument,
        };
        let Some(new) = base.checked_add(to).filter(|&p| p >= 0) else {
            return kInvalidArgument;
        };
        *pos = new as usize;
        if !result.is_null() {
            // SAFETY: checked non-null; the plugin's out-pointer.
            unsafe { *result = new };
        }
        kResultOk
    }

    unsafe fn tell(&self, pos: *mut int64) -> tresult {
        if pos.is_null() {
            return kInvalidArgument;
        }
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: checked non-null; the plugin's out-pointer.
        unsafe { *pos = g.1 as int64 };
        kResultOk
    }
}

/// The number of speakers of an arrangement (a bit per speaker).
pub fn speakers(arrangement: u64) -> u32 {
    arrangement.count_ones()
}
