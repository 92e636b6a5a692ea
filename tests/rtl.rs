//! `xrunlab rtl`: the model against Table 1 of the Raspberry Pi 4 study (Vignati et al.), and the estimator against the
//! virtual loop's ground truth (offline: deterministic, no real time).

mod common;

use xrunlab::measure::rtl::*;

fn lat(fifo: u32, adc: u32, dac: u32) -> LoopLatency {
    LoopLatency {
        fifo_frames: fifo,
        adc_frames: adc,
        dac_frames: dac,
    }
}

/// Measure an offline loop; returns the measurement and the ground truth in frames.
fn measure(buffer: u32, periods: u32, spec: LoopbackSpec, seconds: u64) -> (RtlMeasurement, f64) {
    let mut est = Estimator::new(EstimatorConfig::new(48000, seconds * 1_000_000_000));
    let mut line = LoopLine::new(&spec, buffer, periods, est.emitted_rms(), 7);
    run_offline(&mut est, &mut line, buffer, seconds * 48000);
    let truth = model_frames(buffer, periods, &spec.latency) as f64 + spec.fraction;
    (est.result(), truth)
}

#[test]
fn vignati_table1_is_reproduced_exactly() {
    // Table 1 of Vignati et al.: buffer, PREEMPT_RT (ms, samples), Xenomai (ms, samples).
    type Cell = (f64, u64);
    let table: [(u32, Option<Cell>, Cell); 6] = [
        (16, None, (1.2, 57)),
        (32, None, (1.86, 89)),
        (64, Some((3.34, 160)), (3.2, 153)),
        (128, Some((6.0, 288)), (5.86, 281)),
        (256, Some((11.34, 544)), (11.2, 537)),
        (512, Some((22.0, 1056)), (21.86, 1049)),
    ];
    let x = profile("xenomai-hifiberry").unwrap();
    let p = profile("preemptrt-hifiberry").unwrap();
    let bufs: Vec<u32> = table.iter().map(|r| r.0).collect();
    let xr = model_table(&bufs, 2, 48000, &x.latency, x.min_buffer);
    let pr = model_table(&bufs, 2, 48000, &p.latency, p.min_buffer);
    for (i, (b, prt, xen)) in table.iter().enumerate() {
        assert_eq!(xr[i].rtl_frames, xen.1, "xenomai {b}");
        assert_eq!(
            format!("{:.2}", xr[i].published_ms),
            format!("{:.2}", xen.0),
            "xenomai {b}"
        );
        assert!(!xr[i].below_profile_min);
        match prt {
            None => assert!(pr[i].below_profile_min, "preempt_rt {b} is '-' in Table 1"),
            Some((ms, frames)) => {
                assert!(!pr[i].below_profile_min);
                assert_eq!(pr[i].rtl_frames, *frames, "preempt_rt {b}");
                assert_eq!(
                    format!("{:.2}", pr[i].published_ms),
                    format!("{ms:.2}"),
                    "preempt_rt {b}"
                );
            }
        }
        // The exact value differs from the printed one by the paper's rounding only.
        assert!((xr[i].rtl_ms - xen.0).abs() <= 0.02);
    }
}

#[test]
fn virtual_loop_ground_truth_within_a_hundredth_of_a_frame() {
    let cases = [
        (16, 2, lat(13, 2, 10), 0.0),
        (64, 2, lat(20, 2, 10), 0.0),
        (256, 3, lat(0, 0, 0), 0.0),
        (128, 2, lat(13, 2, 10), 0.37),
        (32, 2, lat(7, 1, 3), 0.5),
        (1024, 2, lat(100, 20, 40), 0.83),
    ];
    for (b, n, l, frac) in cases {
        let mut spec = LoopbackSpec::new(l);
        spec.fraction = frac;
        let (m, truth) = measure(b, n, spec, 6);
        assert_eq!(m.outcome, RtlOutcome::Measured, "{b}/{n}: {}", m.message);
        let d = m.delay_frames.unwrap();
        assert!(
            (d - truth).abs() <= 0.01,
            "{b}/{n} {l:?}+{frac}: measured {d}, truth {truth}"
        );
        assert!(m.converged, "{b}/{n}: {}", m.message);
        assert_eq!(m.inverted, Some(false));
        eprintln!(
            "buffer {b} n {n} truth {truth}: measured {d:.5} converged after {:?} s",
            m.converged_after_s
        );
    }
}

#[test]
fn noise_at_20db_snr_stays_within_five_hundredths() {
    for (b, frac) in [(64, 0.0), (128, 0.25)] {
        let mut spec = LoopbackSpec::new(lat(13, 2, 10));
        spec.fraction = frac;
        spec.snr_db = Some(20.0);
        let (m, truth) = measure(b, 2, spec, 8);
        let d = m.delay_frames.expect(&m.message);
        assert!((d - truth).abs() <= 0.05, "measured {d}, truth {truth}");
        assert!((m.snr_db - 20.0).abs() < 3.0, "SNR seen {}", m.snr_db);
        eprintln!(
            "20 dB: truth {truth} measured {d:.5} conv {:?}",
            m.converged_after_s
        );
    }
}

#[test]
fn inversion_is_detected() {
    let mut spec = LoopbackSpec::new(lat(20, 2, 10));
    spec.invert = true;
    spec.fraction = 0.6;
    let (m, truth) = measure(64, 2, spec, 6);
    assert_eq!(m.inverted, Some(true), "{}", m.message);
    assert!((m.delay_frames.unwrap() - truth).abs() <= 0.01);
}

#[test]
fn no_signal_is_too_weak_with_its_level() {
    let mut spec = LoopbackSpec::new(lat(13, 2, 10));
    spec.connected = false;
    let (m, _) = measure(64, 2, spec, 3);
    assert_eq!(m.outcome, RtlOutcome::TooWeak);
    assert!(m.delay_frames.is_none());
    assert!(m.message.contains("too weak") && m.message.contains("dBFS"));
    // Only noise coming back: still no number.
    spec.snr_db = Some(20.0);
    let (m, _) = measure(64, 2, spec, 3);
    assert_eq!(m.outcome, RtlOutcome::TooWeak, "{}", m.message);
    // A very quiet return.
    let mut spec = LoopbackSpec::new(lat(13, 2, 10));
    spec.gain_db = -70.0;
    let (m, _) = measure(64, 2, spec, 3);
    assert_eq!(m.outcome, RtlOutcome::TooWeak, "{}", m.message);
    assert!(
        m.level_dbfs < -60.0 && m.level_dbfs > -90.0,
        "{}",
        m.level_dbfs
    );
}

#[test]
fn delay_beyond_the_range_is_refused() {
    // 1.4 s of FIFO: more than the 1.25 s window.
    let spec = LoopbackSpec::new(lat(67_200, 0, 0));
    let (m, _) = measure(64, 2, spec, 5);
    assert_eq!(m.outcome, RtlOutcome::BeyondRange, "{}", m.message);
    assert!(m.delay_frames.is_none());
    assert!(m.max_measurable_frames >= 48_000);
    // Just inside the range is measured.
    let spec = LoopbackSpec::new(lat(50_000, 0, 0));
    let (m, truth) = measure(64, 2, spec, 5);
    assert!((m.delay_frames.expect(&m.message) - truth).abs() <= 0.01);
}

#[test]
fn cli_model_prints_table1_and_bad_input_is_usage() {
    let out = common::xrunlab()
        .args([
            "rtl",
            "--model",
            "--profile",
            "preemptrt-hifiberry",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "rtl");
    let rows = v["results"]["model"].as_array().unwrap();
    let frames: Vec<u64> = rows
        .iter()
        .map(|r| r["rtl_frames"].as_u64().unwrap())
        .collect();
    assert_eq!(frames, [64, 96, 160, 288, 544, 1056]);
    for bad in [
        &["rtl", "--model", "--codec", "2+x"][..],
        &["rtl", "--model", "--profile", "nope"],
        &["rtl", "--driver", "virtual"],
        &["rtl"],
        &["rtl", "--driver", "sim", "--fraction", "1.5"],
        &["rtl", "--model", "--buffers", "0"],
    ] {
        common::xrunlab().args(bad).assert().code(2);
    }
}

#[test]
fn cli_sim_loop_writes_measured_and_model_side_by_side() {
    let dir = std::env::temp_dir().join(format!("xrunlab-rtl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rtl.json");
    common::xrunlab()
        .args([
            "rtl", "--driver", "sim", "--buffer", "128", "--fifo", "20", "--codec", "2+10",
        ])
        .args(["--fraction", "0.25", "--invert", "-q", "-o"])
        .arg(&path)
        .assert()
        .success();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let r = &v["results"];
    assert_eq!(r["model"][0]["rtl_frames"], 288);
    assert!((r["difference_frames"].as_f64().unwrap() - 0.25).abs() < 0.01);
    assert!(r["error_frames"].as_f64().unwrap().abs() < 0.01);
    assert_eq!(r["measured"]["inverted"], true);
    assert!(r["measured"]["estimates"].as_array().unwrap().len() >= 8);
    // An unplugged loop is no number and exit 3.
    common::xrunlab()
        .args(["rtl", "--driver", "sim", "--unplugged", "-q"])
        .assert()
        .code(3);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn virtual_driver_loop_in_real_time() {
    if !common::require(common::is_root(), "root for an RT virtual device thread") {
        return;
    }
    // Large buffers and 4 periods leave 32 ms of slack against the VM's wake-up spikes.
    let mut cfg = RtlConfig::model(48000, vec![512], 4, lat(13, 2, 10));
    cfg.driver = Some(xrunlab::driver::DriverKind::Virtual);
    cfg.loopback.fraction = 0.5;
    cfg.duration_ns = 5_000_000_000;
    let r = run(&cfg, &mut xrunlab::measure::session::Session::silent()).unwrap();
    let m = r.results.measured.unwrap();
    eprintln!(
        "virtual: {:?} in {} cycles, {} xruns: {}",
        m.delay_frames, r.results.cycles, r.results.xruns, m.message
    );
    let truth = 4.0 * 512.0 + 25.5;
    if r.results.xruns == 0 {
        // Without deadline misses the real-time loop is the offline loop: same accuracy.
        assert_eq!(m.outcome, RtlOutcome::Measured, "{}", m.message);
        assert!((m.delay_frames.unwrap() - truth).abs() <= 0.01);
    } else {
        // Missed deadlines put silence into the loop: the result may be "too weak", but a
        // number, if given, must still be the right one.
        assert!(!r.warnings.is_empty());
        if let Some(d) = m.delay_frames {
            assert!((d - truth).abs() < 0.25, "{d}");
        }
    }
}

/// A loop of `delay` frames driven block by block, where the output of the blocks in
/// `lost` never reaches the line (a missed deadline) and the estimator is told so.
fn run_with_lost_blocks(
    est: &mut Estimator,
    delay: usize,
    b: usize,
    total: usize,
    lost: std::ops::Range<usize>,
    tell: bool,
) {
    let mut line = vec![0.0f32; total + delay + b];
    let (mut inp, mut out) = (vec![0.0f32; b], vec![0.0f32; b]);
    let mut frame = 0;
    while frame + b <= total {
        for (i, x) in inp.iter_mut().enumerate() {
            *x = (frame + i).checked_sub(delay).map_or(0.0, |s| line[s]);
        }
        est.process(frame as u64, &inp, &mut out);
        if lost.contains(&frame) {
            if tell {
                est.disturb(frame as u64, (frame + b) as u64);
            }
        } else {
            line[frame..frame + b].copy_from_slice(&out);
        }
        frame += b;
    }
}

#[test]
fn hops_hit_by_an_xrun_are_left_out_and_estimates_go_on() {
    let (delay, b) = (300usize, 64usize);
    // Three lost blocks at 3.5 s of a 4.5 s run: inside the last second's windows.
    let lost = 168_000..168_000 + 3 * b;
    let mut est = Estimator::new(EstimatorConfig::new(48000, 5_000_000_000));
    run_with_lost_blocks(&mut est, delay, b, 216_000, lost.clone(), true);
    let m = est.result();
    assert!(m.disturbed_hops > 0, "{}", m.message);
    assert!(m.message.contains("left out"), "{}", m.message);
    assert!(m.converged, "{}", m.message);
    assert!((m.delay_frames.unwrap() - delay as f64).abs() <= 0.01);
    // No estimate is formed when its newest hop overlaps the damage [lost.start, lost.end +
    // delay); every other hop after the first full ring gives one, from the clean hops
    // (the damaged phases of the window taken from the window before).
    let hop = m.hop_frames as f64;
    let damage = (lost.start as f64, (lost.end + delay + 1) as f64);
    for e in &m.estimates {
        let end = e.t_s * 48000.0;
        assert!(
            end <= damage.0 || end - hop >= damage.1,
            "an estimate ending at {end} used a damaged hop"
        );
        assert!(!e.excluded);
        assert!(
            (e.delay_frames.unwrap() - delay as f64).abs() <= 0.01,
            "{e:?}"
        );
    }
    let hops = 216_000 / m.hop_frames;
    assert_eq!(
        m.estimates.len() as u64,
        hops - (m.window_frames / m.hop_frames - 1) - m.disturbed_hops,
        "one estimate per clean hop"
    );
    assert_eq!(m.excluded_estimates, 0);
    // The same loop, untold: every hop counts (and the damaged ones spoil the estimates).
    let mut est = Estimator::new(EstimatorConfig::new(48000, 5_000_000_000));
    run_with_lost_blocks(&mut est, delay, b, 216_000, lost, false);
    assert_eq!(est.result().disturbed_hops, 0);
}

/// A host that stalls every 400 ms never leaves a clean 1.25 s window, yet the estimate
/// converges from the clean hops of each window phase.
#[test]
fn stalls_shorter_apart_than_a_window_still_give_an_exact_estimate() {
    let (delay, b) = (517usize, 64usize);
    let mut est = Estimator::new(EstimatorConfig::new(48000, 12_000_000_000));
    let mut line = vec![0.0f32; 12 * 48000 + delay + b];
    let (mut inp, mut out) = (vec![0.0f32; b], vec![0.0f32; b]);
    let mut frame = 0;
    while frame + b <= 12 * 48000 {
        for (i, x) in inp.iter_mut().enumerate() {
            *x = (frame + i).checked_sub(delay).map_or(0.0, |s| line[s]);
        }
        est.process(frame as u64, &inp, &mut out);
        // Two blocks lost every 19 200 frames (400 ms), at a phase that drifts through the
        // window.
        if frame % 19_200 < 2 * b {
            est.disturb(frame as u64, (frame + b) as u64);
        } else {
            line[frame..frame + b].copy_from_slice(&out);
        }
        frame += b;
    }
    let m = est.result();
    assert_eq!(m.outcome, RtlOutcome::Measured, "{}", m.message);
    assert!(m.converged, "{}", m.message);
    assert!(m.disturbed_hops > 20, "{}", m.disturbed_hops);
    assert!(
        (m.delay_frames.unwrap() - delay as f64).abs() <= 0.01,
        "{m:?}"
    );
}

#[test]
fn a_late_xrun_report_undoes_convergence_it_hit() {
    let spec = LoopbackSpec::new(lat(13, 2, 10));
    let mut est = Estimator::new(EstimatorConfig::new(48000, 6_000_000_000));
    let mut line = LoopLine::new(&spec, 64, 2, est.emitted_rms(), 7);
    run_offline(&mut est, &mut line, 64, 6 * 48000);
    let before = est.result();
    assert!(before.converged);
    let t = before.converged_after_s.unwrap();
    // An xrun reported after the run, half a second before convergence was declared.
    let at = ((t - 0.5) * 48000.0) as u64;
    est.disturb(at, at + 64);
    let after = est.result();
    assert!(after.excluded_estimates > 0);
    assert!(!after.converged, "{}", after.message);
    assert!(after.message.contains("not converged"), "{}", after.message);
    // The estimates that remain are still right.
    let truth = model_frames(64, 2, &spec.latency) as f64;
    assert!((after.delay_frames.unwrap() - truth).abs() <= 0.01);
}

/// A server that reports its xruns after the run (JACK's dummy driver on a noisy host) can
/// exclude every estimate of a silent loop: that is still "too weak", not "no estimate".
#[test]
fn a_silent_loop_disturbed_after_the_run_is_still_too_weak() {
    let mut spec = LoopbackSpec::new(lat(13, 2, 10));
    spec.connected = false;
    let mut est = Estimator::new(EstimatorConfig::new(48000, 6_000_000_000));
    let mut line = LoopLine::new(&spec, 64, 2, est.emitted_rms(), 7);
    run_offline(&mut est, &mut line, 64, 3 * 48000);
    assert!(est.disturb_before_convergence(0, 3 * 48000));
    let m = est.result();
    assert_eq!(m.disturbed_hops, 0);
    assert!(m.excluded_estimates > 0, "{}", m.message);
    assert_eq!(m.outcome, RtlOutcome::TooWeak, "{}", m.message);
    assert!(
        m.message.contains("is the loop connected?"),
        "{}",
        m.message
    );
}

/// A run shorter than the loop gives no estimate, and at analysis that looked like a cable
/// that is not connected ("signal too weak … is the loop connected?"). The sim loop's delay
/// is the model, so such a run is refused before it starts (exit 2) with the shortest
/// duration that does hold one analysis window of the return; that duration measures, one
/// millisecond less is refused. A loop beyond the measurable range is refused whatever the
/// duration.
#[test]
fn a_duration_shorter_than_the_loop_is_refused_with_the_minimum() {
    let rtl = |buffer: &str, duration: &str| {
        common::xrunlab()
            .args(["rtl", "--driver", "sim", "--buffer", buffer, "-q", "--json"])
            .args(["--duration", duration])
            .output()
            .unwrap()
    };
    let o = rtl("60000", "2s");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        !err.contains("too weak") && !err.contains("connected"),
        "{err}"
    );
    assert!(
        err.contains("120000 frames") && err.contains("beyond"),
        "{err}"
    );
    assert!(o.stdout.is_empty(), "nothing was measured");

    // 2 × 16384 frames before the return: 1 s cannot hold a window of it.
    let o = rtl("16384", "1s");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("too weak"), "{err}");
    let min_ms: u64 = err
        .split("at least --duration ")
        .nth(1)
        .and_then(|t| t.split("ms").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no minimum duration in: {err}"));
    assert!(min_ms > 1000, "{err}");
    let o = rtl("16384", &format!("{min_ms}ms"));
    assert_eq!(o.status.code(), Some(0), "{}", common::show(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = &v["results"]["measured"];
    assert_eq!(m["outcome"], "measured", "{m}");
    let d = m["delay_frames"].as_f64().unwrap();
    assert!((d - 32768.0).abs() < 0.01, "{m}");
    let o = rtl("16384", &format!("{}ms", min_ms - 1));
    assert_eq!(o.status.code(), Some(2), "{}", common::show(&o));
}
