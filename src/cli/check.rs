//! `xrunlab check`.

use super::output::{self, Measured, Started};
use super::Global;
use crate::error::Result;
use crate::report::text;
use crate::results::{Body, Status};
use crate::system::check::{run_checks, CheckConfig};
use crate::system::{Environment, Root};
use clap::Args;
use std::path::PathBuf;

/// Is this system set up for real-time audio? (rtcqs's checks plus VM/container detection)
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  xrunlab check\n  xrunlab check --fail-on-problem # exit 1 when any check fails (for CI)\n  xrunlab check --json | python3 -m json.tool\n  xrunlab check --root ./pi-tree  # a board's /proc, /sys and /boot files copied into ./pi-tree\n\nOn a Raspberry Pi it also reads the firmware's throttled flags, the SoC temperature,\nconfig.txt's clock settings, the page size and which RT kernel is installed."
)]
pub struct CheckArgs {
    /// Exit 1 when any check fails (the old --strict is still accepted).
    #[arg(long = "fail-on-problem", alias = "strict")]
    pub strict: bool,
    /// Read /proc, /sys, /etc, /boot and /lib/modules under DIR instead of / (a tree copied
    /// from another machine, e.g. a board; the live-only probes are then skipped).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
}

pub fn run(a: CheckArgs, g: &Global) -> Result<u8> {
    let at = crate::rt::clock::wall_clock_rfc3339();
    let root = match &a.root {
        Some(p) if !p.is_dir() => {
            return super::usage(format!("--root {}: not a directory", p.display()))
        }
        Some(p) => Root::new(p),
        None => Root::default(),
    };
    let env = Environment::capture_at(&root);
    let report = run_checks(&root, &env);
    let failed = report.fail > 0;
    let human = format!(
        "{}\n{}",
        text::style::wrap(&text::style::system_line(&env), 2),
        text::check::summary(&report)
    );
    let body = Body::Check {
        config: CheckConfig {
            root: a
                .root
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "/".into()),
            strict: a.strict,
        },
        results: report,
    };
    let mut m = Measured::new(body, Status::Complete, Started { at, env }, human)
        .threshold(a.strict && failed);
    // The table rows already say what the warnings would.
    m.show_warnings = false;
    output::finish(m, g)
}
