//! The LV2 worker: a plugin's `run` asks for non-real-time work (loading an impulse
//! response, allocating a buffer) through `schedule_work`; a worker thread of this instance
//! does it, and the responses are handed back to the plugin in the next cycle, after `run`.
//!
//! Real-time side (docs/ARCHITECTURE.md §5): `schedule_work` copies the request into a
//! lock-free ring and posts a semaphore (a futex wake, no lock); delivering responses pops
//! from another ring into a buffer allocated up front. Outside `run` (instantiation, state
//! restore) the spec lets the host do the work at once, which is what happens here, before
//! the thread exists.

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Bytes of each ring; a request or response larger than a quarter of it is refused with
/// LV2_WORKER_ERR_NO_SPACE (and counted).
const RING_BYTES: usize = 1 << 16;
const MAX_MESSAGE: usize = RING_BYTES / 4;
const HEADER: usize = 4;

/// State shared by the audio thread, the worker thread and the plugin's callbacks. Each
/// ring end has exactly one user at a time: requests are produced only inside `run` (the
/// audio thread), consumed only by the worker thread; responses are produced by whoever
/// runs `work` (the constructing thread before the worker thread starts, then only the
/// worker thread) and consumed only by the audio thread.
pub struct WorkerShared {
    iface: UnsafeCell<*const lv2_sys::LV2_Worker_Interface>,
    handle: UnsafeCell<lv2_sys::LV2_Handle>,
    in_run: AtomicBool,
    stop: AtomicBool,
    req_tx: UnsafeCell<rtrb::Producer<u8>>,
    req_rx: UnsafeCell<rtrb::Consumer<u8>>,
    resp_tx: UnsafeCell<rtrb::Producer<u8>>,
    resp_rx: UnsafeCell<rtrb::Consumer<u8>>,
    rt_scratch: UnsafeCell<Vec<u8>>,
    worker_scratch: UnsafeCell<Vec<u8>>,
    sem: UnsafeCell<libc::sem_t>,
    /// Requests or responses that did not fit in their ring.
    pub dropped: AtomicU64,
    /// Responses delivered to the plugin.
    pub delivered: AtomicU64,
}

// SAFETY: every field is either atomic or used by one thread at a time, as the struct doc
// says: the UnsafeCells are never reached from two threads at once, the raw `iface`/`handle`
// are written once by `attach` before any other thread sees the struct, and a POSIX
// semaphore is made to be posted and waited on from different threads.
unsafe impl Send for WorkerShared {}
// SAFETY: as for Send: shared references only reach the cells in the one-user-per-end
// pattern of the struct doc.
unsafe impl Sync for WorkerShared {}

impl WorkerShared {
    pub fn new() -> Box<WorkerShared> {
        let (req_tx, req_rx) = rtrb::RingBuffer::new(RING_BYTES);
        let (resp_tx, resp_rx) = rtrb::RingBuffer::new(RING_BYTES);
        let w = Box::new(WorkerShared {
            iface: UnsafeCell::new(std::ptr::null()),
            handle: UnsafeCell::new(std::ptr::null_mut()),
            in_run: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            req_tx: UnsafeCell::new(req_tx),
            req_rx: UnsafeCell::new(req_rx),
            resp_tx: UnsafeCell::new(resp_tx),
            resp_rx: UnsafeCell::new(resp_rx),
            rt_scratch: UnsafeCell::new(vec![0; MAX_MESSAGE]),
            worker_scratch: UnsafeCell::new(vec![0; MAX_MESSAGE]),
            // SAFETY: sem_t is plain data for which all zeros is a valid (if meaningless)
            // value; sem_init below gives it its real state before anything waits on it.
            sem: UnsafeCell::new(unsafe { std::mem::zeroed() }),
            dropped: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
        });
        // SAFETY: the semaphore lives in the box, whose address does not change while any
        // thread uses it (pshared 0: one process); it is initialised once, here, before the
        // struct is shared.
        unsafe { libc::sem_init(w.sem.get(), 0, 0) };
        w
    }

    /// The schedule feature whose handle is this struct.
    pub fn schedule_feature(&self) -> lv2_sys::LV2_Worker_Schedule {
        lv2_sys::LV2_Worker_Schedule {
            handle: self as *const Self as *mut c_void,
            schedule_work: Some(schedule_work),
        }
    }

    /// Attach the plugin once it is instantiated. Before this, `schedule_work` refuses.
    ///
    /// # Safety
    /// Called before the worker thread starts and before any `run`.
    pub unsafe fn attach(
        &self,
        iface: *const lv2_sys::LV2_Worker_Interface,
        handle: lv2_sys::LV2_Handle,
    ) {
        *self.iface.get() = iface;
        *self.handle.get() = handle;
    }

    pub fn has_interface(&self) -> bool {
        // SAFETY: `iface` is written only by `attach`, before the worker thread starts and
        // before any `run`, so no write races this read.
        unsafe { !(*self.iface.get()).is_null() }
    }

    pub fn set_in_run(&self, v: bool) {
        self.in_run.store(v, Ordering::Relaxed);
    }

    /// Audio thread, after `run`: hand every waiting response to the plugin, then tell it
    /// the cycle's work phase is over.
    ///
    /// # Safety
    /// Called only from the thread that calls `run`, never concurrently with it.
    pub unsafe fn deliver(&self) {
        let iface = *self.iface.get();
        if iface.is_null() {
            return;
        }
        let handle = *self.handle.get();
        let rx = &mut *self.resp_rx.get();
        let scratch = &mut *self.rt_scratch.get();
        while let Some(n) = pop_message(rx, scratch) {
            if let Some(f) = (*iface).work_response {
                f(handle, n as u32, scratch.as_ptr().cast());
            }
            self.delivered.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(end) = (*iface).end_run {
            end(handle);
        }
    }

    /// The worker thread's loop: wait for requests, do them, until `stop`.
    fn serve(&self) {
        loop {
            // A timed wait, so a stop posted while this thread was busy is never missed.
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid timespec on this stack for the call to fill.
            unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
            ts.tv_sec += 1;
            // SAFETY: the semaphore was initialised in `new` and is destroyed only when the
            // struct drops, after the owner joined this thread.
            unsafe { libc::sem_timedwait(self.sem.get(), &ts) };
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            // SAFETY: the request ring's consumer and the worker scratch are used by this
            // thread alone (struct doc), so these are the only references to them.
            let rx = unsafe { &mut *self.req_rx.get() };
            // SAFETY: as above.
            let scratch = unsafe { &mut *self.worker_scratch.get() };
            while let Some(n) = pop_message(rx, scratch) {
                // SAFETY: once this thread runs, it is the only caller of `work`: work
                // scheduled outside `run` is done on the constructing thread only before
                // the thread starts, and in `run` it is queued for here.
                unsafe { self.work(&scratch[..n]) };
            }
        }
    }

    /// Run the plugin's `work` on `data`; its responses go to the response ring.
    ///
    /// # Safety
    /// Only one thread at a time (the constructing thread, then the worker thread).
    unsafe fn work(&self, data: &[u8]) {
        let iface = *self.iface.get();
        if iface.is_null() {
            return;
        }
        if let Some(work) = (*iface).work {
            work(
                *self.handle.get(),
                Some(respond),
                self as *const Self as *mut c_void,
                data.len() as u32,
                data.as_ptr().cast(),
            );
        }
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        // SAFETY: the semaphore is initialised (in `new`) and not yet destroyed (in drop,
        // which needs `&mut self`); sem_post may be called from any thread.
        unsafe { libc::sem_post(self.sem.get()) };
    }
}

impl Drop for WorkerShared {
    fn drop(&mut self) {
        // SAFETY: `&mut self` means no thread still uses the semaphore (the worker thread
        // was joined by `WorkerThread`'s drop, which the instance runs first).
        unsafe { libc::sem_destroy(self.sem.get()) };
    }
}

/// A running worker thread; stopping joins it.
pub struct WorkerThread {
    shared: *const WorkerShared,
    thread: Option<std::thread::JoinHandle<()>>,
}

// SAFETY: the raw pointer is only used to stop the thread it serves; the `WorkerShared` it
// points to is Sync and outlives this value (see `start`), whichever thread drops it.
unsafe impl Send for WorkerThread {}

impl WorkerThread {
    /// Start serving `shared`, which must outlive the returned value (the instance owns both
    /// and drops this first). `label` names the plugin if its `work` crashes the process.
    pub fn start(
        shared: &WorkerShared,
        label: crate::rt::crash::Label,
    ) -> std::io::Result<WorkerThread> {
        let addr = shared as *const WorkerShared as usize;
        let thread = std::thread::Builder::new()
            .name("xrunlab-lv2-worker".into())
            .spawn(move || {
                // SAFETY: the owner joins this thread before freeing `shared`.
                let s = unsafe { &*(addr as *const WorkerShared) };
                // This thread runs nothing but the plugin's `work`.
                let _in_plugin = crate::rt::crash::enter(label, crate::rt::crash::Phase::Working);
                s.serve();
            })?;
        Ok(WorkerThread {
            shared,
            thread: Some(thread),
        })
    }
}

impl Drop for WorkerThread {
    fn drop(&mut self) {
        // SAFETY: `start`'s caller keeps `shared` alive until this value is gone; the
        // instance drops its worker thread before the shared state.
        unsafe { (*self.shared).stop() };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn push_message(tx: &mut rtrb::Producer<u8>, data: &[u8]) -> bool {
    let n = data.len();
    if n > MAX_MESSAGE || tx.slots() < HEADER + n {
        return false;
    }
    let Ok(mut chunk) = tx.write_chunk(HEADER + n) else {
        return false;
    };
    let (a, b) = chunk.as_mut_slices();
    let header = (n as u32).to_le_bytes();
    for (dst, src) in a
        .iter_mut()
        .chain(b.iter_mut())
        .zip(header.iter().chain(data))
    {
        *dst = *src;
    }
    chunk.commit_all();
    true
}

fn pop_message(rx: &mut rtrb::Consumer<u8>, out: &mut [u8]) -> Option<usize> {
    if rx.slots() < HEADER {
        return None;
    }
    let mut header = [0u8; HEADER];
    {
        let chunk = rx.read_chunk(HEADER).ok()?;
        let (a, b) = chunk.as_slices();
        for (d, s) in header.iter_mut().zip(a.iter().chain(b)) {
            *d = *s;
        }
        chunk.commit_all();
    }
    let n = u32::from_le_bytes(header) as usize;
    // The producer commits header and body together, so the body is there.
    let chunk = rx.read_chunk(n).ok()?;
    let (a, b) = chunk.as_slices();
    for (d, s) in out.iter_mut().zip(a.iter().chain(b)) {
        *d = *s;
    }
    chunk.commit_all();
    Some(n)
}

// SAFETY: the plugin calls it with the handle we put in its LV2_Worker_Schedule feature,
// a pointer to the `WorkerShared` that outlives the instance, and `size` bytes at `data`
// (a null `data` with a size is refused).
unsafe extern "C" fn schedule_work(
    handle: lv2_sys::LV2_Worker_Schedule_Handle,
    size: u32,
    data: *const c_void,
) -> lv2_sys::LV2_Worker_Status {
    let w = &*(handle as *const WorkerShared);
    if !w.has_interface() || (size > 0 && data.is_null()) {
        return lv2_sys::LV2_Worker_Status_LV2_WORKER_ERR_UNKNOWN;
    }
    let bytes = if size == 0 {
        &[][..]
    } else {
        std::slice::from_raw_parts(data.cast::<u8>(), size as usize)
    };
    if !w.in_run.load(Ordering::Relaxed) {
        // Outside run (instantiation, state restore): do the work now, on this thread.
        w.work(bytes);
        return lv2_sys::LV2_Worker_Status_LV2_WORKER_SUCCESS;
    }
    if push_message(&mut *w.req_tx.get(), bytes) {
        libc::sem_post(w.sem.get());
        lv2_sys::LV2_Worker_Status_LV2_WORKER_SUCCESS
    } else {
        w.dropped.fetch_add(1, Ordering::Relaxed);
        lv2_sys::LV2_Worker_Status_LV2_WORKER_ERR_NO_SPACE
    }
}

// SAFETY: the plugin's `work` calls it with the handle the worker thread passed in, a
// pointer to the `WorkerShared` that outlives the instance, and `size` bytes at `data`.
unsafe extern "C" fn respond(
    handle: lv2_sys::LV2_Worker_Respond_Handle,
    size: u32,
    data: *const c_void,
) -> lv2_sys::LV2_Worker_Status {
    let w = &*(handle as *const WorkerShared);
    let bytes = if size == 0 || data.is_null() {
        &[][..]
    } else {
        std::slice::from_raw_parts(data.cast::<u8>(), size as usize)
    };
    if push_message(&mut *w.resp_tx.get(), bytes) {
        lv2_sys::LV2_Worker_Status_LV2_WORKER_SUCCESS
    } else {
        w.dropped.fetch_add(1, Ordering::Relaxed);
        lv2_sys::LV2_Worker_Status_LV2_WORKER_ERR_NO_SPACE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// A stand-in plugin: `work` doubles each byte and responds; `work_response` sums them.
    struct Fake {
        worked: AtomicU32,
        responses: AtomicU32,
        sum: AtomicU32,
        ended: AtomicU32,
    }

    // SAFETY: the worker calls it with the `Fake` this test owns as the instance and `size`
    // bytes at `data`.
    unsafe extern "C" fn fake_work(
        instance: lv2_sys::LV2_Handle,
        respond: lv2_sys::LV2_Worker_Respond_Function,
        handle: lv2_sys::LV2_Worker_Respond_Handle,
        size: u32,
        data: *const c_void,
    ) -> lv2_sys::LV2_Worker_Status {
        let f = &*(instance as *const Fake);
        f.worked.fetch_add(1, Ordering::SeqCst);
        let bytes = std::slice::from_raw_parts(data.cast::<u8>(), size as usize);
        let doubled: Vec<u8> = bytes.iter().map(|b| b * 2).collect();
        respond.unwrap()(handle, size, doubled.as_ptr().cast())
    }

    // SAFETY: as `fake_work`: the test's `Fake` and `size` bytes at `data`.
    unsafe extern "C" fn fake_response(
        instance: lv2_sys::LV2_Handle,
        size: u32,
        data: *const c_void,
    ) -> lv2_sys::LV2_Worker_Status {
        let f = &*(instance as *const Fake);
        let bytes = std::slice::from_raw_parts(data.cast::<u8>(), size as usize);
        f.responses.fetch_add(1, Ordering::SeqCst);
        f.sum
            .fetch_add(bytes.iter().map(|&b| b as u32).sum(), Ordering::SeqCst);
        0
    }

    // SAFETY: the worker calls it with the `Fake` this test owns as the instance.
    unsafe extern "C" fn fake_end_run(instance: lv2_sys::LV2_Handle) -> lv2_sys::LV2_Worker_Status {
        (*(instance as *const Fake))
            .ended
            .fetch_add(1, Ordering::SeqCst);
        0
    }

    #[test]
    fn work_scheduled_in_run_is_done_on_the_worker_thread_and_delivered_after_run() {
        let fake = Fake {
            worked: AtomicU32::new(0),
            responses: AtomicU32::new(0),
            sum: AtomicU32::new(0),
            ended: AtomicU32::new(0),
        };
        let iface = lv2_sys::LV2_Worker_Interface {
            work: Some(fake_work),
            work_response: Some(fake_response),
            end_run: Some(fake_end_run),
        };
        let w = WorkerShared::new();
        // SAFETY: no worker thread yet and no `run`; `iface` and `fake` outlive `w`'s use.
        unsafe { w.attach(&iface, &fake as *const Fake as *mut c_void) };
        let sched = w.schedule_feature();
        // Outside run (instantiation): done at once on this thread, delivered next cycle.
        // SAFETY: the handle is `w`, alive; the data pointer is valid for the 2 bytes given.
        let st = unsafe { sched.schedule_work.unwrap()(sched.handle, 2, [1u8, 2].as_ptr().cast()) };
        assert_eq!(st, lv2_sys::LV2_Worker_Status_LV2_WORKER_SUCCESS);
        assert_eq!(fake.worked.load(Ordering::SeqCst), 1);
        let thread = WorkerThread::start(&w, crate::rt::crash::Label::new("test")).unwrap();
        // In run: queued for the worker thread.
        w.set_in_run(true);
        for k in 0..10u8 {
            // SAFETY: the handle is `w`, alive; the data pointer is valid for the 1 byte given.
            let st = unsafe { sched.schedule_work.unwrap()(sched.handle, 1, [k].as_ptr().cast()) };
            assert_eq!(st, lv2_sys::LV2_Worker_Status_LV2_WORKER_SUCCESS);
        }
        w.set_in_run(false);
        // Cycles until every response is back (generous: the worker thread may be late).
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while fake.responses.load(Ordering::SeqCst) < 11 && std::time::Instant::now() < until {
            // SAFETY: this thread plays the audio thread; nothing else calls `deliver`.
            unsafe { w.deliver() };
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        drop(thread);
        assert_eq!(fake.worked.load(Ordering::SeqCst), 11);
        assert_eq!(fake.responses.load(Ordering::SeqCst), 11);
        assert_eq!(w.delivered.load(Ordering::SeqCst), 11);
        // (1+2)*2 + 2*(0+1+…+9)
        assert_eq!(fake.sum.load(Ordering::SeqCst), 6 + 90);
        assert!(
            fake.ended.load(Ordering::SeqCst) >= 1,
            "end_run follows each delivery"
        );
        assert_eq!(w.dropped.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn messages_round_trip_across_the_ring_end() {
        let (mut tx, mut rx) = rtrb::RingBuffer::new(64);
        let mut out = vec![0u8; 64];
        // Wrap the ring several times so messages straddle its end.
        for i in 0..50u8 {
            let msg: Vec<u8> = (0..(i % 13)).map(|k| k ^ i).collect();
            assert!(push_message(&mut tx, &msg));
            assert_eq!(pop_message(&mut rx, &mut out), Some(msg.len()));
            assert_eq!(&out[..msg.len()], &msg[..]);
        }
        assert_eq!(pop_message(&mut rx, &mut out), None);
        assert!(
            !push_message(&mut tx, &[0; 61]),
            "a message that cannot fit is refused"
        );
    }
}
