//! State (docs/methods.md "Plugin audit"): a plugin whose controls were moved saves its
//! state; a fresh instance restores it; after both settle on silence (so that the glide of a
//! control set directly is over) they process the same noise, and must give the same
//! output. A plugin without state ([`crate::dsp::Plugin::save_state`] says so) skips the
//! check with that reason.

use super::{AuditConfig, Check, Feed, Stage, Subject, Verdict};

/// Largest difference between the two outputs that still counts as the same.
const SAME: f32 = 1e-6;

/// Seconds of silence both instances process before the comparison (longer than the
/// parameter smoothing of the plugins seen: DPF's glide on ZamTube, ZamDelay's delay time).
const SETTLE_S: f64 = 0.5;

pub fn check(s: &Subject, cfg: &AuditConfig, stage: &mut dyn Stage) -> Check {
    let (rate, frames) = (cfg.cost_rate, cfg.cost_block as usize);
    stage.set("saving and restoring state");
    let make = || s.instantiate(rate, frames).map_err(|e| e.to_string());
    let run = || -> Result<Check, String> {
        let controls = s.controls();
        // Somewhere in each control's range that is unlikely to be its default.
        let moved = |p: &mut dyn crate::dsp::Plugin| {
            for c in &controls {
                p.set_control(c.index, c.at(0.37));
            }
        };
        let mut a = make()?;
        moved(a.as_mut());
        let mut feed = Feed::new(rate, frames);
        for _ in 0..8 {
            feed.fill(false);
            feed.process(a.as_mut());
        }
        let Some(saved) = a.save_state() else {
            return Ok(Check::new(
                "state",
                Verdict::Skip,
                "it has no state to save (a CLAP plugin without clap.state, or a built-in)",
            ));
        };
        let saved = saved.map_err(|e| format!("saving: {e}"))?;
        let mut b = make()?;
        if let Some(Err(e)) = b.restore_state(&saved) {
            return Ok(Check::new(
                "state",
                Verdict::Fail,
                format!("restoring its own state failed: {e}"),
            ));
        }
        let mut c = make()?;
        moved(c.as_mut());
        let again = b.save_state().and_then(|r| r.ok());
        let (mut fb, mut fc) = (Feed::new(rate, frames), Feed::new(rate, frames));
        // Both settle on silence first: a control set directly reaches some formats' plugins
        // in the next block (VST3's parameter queue) and glides there, while a restored state
        // holds it from the start. The glide is the plugin's smoothing, not its state; on
        // silence it leaves nothing behind, and a value restored wrong still shows after it.
        for _ in 0..super::blocks_for(SETTLE_S, rate, frames, 4) {
            fb.fill(true);
            fc.fill(true);
            fb.process(b.as_mut());
            fc.process(c.as_mut());
        }
        let mut worst = 0.0f32;
        for _ in 0..64 {
            fb.fill(false);
            fc.fill(false);
            fb.process(b.as_mut());
            fc.process(c.as_mut());
            for (x, y) in
                fb.l.iter()
                    .chain(fb.r.iter())
                    .zip(fc.l.iter().chain(fc.r.iter()))
            {
                let d = if x.is_finite() && y.is_finite() {
                    (x - y).abs()
                } else if x.to_bits() == y.to_bits() {
                    0.0
                } else {
                    f32::INFINITY
                };
                worst = worst.max(d);
            }
        }
        let same_bytes = match again {
            Some(b) if b == saved => "; saved again, the same bytes",
            Some(_) => "; saved again, different bytes",
            None => "",
        };
        Ok(if worst <= SAME {
            Check::new(
                "state",
                Verdict::Pass,
                format!("restored ({} bytes, {} controls moved): same output (max difference {worst:.1e}){same_bytes}", saved.len(), controls.len()),
            )
            .value(worst as f64)
        } else {
            Check::new(
                "state",
                Verdict::Fail,
                format!("restored ({} bytes): output differs by up to {worst:.2e} from an instance set directly{same_bytes}", saved.len()),
            )
            .value(worst as f64)
        })
    };
    run().unwrap_or_else(|e| Check::new("state", Verdict::Fail, e))
}
