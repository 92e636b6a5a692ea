//! The server's buffer size: reading it, setting it (`--set-buffer`, `load`'s grid) and
//! putting the original back.

use super::{connect, library_identity, JackConfig};
use crate::error::{Error, Result};
use std::time::Duration;

/// The server's buffer size now. jackd2's clients read it from the server's shared state;
/// an inactive pipewire-jack client keeps the size it saw at open, so there a fresh client
/// is asked.
pub(super) fn server_frames(client: &jack::Client) -> u32 {
    if library_identity().1 != "pipewire" {
        return client.buffer_size();
    }
    let probe = format!("{}-probe", client.name());
    match jack::Client::new(&probe, jack::ClientOptions::NO_START_SERVER) {
        Ok((c, _)) => c.buffer_size(),
        Err(_) => client.buffer_size(),
    }
}

/// Ask the server for `want` frames per period (jack_set_buffer_size) and wait until the
/// change has reached it: it arrives asynchronously (PipeWire re-negotiates the quantum),
/// and a client must not start at the old size.
pub(super) fn set_buffer_size(client: &jack::Client, want: u32) -> Result<()> {
    let before = server_frames(client);
    if before == want {
        return Ok(());
    }
    client.set_buffer_size(want).map_err(|e| {
        Error::cannot_measure(format!(
            "jack_set_buffer_size({want}) failed: {e} (the server stays at {before})"
        ))
    })?;
    let t = std::time::Instant::now();
    let mut now = server_frames(client);
    while now != want && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
        now = server_frames(client);
    }
    if now == want {
        Ok(())
    } else {
        Err(Error::cannot_measure(format!(
            "asked the JACK server for {want} frames, it stays at {now}"
        )))
    }
}

/// A client that only manages the server for a series of runs (`load`'s grid): reads its
/// buffer size and rate, sets the buffer size per cell, and puts the original size back
/// when dropped — after the grid, on an error, or on an interrupt. It is never activated,
/// so it is not part of the graph and costs the server nothing per cycle.
pub struct JackControl {
    client: jack::Client,
    pub rate: u32,
    /// The server's buffer size when we came.
    pub original_frames: u32,
    pub server: String,
    pub library_version: String,
    changed: bool,
}

impl JackControl {
    pub fn open(cfg: &JackConfig) -> Result<JackControl> {
        let client = connect(cfg, &format!("{}-ctl", cfg.client_name))?;
        let (library_version, server) = library_identity();
        Ok(JackControl {
            rate: client.sample_rate(),
            original_frames: client.buffer_size(),
            client,
            server,
            library_version,
            changed: false,
        })
    }

    /// The server's buffer size now.
    pub fn frames(&self) -> u32 {
        server_frames(&self.client)
    }

    /// Switch the server to `frames` per period and wait until it took effect.
    pub fn set_frames(&mut self, frames: u32) -> Result<()> {
        if frames != self.frames() {
            self.changed = true;
        }
        set_buffer_size(&self.client, frames)
    }

    /// Leave the client without closing it, once its server is gone: jackd2's libjack
    /// crashes in jack_client_close on a client whose server was killed (its shared memory
    /// went with it) and can block on others; there is nothing left to restore anyway.
    pub fn abandon(self) {
        std::mem::forget(self);
    }

    /// Put the original buffer size back if we changed it; true when we had. Drop does this
    /// too, but only this call reports a failure. One attempt either way.
    pub fn restore(&mut self) -> Result<bool> {
        let changed = std::mem::take(&mut self.changed);
        if changed {
            set_buffer_size(&self.client, self.original_frames)?;
        }
        Ok(changed)
    }
}

impl Drop for JackControl {
    fn drop(&mut self) {
        // Every ending but an unwind calls restore() itself and reports a failure as a
        // warning; an unwind has its panic to say what went wrong.
        let _ = self.restore();
    }
}

/// Put back the size `--set-buffer` changed, unless someone else changed it meanwhile (the
/// run then stopped on that change, and the newer choice is theirs). True when restored;
/// the error when the server refused.
pub(super) fn restore_buffer(control: Option<JackControl>, ours: u32) -> Result<bool> {
    let Some(mut c) = control else {
        return Ok(false);
    };
    if c.frames() != ours {
        c.changed = false;
        return Ok(false);
    }
    c.restore()
}
