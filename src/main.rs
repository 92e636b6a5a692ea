fn main() -> std::process::ExitCode {
    shims::install();
    xrunlab::cli::main()
}

/// The interposed C functions `plugins audit` counts on its audio thread
/// (src/measure/audit/probe.rs says why they live in the binary). Defining them here makes
/// GNU ld export them (libc defines them too), so every plugin library's calls bind here.
/// Each notes the call (an atomic load unless an audit is counting) and forwards to libc:
/// the allocation functions to glibc's exported `__libc_*` entry points, the rest to libc's
/// own symbol found once with `dlsym(RTLD_NEXT)` at start-up.
mod shims {
    use std::ffi::{c_int, c_uint, c_void};
    use std::sync::atomic::{AtomicPtr, Ordering};
    use xrunlab::measure::audit::probe::{note, set_shims_present, Op};

    extern "C" {
        fn __libc_malloc(size: usize) -> *mut c_void;
        fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
        fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
        fn __libc_free(p: *mut c_void);
        fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
        fn __libc_valloc(size: usize) -> *mut c_void;
        fn __libc_pvalloc(size: usize) -> *mut c_void;
    }

    /// libc's own function behind each forwarded name, resolved once.
    struct Real {
        name: &'static std::ffi::CStr,
        ptr: AtomicPtr<c_void>,
    }

    impl Real {
        const fn new(name: &'static std::ffi::CStr) -> Real {
            Real {
                name,
                ptr: AtomicPtr::new(std::ptr::null_mut()),
            }
        }
        fn get(&self) -> *mut c_void {
            let mut p = self.ptr.load(Ordering::Acquire);
            if p.is_null() {
                // SAFETY: dlsym with a valid C string; the loader resolves without calling
                // back into these functions.
                p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
                if p.is_null() {
                    // SAFETY: abort is always safe; a libc without the function cannot run us.
                    unsafe { libc::abort() };
                }
                self.ptr.store(p, Ordering::Release);
            }
            p
        }
    }

    static MUTEX_LOCK: Real = Real::new(c"pthread_mutex_lock");
    static RW_RD: Real = Real::new(c"pthread_rwlock_rdlock");
    static RW_WR: Real = Real::new(c"pthread_rwlock_wrlock");
    static COND_WAIT: Real = Real::new(c"pthread_cond_wait");
    static COND_TIMED: Real = Real::new(c"pthread_cond_timedwait");
    static SEM_WAIT: Real = Real::new(c"sem_wait");
    static SEM_TIMED: Real = Real::new(c"sem_timedwait");
    static NANOSLEEP: Real = Real::new(c"nanosleep");
    static CLOCK_NANOSLEEP: Real = Real::new(c"clock_nanosleep");
    static USLEEP: Real = Real::new(c"usleep");
    static SLEEP: Real = Real::new(c"sleep");
    static READ: Real = Real::new(c"read");
    static WRITE: Real = Real::new(c"write");
    static POLL: Real = Real::new(c"poll");
    const ALL: [&Real; 14] = [
        &MUTEX_LOCK,
        &RW_RD,
        &RW_WR,
        &COND_WAIT,
        &COND_TIMED,
        &SEM_WAIT,
        &SEM_TIMED,
        &NANOSLEEP,
        &CLOCK_NANOSLEEP,
        &USLEEP,
        &SLEEP,
        &READ,
        &WRITE,
        &POLL,
    ];

    /// Resolve libc's functions and tell the audit the shims are live if the loader really
    /// binds `malloc` and `pthread_mutex_lock` to them (otherwise it skips the check).
    pub fn install() {
        for r in ALL {
            r.get();
        }
        // SAFETY: dlsym with valid C strings.
        let bound = unsafe {
            std::ptr::eq(
                libc::dlsym(libc::RTLD_DEFAULT, c"malloc".as_ptr()) as *const (),
                malloc as *const (),
            ) && std::ptr::eq(
                libc::dlsym(libc::RTLD_DEFAULT, c"pthread_mutex_lock".as_ptr()) as *const (),
                pthread_mutex_lock as *const (),
            )
        };
        if bound {
            set_shims_present();
        }
    }

    macro_rules! real {
        ($r:expr, $t:ty) => {
            // SAFETY (of the caller's transmute): `$r` was resolved by the name of a libc
            // function whose C signature is `$t`.
            std::mem::transmute::<*mut c_void, $t>($r.get())
        };
    }

    // SAFETY (all below): each forwards to libc with the caller's arguments unchanged, so the
    // contract is libc's; noting touches only atomics and thread-locals.

    #[no_mangle]
    pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
        note(Op::Alloc);
        __libc_malloc(size)
    }

    #[no_mangle]
    pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
        note(Op::Alloc);
        __libc_calloc(n, size)
    }

    #[no_mangle]
    pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
        note(Op::Alloc);
        __libc_realloc(p, size)
    }

    #[no_mangle]
    pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
        note(Op::Alloc);
        match n.checked_mul(size) {
            Some(bytes) => __libc_realloc(p, bytes),
            None => {
                *libc::__errno_location() = libc::ENOMEM;
                std::ptr::null_mut()
            }
        }
    }

    #[no_mangle]
    pub unsafe extern "C" fn free(p: *mut c_void) {
        if !p.is_null() {
            note(Op::Free);
        }
        __libc_free(p)
    }

    #[no_mangle]
    pub unsafe extern "C" fn posix_memalign(
        out: *mut *mut c_void,
        align: usize,
        size: usize,
    ) -> c_int {
        note(Op::Alloc);
        if !align.is_power_of_two() || !align.is_multiple_of(std::mem::size_of::<*mut c_void>()) {
            return libc::EINVAL;
        }
        let p = __libc_memalign(align, size);
        if p.is_null() && size != 0 {
            return libc::ENOMEM;
        }
        *out = p;
        0
    }

    #[no_mangle]
    pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
        note(Op::Alloc);
        __libc_memalign(align, size)
    }

    #[no_mangle]
    pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
        note(Op::Alloc);
        __libc_memalign(align, size)
    }

    #[no_mangle]
    pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
        note(Op::Alloc);
        __libc_valloc(size)
    }

    #[no_mangle]
    pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
        note(Op::Alloc);
        __libc_pvalloc(size)
    }

    type PtrFn = unsafe extern "C" fn(*mut c_void) -> c_int;
    type PtrPtrFn = unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int;
    type PtrPtrPtrFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *const c_void) -> c_int;

    #[no_mangle]
    pub unsafe extern "C" fn pthread_mutex_lock(m: *mut c_void) -> c_int {
        note(Op::Lock);
        real!(MUTEX_LOCK, PtrFn)(m)
    }

    #[no_mangle]
    pub unsafe extern "C" fn pthread_rwlock_rdlock(l: *mut c_void) -> c_int {
        note(Op::Lock);
        real!(RW_RD, PtrFn)(l)
    }

    #[no_mangle]
    pub unsafe extern "C" fn pthread_rwlock_wrlock(l: *mut c_void) -> c_int {
        note(Op::Lock);
        real!(RW_WR, PtrFn)(l)
    }

    #[no_mangle]
    pub unsafe extern "C" fn pthread_cond_wait(c: *mut c_void, m: *mut c_void) -> c_int {
        note(Op::Wait);
        real!(
            COND_WAIT,
            unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int
        )(c, m)
    }

    #[no_mangle]
    pub unsafe extern "C" fn pthread_cond_timedwait(
        c: *mut c_void,
        m: *mut c_void,
        t: *const c_void,
    ) -> c_int {
        note(Op::Wait);
        real!(COND_TIMED, PtrPtrPtrFn)(c, m, t)
    }

    #[no_mangle]
    pub unsafe extern "C" fn sem_wait(s: *mut c_void) -> c_int {
        note(Op::Wait);
        real!(SEM_WAIT, PtrFn)(s)
    }

    #[no_mangle]
    pub unsafe extern "C" fn sem_timedwait(s: *mut c_void, t: *const c_void) -> c_int {
        note(Op::Wait);
        real!(SEM_TIMED, PtrPtrFn)(s, t)
    }

    #[no_mangle]
    pub unsafe extern "C" fn nanosleep(req: *const c_void, rem: *mut c_void) -> c_int {
        note(Op::Sleep);
        real!(
            NANOSLEEP,
            unsafe extern "C" fn(*const c_void, *mut c_void) -> c_int
        )(req, rem)
    }

    #[no_mangle]
    pub unsafe extern "C" fn clock_nanosleep(
        clock: c_int,
        flags: c_int,
        req: *const c_void,
        rem: *mut c_void,
    ) -> c_int {
        note(Op::Sleep);
        real!(
            CLOCK_NANOSLEEP,
            unsafe extern "C" fn(c_int, c_int, *const c_void, *mut c_void) -> c_int
        )(clock, flags, req, rem)
    }

    #[no_mangle]
    pub unsafe extern "C" fn usleep(us: c_uint) -> c_int {
        note(Op::Sleep);
        real!(USLEEP, unsafe extern "C" fn(c_uint) -> c_int)(us)
    }

    #[no_mangle]
    pub unsafe extern "C" fn sleep(s: c_uint) -> c_uint {
        note(Op::Sleep);
        real!(SLEEP, unsafe extern "C" fn(c_uint) -> c_uint)(s)
    }

    #[no_mangle]
    pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: usize) -> isize {
        note(Op::Io);
        real!(
            READ,
            unsafe extern "C" fn(c_int, *mut c_void, usize) -> isize
        )(fd, buf, n)
    }

    #[no_mangle]
    pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: usize) -> isize {
        note(Op::Io);
        real!(
            WRITE,
            unsafe extern "C" fn(c_int, *const c_void, usize) -> isize
        )(fd, buf, n)
    }

    #[no_mangle]
    pub unsafe extern "C" fn poll(fds: *mut c_void, n: u64, timeout: c_int) -> c_int {
        note(Op::Io);
        real!(POLL, unsafe extern "C" fn(*mut c_void, u64, c_int) -> c_int)(fds, n, timeout)
    }
}
