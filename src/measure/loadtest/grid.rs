//! The grid of `load` as it runs: the cells in turn under the session's stress, each cell's
//! bracket-then-bisect search over trials, and how a grid ends early (an interrupt, the JACK
//! server going away, the watchdog) with a partial result that `--resume` continues.

use super::*;

/// The bracket-then-bisect search over a monotone pass/fail `trial`. Returns the largest
/// passing count in `0..=cap` and whether `cap` itself passed; `trial(0)` is never asked
/// (no instances always pass). `Ok(None)` from `trial` aborts (interrupted).
pub fn search(
    est: u32,
    cap: u32,
    mut trial: impl FnMut(u32) -> Result<Option<bool>>,
) -> Result<Option<(u32, bool)>> {
    let mut run = |n: u32| -> Result<Option<bool>> {
        if n == 0 {
            Ok(Some(true))
        } else {
            trial(n)
        }
    };
    let start = est.clamp(1, cap);
    let Some(first) = run(start)? else {
        return Ok(None);
    };
    // lo passes, hi fails (hi = None: no failure seen yet).
    let (mut lo, mut hi);
    if first {
        lo = start;
        hi = None;
        let mut step = 1u32;
        while hi.is_none() {
            if lo == cap {
                return Ok(Some((cap, true)));
            }
            let n = lo.saturating_add(step).min(cap);
            match run(n)? {
                None => return Ok(None),
                Some(true) => lo = n,
                Some(false) => hi = Some(n),
            }
            step = step.saturating_mul(2);
        }
    } else {
        hi = Some(start);
        let mut step = 1u32;
        loop {
            let n = hi.unwrap().saturating_sub(step);
            match run(n)? {
                None => return Ok(None),
                Some(true) => {
                    lo = n;
                    break;
                }
                Some(false) => hi = Some(n),
            }
            step = step.saturating_mul(2);
        }
    }
    let mut hi = hi.unwrap();
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match run(mid)? {
            None => return Ok(None),
            Some(true) => lo = mid,
            Some(false) => hi = mid,
        }
    }
    Ok(Some((lo, false)))
}

/// What `load` keeps across runs: the cells of a resumed partial result of the same grid
/// (kept, not rerun) and who sees the results after every finished cell (the CLI writes the
/// partial file atomically, so an interrupted grid can be resumed).
pub struct Checkpoints<'c> {
    pub prior: Option<&'c LoadResults>,
    pub on_cell: &'c mut dyn FnMut(&LoadResults) -> Result<()>,
}

/// `xrunlab load`: run the grid under the session's stress, started here once for the whole
/// grid. With forensics a recording starts before every trial; a trial that fails has its
/// xruns explained (`Trial::forensics`), a passing one's recording is dropped unread, and
/// the failed trials' sections are merged into the grid's.
pub fn run(cfg: &LoadConfig, session: &mut Session, cp: Checkpoints) -> Result<LoadOutcome> {
    cfg.validate()?;
    if cfg.driver.simulated() {
        session.simulated();
    }
    let grid = cells_of(cfg);
    let mut results = LoadResults {
        cells: Vec::new(),
        cells_total: grid.len() as u32,
        stress: None,
        jack: None,
        forensics: None,
    };
    // Keep prior cells in grid order; cells outside this grid are dropped.
    let mut todo = Vec::new();
    for (b, t, p) in &grid {
        match cp.prior.and_then(|r| r.cell(*b, *t, p)) {
            Some(c) => results.cells.push(c.clone()),
            None => todo.push((*b, *t, p.clone())),
        }
    }
    let warnings = Vec::new();
    if cfg.driver.simulated() {
        for p in &cfg.plugins {
            let un = cfg.cost.unmodelled(&[cfg.element(p)?]);
            if !un.is_empty() {
                return Err(Error::usage(format!(
                    "--driver sim needs a --cost for {} (an instance without cost has no maximum)",
                    un.join(", ")
                )));
            }
        }
    }
    // One control client for the grid: it sets each cell's buffer size (--set-buffer) and,
    // dropped on any way out of this function, puts the server's original size back.
    let control = match (&cfg.driver, &cfg.jack) {
        (DriverKind::Jack, Some(j)) => Some((JackControl::open(j)?, j.set_buffer)),
        _ => None,
    };
    if let Some((c, _)) = &control {
        results.jack = Some(JackGrid {
            server: c.server.clone(),
            library_version: c.library_version.clone(),
            original_buffer_frames: c.original_frames,
            buffer_restored: false,
        });
    }
    let mut grid_run = GridRun {
        cfg,
        grid: &grid,
        results,
        control,
        warnings,
        on_cell: cp.on_cell,
    };
    let (end, loaded) = session.loaded(None, std::time::Duration::ZERO, None, |s| {
        Ok(grid_run.cells(s, todo))
    })?;
    let GridRun {
        mut results,
        mut control,
        mut warnings,
        ..
    } = grid_run;
    let GridEnd {
        mut status,
        err,
        halted,
    } = end;
    if let Some((s, why)) = halted {
        status = s;
        warnings.push(format!(
            "{why}; the grid stopped after {} of {} cells (--resume continues it)",
            results.cells.len(),
            grid.len()
        ));
    }
    results.stress = loaded.stress;
    if status == Status::ServerShutdown {
        if let Some((c, _)) = control.take() {
            c.abandon();
        }
    }
    if let Some((mut c, _)) = control.take() {
        match c.restore() {
            Ok(changed) => {
                if let Some(j) = results.jack.as_mut() {
                    j.buffer_restored = changed;
                }
            }
            Err(e) => warnings.push(format!(
                "JACK: could not restore the server's buffer size of {} frames: {e}",
                c.original_frames
            )),
        }
    }
    if let Some(e) = err {
        return Err(e);
    }
    if results.cells.len() < grid.len() && status == Status::Complete {
        status = Status::Interrupted;
    }
    warnings.dedup();
    results.forensics = session.merged(results.trial_forensics(), &mut warnings);
    warnings.extend(results.stress.iter().flat_map(|s| s.warnings.clone()));
    Ok(LoadOutcome {
        status,
        config: cfg.clone(),
        results,
        warnings,
    })
}

/// The grid's cells as they are run, and what the run keeps beside them.
struct GridRun<'g> {
    cfg: &'g LoadConfig,
    grid: &'g [(u32, u32, String)],
    results: LoadResults,
    control: Option<(JackControl, bool)>,
    warnings: Vec<String>,
    on_cell: &'g mut dyn FnMut(&LoadResults) -> Result<()>,
}

/// How the cells loop ended: the status so far, the error to return once the server is
/// restored, and why the grid stopped early with a partial result (the server went away,
/// the watchdog).
struct GridEnd {
    status: Status,
    err: Option<Error>,
    halted: Option<(Status, String)>,
}

impl GridRun<'_> {
    /// Search the cells of `todo` in turn, under the stress the session started.
    fn cells(&mut self, session: &mut Session, todo: Vec<(u32, u32, String)>) -> GridEnd {
        session
            .progress()
            .set_unit(crate::progress::Unit::Items("cells"));
        session.progress().set_total(self.grid.len() as u64);
        session
            .progress()
            .set_position(self.results.cells.len() as u64);
        let mut status = Status::Complete;
        let mut err = None;
        // Why the grid stopped early with a partial result (the server went away, the
        // watchdog): the status it ends with and what happened.
        let mut halted: Option<(Status, String)> = None;
        for (b, t, p) in todo {
            session
                .progress()
                .set_message(&format!("{b} frames/{t} tr/{p}"));
            if let Some((c, set)) = self.control.as_mut() {
                let now = c.frames();
                let applied = if *set {
                    c.set_frames(b)
                } else if now != b {
                    Err(Error::cannot_measure(format!(
                        "the JACK server's buffer size changed to {now} during the grid (cell: {b})"
                    )))
                } else {
                    Ok(())
                };
                if let Err(e) = applied {
                    if server_gone(self.cfg, &e) {
                        let why = format!(
                            "JACK: the server went away before the cell at {b} frames ({e})"
                        );
                        halted = Some((Status::ServerShutdown, why));
                    } else {
                        err = Some(e);
                    }
                    break;
                }
            }
            let cell = run_cell(self.cfg, b, t, &p, &mut self.warnings, session);
            match cell {
                Ok(CellEnd::Done(cell)) => {
                    self.results.cells.push(*cell);
                    // Grid order, whatever order resumed and new cells finished in.
                    let pos = |c: &Cell| {
                        self.grid
                            .iter()
                            .position(|(b, t, p)| {
                                c.buffer_frames == *b && c.tracks == *t && c.plugin == *p
                            })
                            .unwrap_or(usize::MAX)
                    };
                    self.results.cells.sort_by_key(pos);
                    session
                        .progress()
                        .set_position(self.results.cells.len() as u64);
                    if let Err(e) = (self.on_cell)(&self.results) {
                        err = Some(e);
                        break;
                    }
                }
                Ok(CellEnd::Interrupted) => {
                    status = Status::Interrupted;
                    break;
                }
                Ok(CellEnd::Stopped(s, why)) => {
                    halted = Some((s, why));
                    break;
                }
                Err(e) if server_gone(self.cfg, &e) => {
                    let why = format!("JACK: the server went away during the cell of {p} at {b} frames, {t} tracks ({e})");
                    halted = Some((Status::ServerShutdown, why));
                    break;
                }
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        session.progress().finish();
        GridEnd {
            status,
            err,
            halted,
        }
    }
}

/// `r`, or None when it is the set-up that a Ctrl-C gave up (`registry::create_chain`): the
/// grid then ends as interrupted with the cells it finished, as after any other trial.
fn unless_interrupted<T>(r: Result<T>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e)
            if e.kind() == crate::error::ErrorKind::Aborted
                && crate::rt::interrupt::requested() =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Whether `e`, met by a `--driver jack` grid, means its server went away: the error says
/// so, or a new client finds no server. The grid then ends with what it measured.
fn server_gone(cfg: &LoadConfig, e: &Error) -> bool {
    let Some(j) = cfg.jack.as_ref().filter(|_| cfg.driver == DriverKind::Jack) else {
        return false;
    };
    e.kind() == ErrorKind::NoServer
        || JackControl::open(j).is_err_and(|e| e.kind() == ErrorKind::NoServer)
}

/// How the search of one cell ended.
enum CellEnd {
    Done(Box<Cell>),
    /// SIGINT/SIGTERM.
    Interrupted,
    /// A trial ended abnormally (the server shut down, the watchdog): the status the grid
    /// ends with and what happened.
    Stopped(Status, String),
}

/// Search one cell.
fn run_cell(
    cfg: &LoadConfig,
    buffer: u32,
    tracks: u32,
    plugin: &str,
    warnings: &mut Vec<String>,
    session: &mut Session,
) -> Result<CellEnd> {
    let t0 = crate::rt::clock::monotonic_ns();
    let Some(limit) = unless_interrupted(cfg.physical_limit(buffer, tracks, plugin))? else {
        return Ok(CellEnd::Interrupted);
    };
    // burn's calibration is its prior already.
    let prior = limit
        .cost_prior(buffer)
        .filter(|_| cfg.element(plugin).is_ok_and(|e| e.plugin != "burn"));
    let mut trials = Vec::new();
    // The passing run reported for the cell: the largest count in the search, or the last
    // validation pass (which may be lower).
    let mut best: Option<(u32, RunOutcome)> = None;
    // A trial that ended abnormally: its status and what to say.
    let mut ended: Option<(Status, String)> = None;
    let mut trial = |n: u32, dur: u64, phase: TrialPhase| -> Result<Option<bool>> {
        if session.progress().shows() {
            let last = trials
                .last()
                .map(|t: &Trial| (t.instances_per_track, t.passed));
            let cell = (buffer, cfg.rate, tracks, plugin);
            let line = trial_line(cell, trials.len() + 1, n, last);
            session.progress().set_message(&line);
        }
        let mut rc = cfg.trial_config(buffer, tracks, plugin, n, dur)?;
        rc.cost_prior = prior.clone();
        let w0 = crate::rt::clock::monotonic_ns();
        let rec = session.start_trace(&rc.cpus, dur);
        let Some(mut r) = unless_interrupted(crate::measure::run::run_observed(
            &rc,
            &Silent,
            Default::default(),
        ))?
        else {
            return Ok(None);
        };
        match r.status {
            Status::Complete => {}
            Status::Interrupted => return Ok(None),
            s => {
                let what = match s {
                    Status::ServerShutdown => "the JACK server shut down".to_string(),
                    Status::Watchdog => "the watchdog stopped it".to_string(),
                    s => format!("it ended as {s:?}"),
                };
                warnings.extend(r.warnings.iter().cloned());
                ended = Some((
                    s,
                    format!("trial of {n} × {plugin} at {buffer} frames, {tracks} tracks: {what}"),
                ));
                return Ok(None);
            }
        }
        for w in &r.warnings {
            warnings.push(w.clone());
        }
        // The events list the earliest xruns first (up to its cap), so the warm-up's are all
        // in it.
        let stop = cfg.criterion.stop_on();
        let in_warmup = r
            .results
            .xrun_events
            .iter()
            .filter(|e| e.cycle < cfg.warmup_cycles as u64 && stop.matches(e.cause))
            .count() as u64;
        let passed = cfg.criterion.disqualifying(&r.results.xruns) <= in_warmup;
        // Only a failed trial is explained: a passing one's recording goes unread.
        let forensics = match rec {
            Some(rec) if !passed => {
                warnings.extend(crate::measure::run::forensics::explain_run(
                    rec,
                    &mut r.results,
                    &rc.chain_elements,
                ));
                r.results.forensics.take()
            }
            _ => None,
        };
        trials.push(Trial {
            instances_per_track: n,
            phase,
            passed,
            duration_ns: r.results.periods_elapsed * r.results.period_ns,
            cycles: r.results.cycles,
            xruns: r.results.xruns,
            warmup_disqualifying: in_warmup,
            stopped_at_cycle: r.results.early_stop_cycle,
            wall_ns: crate::rt::clock::monotonic_ns() - w0,
            host_steal: r.results.host_steal.clone(),
            forensics,
        });
        if passed && (phase == TrialPhase::Validate || best.as_ref().is_none_or(|(m, _)| n >= *m)) {
            best = Some((n, r));
        }
        Ok(Some(passed))
    };
    let mut found = search(limit.per_track, cfg.max_instances, |n| {
        trial(n, cfg.duration_ns, TrialPhase::Search)
    })?;
    if let (Some((max, _)), Some(v)) = (found.as_mut(), cfg.validate_ns) {
        while *max > 0 {
            match trial(*max, v, TrialPhase::Validate)? {
                None => {
                    found = None;
                    break;
                }
                Some(true) => break,
                Some(false) => *max -= 1,
            }
        }
    }
    let Some((max, capped)) = found else {
        return Ok(match ended {
            Some((s, why)) => CellEnd::Stopped(s, why),
            None => CellEnd::Interrupted,
        });
    };
    let run = best.filter(|(n, _)| *n == max && max > 0).map(|b| b.1);
    let searched = Searched {
        limit,
        max,
        capped,
        run,
        trials,
        t0,
    };
    Ok(CellEnd::Done(Box::new(cell_of(
        cfg, buffer, tracks, plugin, searched,
    ))))
}

/// The load grid's live line while a trial runs: the cell (period at its rate, tracks), the
/// trial and its instances per track, how the trial before it ended, then the plugin, cut
/// to keep the line within 80 columns (its figures come first, so none is ever cut):
/// "256@48k 2 tr · trial 3: 12 inst · last 10 ok · reverb-heavy" (without the plugin, 44
/// columns: what is left beside the bar on an 80-column terminal).
fn trial_line(
    (buffer, rate, tracks, plugin): (u32, u32, u32, &str),
    trial: usize,
    instances: u32,
    last: Option<(u32, bool)>,
) -> String {
    let rate = match rate % 1000 {
        0 => format!("{}k", rate / 1000),
        _ => format!("{:.1}k", rate as f64 / 1000.0),
    };
    let mut s = format!("{buffer}@{rate} {tracks} tr · trial {trial}: {instances} inst");
    if let Some((n, ok)) = last {
        let how = if ok { "ok" } else { "fail" };
        s.push_str(&format!(" · last {n} {how}"));
    }
    let room = 80usize.saturating_sub(s.chars().count() + 3);
    if room >= 4 {
        let name: String = if plugin.chars().count() <= room {
            plugin.to_string()
        } else {
            plugin.chars().take(room - 1).chain(['…']).collect()
        };
        s.push_str(" · ");
        s.push_str(&name);
    }
    s
}

/// What the search of one cell found: the largest passing count, whether the cap passed,
/// the passing run reported for it, every trial, and when the cell began.
struct Searched {
    limit: PhysicalLimit,
    max: u32,
    capped: bool,
    run: Option<RunOutcome>,
    trials: Vec<Trial>,
    t0: u64,
}

/// The cell a search found: its maximum, and the DSP load, xruns and wake-ups of the run at
/// that maximum.
fn cell_of(cfg: &LoadConfig, buffer: u32, tracks: u32, plugin: &str, s: Searched) -> Cell {
    let Searched {
        limit,
        max,
        capped,
        run: r,
        trials,
        t0,
    } = s;
    let period_ns = crate::common::ns_of_frames(buffer as u64, cfg.rate);
    let jack = r
        .as_ref()
        .and_then(|r| r.results.jack.as_ref())
        .map(|j| CellJack {
            cpu_load_pct: j.jack_cpu_load_pct,
            server_xruns: j.server_xruns,
        });
    let cost_prior = r.as_ref().and_then(|r| r.results.cost_prior.clone());
    let timer_slack_ns = r.as_ref().and_then(|r| r.results.timer_slack_ns);
    let (dsp, xr, p99, wmax) = match &r {
        Some(r) => (
            r.results.dsp_load_pct,
            r.results.xruns,
            r.results.wake_latency_ns.p99,
            r.results.wake_latency_ns.max,
        ),
        None => (LoadPct::default(), XrunCounts::default(), 0, 0),
    };
    Cell {
        buffer_frames: buffer,
        tracks,
        plugin: plugin.to_string(),
        period_ns,
        limit,
        max_per_track: max,
        total_instances: max * tracks,
        capped,
        dsp_load_pct: dsp,
        dsp_load_per_instance_pct: if max > 0 { dsp.mean / max as f64 } else { 0.0 },
        xruns: xr,
        wake_latency_p99_ns: p99,
        wake_latency_max_ns: wmax,
        trials,
        time_spent_ns: crate::rt::clock::monotonic_ns() - t0,
        jack,
        cost_prior,
        timer_slack_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trial_line_says_the_cell_and_fits_80_columns() {
        let l = trial_line((256, 48000, 2, "reverb-heavy"), 3, 12, Some((10, true)));
        assert_eq!(
            l,
            "256@48k 2 tr · trial 3: 12 inst · last 10 ok · reverb-heavy"
        );
        let first = trial_line((64, 44100, 1, "burn(5%)"), 1, 4, None);
        assert_eq!(first, "64@44.1k 1 tr · trial 1: 4 inst · burn(5%)");
        let uri = format!("lv2:http://example.org/{}", "x".repeat(200));
        // The largest cell any command runs (8192 frames, 384 kHz, 64 tracks), a search
        // capped at a million instances after a hundred trials.
        let long = trial_line(
            (8192, 384_000, 64, &uri),
            100,
            1_000_000,
            Some((999_999, false)),
        );
        assert!(long.chars().count() <= 80, "{long}");
        assert!(
            long.contains("trial 100: 1000000 inst · last 999999 fail · lv2"),
            "{long}"
        );
        let cut = trial_line((256, 48000, 2, &uri), 3, 12, None);
        assert_eq!(cut.chars().count(), 80, "{cut}");
        assert!(cut.ends_with('…') && cut.contains("· lv2:http"), "{cut}");
    }
}
