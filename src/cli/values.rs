//! The clap side of the library's enums (clap types live only in `cli/`): which names each
//! takes on the command line, with the help texts `--help` lists for them. The names are
//! the JSON names (tested below), so a value reads the same on the command line and in a
//! result.

use crate::driver::DriverKind;
use crate::dsp::plugin_cost::Signal;
use crate::engine::Placement;
use crate::measure::predict::Holds;
use crate::stress::BackendChoice;
use crate::system::tune::Profile;
use crate::trace::ReaderKind;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::ValueEnum;

/// `impl ValueEnum` listing every variant with its name and, where the list shows one, its
/// help (one line, no final period, as `--help` has always printed them).
macro_rules! value_enum {
    ($ty:ident { $($v:ident => $name:literal $(: $help:literal)?),+ $(,)? }) => {
        impl ValueEnum for $ty {
            fn value_variants<'a>() -> &'a [Self] {
                &[$($ty::$v),+]
            }

            fn to_possible_value(&self) -> Option<PossibleValue> {
                Some(match self {
                    $($ty::$v => PossibleValue::new($name)$(.help($help))?),+
                })
            }
        }
    };
}

// Without help texts: `--help` keeps the one-line "[possible values: …]" list, which
// `suite` reads to learn what a command accepts.
value_enum!(DriverKind {
    Virtual => "virtual",
    Sim => "sim",
    Jack => "jack",
    Alsa => "alsa",
});

value_enum!(ReaderKind {
    Raw => "raw",
    Text => "text",
});

value_enum!(Placement {
    Pinned => "pinned":
        "Each thread pinned to its CPU runs its home tracks only: a stalled core delays them",
    Unpinned => "unpinned":
        "No thread pinned (the kernel places and migrates them); any thread takes any track \
         not yet started",
    Steal => "steal":
        "Threads pinned; each runs its home tracks first, then takes other threads' tracks \
         not yet started (thread 0 helps instead of waiting for the join)",
});

value_enum!(Profile {
    Audio => "audio": "The runtime settings for an audio workstation",
    Measure => "measure":
        "`audio` plus what only a measurement box should get: RT throttling off (safe only \
         with xrunlab's watchdog) and mitigations=off on the boot line",
});

value_enum!(BackendChoice {
    Auto => "auto": "stress-ng when it is on PATH, the built-in stressors otherwise",
    StressNg => "stress-ng": "stress-ng or fail (exit 3)",
    Builtin => "builtin":
        "Always the built-in stressors (what a minimal image without stress-ng gets)",
});

/// A value parser for a `--driver` that takes only `accepted`: `--help` lists just those,
/// and any other value is clap's usage error (exit 2).
pub fn driver_parser(accepted: &'static [DriverKind]) -> impl TypedValueParser<Value = DriverKind> {
    PossibleValuesParser::new(
        accepted
            .iter()
            .filter_map(|k| k.to_possible_value())
            .collect::<Vec<PossibleValue>>(),
    )
    .map(|s| DriverKind::from_str(&s, false).expect("the parser accepts only DriverKind names"))
}

value_enum!(Signal {
    Noise => "noise":
        "White noise, uniform in ±0.1: −20 dBFS peak, −24.8 dBFS RMS; the same samples every run",
    Silence => "silence":
        "All zeros: some plugins' feedback paths decay into denormals on it (lv2bench's input)",
    Sine => "sine": "A 1 kHz sine of peak 0.1: −20 dBFS peak, −23.0 dBFS RMS",
});

value_enum!(Holds {
    Wakeup => "wakeup":
        "Delays come with wake-ups: each wake-up of the audio thread draws one latency as the \
         measurement's wake-ups did, whatever the interval (a halted vCPU waiting for its host, \
         a wake-up path's lock). Matches the sim and, within 1.3–3.3×, this project's KVM guest \
         at three buffer sizes",
    Timed => "timed":
        "Delays are holds arriving in time, independently of any thread's timer (SMIs, a \
         preempted busy vCPU): a long sample is a stall the audio thread meets however often it \
         wakes. Conservative; over-predicted that guest 7–35×",
});

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant once, named as serde names it.
    fn same_names<T: ValueEnum + serde::Serialize + PartialEq + std::fmt::Debug>() {
        for v in T::value_variants() {
            let name = v.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(serde_json::to_string(v).unwrap(), format!("\"{name}\""));
            assert_eq!(&T::from_str(&name, false).unwrap(), v);
        }
    }

    #[test]
    fn command_line_names_are_the_json_names() {
        same_names::<DriverKind>();
        same_names::<Signal>();
        same_names::<Holds>();
        same_names::<Placement>();
        same_names::<Profile>();
        same_names::<BackendChoice>();
        assert_eq!(DriverKind::value_variants(), &DriverKind::ALL);
        assert_eq!(
            ReaderKind::from_str("text", false).unwrap(),
            ReaderKind::Text
        );
    }
}
