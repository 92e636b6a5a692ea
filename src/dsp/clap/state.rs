//! A CLAP plugin's state in memory (`clap.state`'s save and load through host streams), for
//! `plugins audit`'s state check. Main-thread calls, never in the cycle.

use super::catalog;
use clap_sys::ext::state::{clap_plugin_state, CLAP_EXT_STATE};
use clap_sys::plugin::clap_plugin;
use clap_sys::stream::{clap_istream, clap_ostream};
use std::ffi::c_void;

/// The bytes being read back, and how far.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

unsafe extern "C" fn write(stream: *const clap_ostream, buffer: *const c_void, size: u64) -> i64 {
    // SAFETY: `ctx` is the Vec `save` made, alive for the call; the plugin's buffer holds
    // `size` bytes.
    unsafe {
        let out = &mut *((*stream).ctx as *mut Vec<u8>);
        let Ok(n) = usize::try_from(size) else {
            return -1;
        };
        if n > 0 {
            out.extend_from_slice(std::slice::from_raw_parts(buffer.cast::<u8>(), n));
        }
        n as i64
    }
}

unsafe extern "C" fn read(stream: *const clap_istream, buffer: *mut c_void, size: u64) -> i64 {
    // SAFETY: `ctx` is the Reader `load` made, alive for the call; the plugin's buffer has
    // room for `size` bytes and gets at most that.
    unsafe {
        let r = &mut *((*stream).ctx as *mut Reader);
        let n = usize::try_from(size)
            .unwrap_or(usize::MAX)
            .min(r.bytes.len() - r.pos);
        if n > 0 {
            std::ptr::copy_nonoverlapping(r.bytes.as_ptr().add(r.pos), buffer.cast::<u8>(), n);
        }
        r.pos += n;
        n as i64
    }
}

/// The plugin's state; `None` when it has no `clap.state`.
///
/// # Safety
/// `p` is a live, initialised plugin, called from its main thread.
pub unsafe fn save(p: *const clap_plugin) -> Option<Result<Vec<u8>, String>> {
    // SAFETY: the caller's contract.
    let ext = unsafe { catalog::extension::<clap_plugin_state>(p, CLAP_EXT_STATE) }?;
    let save = ext.save?;
    let mut bytes: Vec<u8> = Vec::new();
    let stream = clap_ostream {
        ctx: (&mut bytes as *mut Vec<u8>).cast(),
        write: Some(write),
    };
    // SAFETY: the plugin's own function; the stream and its buffer outlive the call.
    let ok = unsafe { save(p, &stream) };
    Some(if ok {
        Ok(bytes)
    } else {
        Err("its state save failed".into())
    })
}

/// Load `bytes` as the plugin's state; `None` when it has no `clap.state`.
///
/// # Safety
/// As for [`save`].
pub unsafe fn load(p: *const clap_plugin, bytes: &[u8]) -> Option<Result<(), String>> {
    // SAFETY: the caller's contract.
    let ext = unsafe { catalog::extension::<clap_plugin_state>(p, CLAP_EXT_STATE) }?;
    let load = ext.load?;
    let mut reader = Reader { bytes, pos: 0 };
    let stream = clap_istream {
        ctx: (&mut reader as *mut Reader).cast(),
        read: Some(read),
    };
    // SAFETY: the plugin's own function; the stream and the bytes outlive the call.
    let ok = unsafe { load(p, &stream) };
    Some(if ok {
        Ok(())
    } else {
        Err("its state load failed".into())
    })
}
