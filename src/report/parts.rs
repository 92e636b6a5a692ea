//! The traced parts of a measurement (a failed load trial, a sched row, a latencytest phase,
//! an event setting), each labelled as the text and the HTML report name it.

/// Each failed load trial's forensics, labelled by its cell and instance count.
pub fn load_trials(
    r: &crate::measure::loadtest::LoadResults,
) -> Vec<(String, &crate::trace::Forensics)> {
    r.cells
        .iter()
        .flat_map(|c| {
            c.trials.iter().filter_map(move |t| {
                let label = format!(
                    "{} frames, {} track(s), {} × {}",
                    c.buffer_frames, c.tracks, t.instances_per_track, c.plugin
                );
                t.forensics.as_ref().map(|f| (label, f))
            })
        })
        .collect()
}

/// Each traced event setting's forensics, labelled by driver, scenario and period.
pub fn event_runs(
    r: &crate::measure::event::EventResults,
) -> Vec<(String, &crate::trace::Forensics)> {
    r.runs
        .iter()
        .filter_map(|x| {
            let label = format!(
                "{} {} {} frames",
                x.driver.name(),
                x.scenario.name(),
                x.period_frames
            );
            x.forensics.as_ref().map(|f| (label, f))
        })
        .collect()
}

/// Each traced latencytest phase's forensics, labelled by the phase.
pub fn latencytest_phases(
    r: &crate::measure::latencytest::LatencytestResult,
) -> Vec<(String, &crate::trace::Forensics)> {
    r.phases
        .iter()
        .filter_map(|p| p.forensics.as_ref().map(|f| (p.name.clone(), f)))
        .collect()
}

/// Each traced sched row's forensics, labelled by the row.
pub fn sched_rows(
    r: &crate::measure::sched::SchedResults,
) -> Vec<(String, &crate::trace::Forensics)> {
    r.rows
        .iter()
        .filter_map(|x| x.engine.forensics.as_ref().map(|f| (x.label.clone(), f)))
        .collect()
}
