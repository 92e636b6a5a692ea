//! LV2 state (the state extension) for `Plugin::save_state`/`restore_state`: the control
//! values, and, for a plugin that offers `state:interface`, every property its `save` stores.
//! The bytes are for a fresh instance of the same plugin in the same process (URIDs are
//! this process's): `plugins audit` saves one and restores it into another.
//!
//! Layout (little-endian u32s): the magic, the control count and the control values' bits;
//! the property count and per property key, type, flags, length and the value, padded to 4.

use crate::error::{Error, Result};
use lv2_raw::core::LV2Feature;
use std::ffi::c_void;

const MAGIC: u32 = 0x5832_5653; // "SV2X"
const INTERFACE: &str = "http://lv2plug.in/ns/ext/state#interface";
/// LV2_STATE_IS_POD | LV2_STATE_IS_PORTABLE: what a host may ask when it keeps the bytes.
const FLAGS: u32 = 1 | 2;

struct Prop {
    key: u32,
    ty: u32,
    flags: u32,
    /// u64 words: the plugin may read the value as any scalar, so it is 8-byte aligned.
    words: Vec<u64>,
    len: usize,
}

fn interface(instance: &lilv::instance::Instance) -> Option<&lv2_sys::LV2_State_Interface> {
    // SAFETY: extension_data on a live instance with the state URI returns, when the plugin
    // offers it, a static LV2_State_Interface (the extension says so).
    unsafe {
        instance
            .extension_data::<lv2_sys::LV2_State_Interface>(INTERFACE)
            .map(|p| &*p.as_ptr())
    }
}

fn feature_list(features: &[LV2Feature]) -> Vec<*const lv2_sys::LV2_Feature> {
    features
        .iter()
        .map(|f| (f as *const LV2Feature).cast::<lv2_sys::LV2_Feature>())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

// SAFETY: called by the plugin inside `save` with the handle we passed, a Vec<Prop>, and a
// value of `size` bytes it owns for the duration of the call; it is copied.
unsafe extern "C" fn store(
    handle: *mut c_void,
    key: u32,
    value: *const c_void,
    size: usize,
    ty: u32,
    flags: u32,
) -> u32 {
    let props = &mut *(handle as *mut Vec<Prop>);
    let mut words = vec![0u64; size.div_ceil(8)];
    if size > 0 && !value.is_null() {
        std::ptr::copy_nonoverlapping(value as *const u8, words.as_mut_ptr() as *mut u8, size);
    }
    props.retain(|p| p.key != key);
    props.push(Prop {
        key,
        ty,
        flags,
        words,
        len: size,
    });
    lv2_sys::LV2_State_Status_LV2_STATE_SUCCESS
}

// SAFETY: called by the plugin inside `restore` with the handle we passed, a Vec<Prop> that
// outlives the call, and out-pointers it owns; the value pointer stays valid until restore
// returns, which is as long as the extension allows the plugin to use it.
unsafe extern "C" fn retrieve(
    handle: *mut c_void,
    key: u32,
    size: *mut usize,
    ty: *mut u32,
    flags: *mut u32,
) -> *const c_void {
    let props = &*(handle as *const Vec<Prop>);
    match props.iter().find(|p| p.key == key) {
        Some(p) => {
            if !size.is_null() {
                *size = p.len;
            }
            if !ty.is_null() {
                *ty = p.ty;
            }
            if !flags.is_null() {
                *flags = p.flags;
            }
            p.words.as_ptr() as *const c_void
        }
        None => std::ptr::null(),
    }
}

/// The instance's state as bytes: its controls and what its `save` stores.
pub fn save(
    instance: &lilv::instance::Instance,
    controls: &[f32],
    features: &[LV2Feature],
) -> Result<Vec<u8>> {
    let mut props: Vec<Prop> = Vec::new();
    if let Some(save) = interface(instance).and_then(|i| i.save) {
        let list = feature_list(features);
        // SAFETY: a live instance, our store callback with the Vec it expects as handle, and a
        // null-terminated feature list that outlives the call; the audit calls this between
        // blocks, never during `run`.
        let status = unsafe {
            save(
                instance.handle(),
                Some(store),
                &mut props as *mut Vec<Prop> as *mut c_void,
                FLAGS,
                list.as_ptr(),
            )
        };
        if status != lv2_sys::LV2_State_Status_LV2_STATE_SUCCESS {
            return Err(Error::cannot_measure(format!(
                "the plugin's state save returned status {status}"
            )));
        }
    }
    let mut out = Vec::new();
    let mut put = |v: u32| out.extend_from_slice(&v.to_le_bytes());
    put(MAGIC);
    put(controls.len() as u32);
    for c in controls {
        put(c.to_bits());
    }
    put(props.len() as u32);
    for p in &props {
        put(p.key);
        put(p.ty);
        put(p.flags);
        put(p.len as u32);
    }
    for p in &props {
        // SAFETY: `words` holds at least `len` initialised bytes (zero-filled, then copied).
        let bytes = unsafe { std::slice::from_raw_parts(p.words.as_ptr() as *const u8, p.len) };
        out.extend_from_slice(bytes);
        out.resize(out.len().next_multiple_of(4), 0);
    }
    Ok(out)
}

/// Read back what [`save`] wrote into `controls` and the plugin's `restore`.
pub fn restore(
    instance: &lilv::instance::Instance,
    controls: &mut [f32],
    state: &[u8],
    features: &[LV2Feature],
) -> Result<()> {
    let bad = |why: &str| Error::cannot_measure(format!("not a saved LV2 state: {why}"));
    let mut pos = 0;
    let mut get = || -> Result<u32> {
        let b = state.get(pos..pos + 4).ok_or_else(|| bad("truncated"))?;
        pos += 4;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    if get()? != MAGIC {
        return Err(bad("wrong magic"));
    }
    let n = get()? as usize;
    if n != controls.len() {
        return Err(bad("saved from a plugin with another port count"));
    }
    let values: Vec<f32> = (0..n)
        .map(|_| get().map(f32::from_bits))
        .collect::<Result<_>>()?;
    let count = get()? as usize;
    let heads: Vec<(u32, u32, u32, usize)> = (0..count)
        .map(|_| Ok((get()?, get()?, get()?, get()? as usize)))
        .collect::<Result<_>>()?;
    let mut props = Vec::with_capacity(count);
    for (key, ty, flags, len) in heads {
        let bytes = state.get(pos..pos + len).ok_or_else(|| bad("truncated"))?;
        pos = (pos + len).next_multiple_of(4);
        let mut words = vec![0u64; len.div_ceil(8)];
        // SAFETY: `words` has room for `len` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), words.as_mut_ptr() as *mut u8, len)
        };
        props.push(Prop {
            key,
            ty,
            flags,
            words,
            len,
        });
    }
    controls.copy_from_slice(&values);
    if let Some(restore) = interface(instance).and_then(|i| i.restore) {
        let list = feature_list(features);
        // SAFETY: as in `save`, with our retrieve callback and the props it reads, which
        // outlive the call; never during `run`.
        let status = unsafe {
            restore(
                instance.handle(),
                Some(retrieve),
                &props as *const Vec<Prop> as *mut c_void,
                FLAGS,
                list.as_ptr(),
            )
        };
        if status != lv2_sys::LV2_State_Status_LV2_STATE_SUCCESS {
            return Err(Error::cannot_measure(format!(
                "the plugin's state restore returned status {status}"
            )));
        }
    }
    Ok(())
}
