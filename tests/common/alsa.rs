//! A test-local ALSA configuration with PCMs routed to a private JACK server through the
//! ALSA `jack` plugin (Debian libasound2-plugins), so the `alsa` driver runs against the
//! real ALSA API, paced in real time, without a sound card.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The system configuration ALSA_CONFIG_PATH replaces; ours includes it first, so every
/// standard PCM and plugin definition stays available.
const SYSTEM_CONF: &str = "/usr/share/alsa/alsa.conf";

/// The plugin module, if installed (multiarch or plain lib directory).
pub fn jack_plugin() -> Option<PathBuf> {
    [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
        "/usr/lib64",
    ]
    .iter()
    .map(|d| Path::new(d).join("alsa-lib/libasound_module_pcm_jack.so"))
    .find(|p| p.is_file())
}

/// Write `asound.conf` into `dir`: `xrl` (duplex: capture and playback ports of the
/// server's system client), `xrlplay` (playback only) and `xrlloop` (duplex, its playback
/// looped into its capture inside JACK, see `LOOP_PCM`). Returns its path, for
/// ALSA_CONFIG_PATH.
pub fn write_conf(dir: &Path) -> PathBuf {
    let p = dir.join("asound.conf");
    let text = format!(
        "<{SYSTEM_CONF}>\n\
         pcm.xrl {{\n  type jack\n  \
           playback_ports {{ 0 system:playback_1 1 system:playback_2 }}\n  \
           capture_ports {{ 0 system:capture_1 1 system:capture_2 }}\n}}\n\
         pcm.xrlplay {{\n  type jack\n  \
           playback_ports {{ 0 system:playback_1 1 system:playback_2 }}\n}}\n\
         {LOOP_PCM}"
    );
    std::fs::write(&p, text).unwrap();
    p
}

/// `xrlloop`: the plugin opens each stream as its own JACK client; `asym` gives each its
/// own PCM so the clients get fixed names, and the capture client's ports are connected
/// to the playback client's outputs when capture starts (playback starts first, so they
/// exist). The playback side also feeds the system ports: the plugin needs a port name
/// per channel.
pub const LOOP_PCM: &str = "\
pcm.xrlloop {
  type asym
  playback.pcm \"xrlloop_p\"
  capture.pcm \"xrlloop_c\"
}
pcm.xrlloop_p {
  type jack
  name \"xrlloopP\"
  playback_ports { 0 system:playback_1 1 system:playback_2 }
}
pcm.xrlloop_c {
  type jack
  name \"xrlloopC\"
  capture_ports { 0 xrlloopP:out_000 1 xrlloopP:out_001 }
}
";

/// A private jackd dummy server at `rate`/`frames` and an ALSA configuration (see
/// [`write_conf`]) whose PCMs reach it, or None (skip outside CI) when jackd or the plugin
/// is missing. Keep the directory alive as long as the configuration is used.
pub fn require_plugin_on_jackd(
    rate: u32,
    frames: u32,
) -> Option<(super::servers::JackdServer, tempfile::TempDir, PathBuf)> {
    if !super::require(
        jack_plugin().is_some(),
        "the ALSA jack plugin (apt install libasound2-plugins)",
    ) {
        return None;
    }
    let server = super::servers::require_jackd(rate, frames)?;
    let dir = tempfile::tempdir().unwrap();
    let conf = write_conf(dir.path());
    Some((server, dir, conf))
}
