/// The most the same DSP may differ between its LV2 and CLAP builds: both run DPF's one
/// `run()` on the same floats, so any difference is the host's doing.
const SAME: f32 = 1e-6;

#[test]
fn the_same_dsp_as_lv2_and_clap_gives_the_same_output() {
    if !installed() {
        return;
    }
    let ctx = xrunlab::dsp::PluginContext {
        rate: 48000,
        max_frames: 256,
    };
    let mut worst = Vec::new();
    for (name, params_lv2, params_clap) in [
        ("ZamEQ2", "", ""),
        ("ZamComp", "thresdb=-30", "threshold=-30"),
        ("ZamTube", "", ""),
        ("ZamAutoSat", "", ""),
    ] {
        let lv2 = format!("lv2:urn:zamaudio:{name}");
        let clap = format!("clap:com.zamaudio.{name}");
        let Ok(mut a) = xrunlab::dsp::registry::create(&lv2, params_lv2, &ctx) else {
            require(false, &format!("{lv2} (zam-plugins)"));
            return;
        };
        let mut b = xrunlab::dsp::registry::create(&clap, params_clap, &ctx).unwrap();
        let mut seed = 0x9e37_79b9u32;
        let mut max_diff = 0f32;
        let mut peak = 0f32;
        for _ in 0..200 {
            let mut l = vec![0f32; 256];
            for s in l.iter_mut() {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                *s = 0.1 * (seed as f32 / u32::MAX as f32 * 2.0 - 1.0);
            }
            let (mut al, mut ar) = (l.clone(), l.clone());
            let (mut bl, mut br) = (l.clone(), l);
            a.process(&mut al, &mut ar);
            b.process(&mut bl, &mut br);
            for (x, y) in al.iter().chain(&ar).zip(bl.iter().chain(&br)) {
                max_diff = max_diff.max((x - y).abs());
                peak = peak.max(x.abs());
            }
        }
        eprintln!("{name}: LV2 against CLAP, max |difference| {max_diff:e} (output peak {peak})");
        assert!(peak > 1e-3, "{name}: silence");
        worst.push((name, max_diff));
    }
    for (name, d) in worst {
        assert!(d <= SAME, "{name}: LV2 and CLAP differ by up to {d:e}");
    }
}
