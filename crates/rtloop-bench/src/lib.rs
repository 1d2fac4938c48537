//! rtloop's benchmarks as a library, one module per benchmark: `run(&Config, &mut dyn
//! Progress)` measures and returns a report; the report renders the table the command line
//! prints (`table()`) and serialises to the JSON it prints with `--json` and writes to
//! `results.json`. Every figure sits next to a reference measured in the same run
//! (docs/design.md §7).
//!
//! The child processes a benchmark starts (echoes, generators and receivers, writers and
//! readers, iceoryx2 peers) are typed [`rtloop_launch::ChildRole`]s, each registered beside
//! its type with the function that plays it in the child.

// unsafe only in the UDP load generator (sendmmsg/recvmmsg), each block with its SAFETY
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::fmt::Display;

pub mod fieldtrip;
#[cfg(feature = "iceoryx2")]
pub mod iceoryx2_peer;
pub mod machine;
pub mod peers;
pub mod pipeline;
pub mod runtime;
pub mod stream;
#[allow(unsafe_code)]
pub mod udp_load;
pub mod verify;

/// Why a benchmark could not run or finish, by what failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A setting the benchmark cannot run with: which, what was given, what is allowed.
    #[error("{name} = {given}: {allowed}")]
    Config {
        /// The setting.
        name: String,
        /// What was given.
        given: String,
        /// What is allowed.
        allowed: String,
    },
    /// A measured value is not what was sent (a corrupted packet, an echo out of order, a
    /// reply of the wrong size).
    #[error("{what}: got {got}, want {want}")]
    Mismatch {
        /// What was measured.
        what: String,
        /// What came back.
        got: String,
        /// What was sent or expected.
        want: String,
    },
    /// Packets that a lossless run lost, or that neither arrived nor were reported lost.
    #[error("{count} packets {how}")]
    Lost {
        /// How many.
        count: u64,
        /// How they went missing.
        how: &'static str,
    },
    /// Packets that arrived but failed verification.
    #[error("{count} packets failed verification; first: {first}")]
    Corrupt {
        /// How many.
        count: u64,
        /// The first failure, as the receiver described it.
        first: String,
    },
    /// A child process (an echo, a generator, a reader, a server) did not do its part.
    #[error("{child}: {problem}")]
    Child {
        /// Which child.
        child: String,
        /// What it did instead.
        problem: String,
    },
    /// A model run stopped with a problem.
    #[error("model {model} stopped: {problem}")]
    ModelStopped {
        /// The model.
        model: String,
        /// The run's problem.
        problem: String,
    },
    /// A thread of the benchmark panicked.
    #[error("the {0} panicked")]
    Panicked(&'static str),
    /// A trial ran past its deadline and was stopped.
    #[error("the trial overran {0:?} and was stopped")]
    Overran(std::time::Duration),
    /// Something the benchmark needs was not there (a child's pipe, a report).
    #[error("missing: {0}")]
    Missing(std::borrow::Cow<'static, str>),
    /// A dtype name.
    #[error(transparent)]
    DType(#[from] rtloop_stream::UnknownDType),
    /// A file, socket or process operation.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A number a child printed.
    #[error(transparent)]
    Parse(#[from] std::num::ParseIntError),
    /// JSON in or out (reports, child output).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Creating, opening, reading or writing a stream.
    #[error(transparent)]
    Stream(#[from] rtloop_stream::Error),
    /// Starting a child process.
    #[error(transparent)]
    Launch(#[from] rtloop_launch::LaunchError),
    /// The lab's references (the bare ping-pong).
    #[error(transparent)]
    Lab(#[from] rtloop_lab::reference::ReferenceError),
    /// A peer transport or the measuring loops of rtloop-peers.
    #[error(transparent)]
    Peer(#[from] rtloop_peers::PeerError),
    /// A FieldTrip client request.
    #[error(transparent)]
    FieldTrip(#[from] rtloop_fieldtrip::ClientError),
    /// The recorder.
    #[error(transparent)]
    Record(#[from] rtloop_record::RecordError),
    /// Replaying a file.
    #[error(transparent)]
    Replay(#[from] rtloop_record::replay::ReplayError),
    /// Opening a recorded file.
    #[error(transparent)]
    Source(#[from] rtloop_record::replay::SourceError),
    /// A runtime model run.
    #[error(transparent)]
    Runtime(#[from] rtloop_runtime::run::RunError),
    /// The UDP load generator.
    #[error(transparent)]
    UdpLoad(#[from] udp_load::UdpLoadError),
    /// A PNG chart.
    #[error(transparent)]
    Chart(#[from] rtloop_metrics::charts::ChartError),
    /// An error with what was being done when it happened (the message holds both, so
    /// the error is not also its source).
    #[error("{what}: {error}")]
    Context {
        /// What was being done.
        what: String,
        /// The error.
        error: Box<BenchError>,
    },
}

impl From<rtloop_stream::CreateError> for BenchError {
    fn from(e: rtloop_stream::CreateError) -> Self {
        Self::Stream(e.into())
    }
}

/// The other stream errors, through [`rtloop_stream::Error`].
macro_rules! stream_errors {
    ($($t:ident),*) => {$(
        impl From<rtloop_stream::$t> for BenchError {
            fn from(e: rtloop_stream::$t) -> Self {
                Self::Stream(e.into())
            }
        }
    )*};
}
stream_errors!(OpenError, ReadError, WaitError, WriteError, ClaimError);

/// Say what was being done when an error happened.
pub trait Context<T> {
    /// The error, with `what` in front.
    fn context(self, what: impl Display) -> Result<T, BenchError>;
    /// The error, with what `f` says in front (computed only on error).
    fn with_context<D: Display>(self, f: impl FnOnce() -> D) -> Result<T, BenchError>;
}

impl<T, E: Into<BenchError>> Context<T> for Result<T, E> {
    fn context(self, what: impl Display) -> Result<T, BenchError> {
        self.with_context(|| what)
    }
    fn with_context<D: Display>(self, f: impl FnOnce() -> D) -> Result<T, BenchError> {
        self.map_err(|e| BenchError::Context {
            what: f().to_string(),
            error: Box::new(e.into()),
        })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl Display) -> Result<T, BenchError> {
        self.ok_or_else(|| BenchError::Missing(what.to_string().into()))
    }
    fn with_context<D: Display>(self, f: impl FnOnce() -> D) -> Result<T, BenchError> {
        self.ok_or_else(|| BenchError::Missing(f().to_string().into()))
    }
}

/// Return a [`BenchError::Child`] naming `child` unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $child:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::BenchError::Child {
                child: $child.to_string(),
                problem: format!($($fmt)+),
            });
        }
    };
}

impl BenchError {
    /// A setting that is not allowed.
    pub fn config(
        name: impl Into<String>,
        given: impl Display,
        allowed: impl Into<String>,
    ) -> Self {
        BenchError::Config {
            name: name.into(),
            given: given.to_string(),
            allowed: allowed.into(),
        }
    }

    /// Whether the benchmark refused its settings before running (rather than failing while
    /// it ran).
    #[must_use]
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            BenchError::Config { .. }
                | BenchError::DType(_)
                | BenchError::Peer(rtloop_peers::PeerError::Config(_))
        )
    }

    /// A measured value that is not what was sent.
    pub fn mismatch(what: impl Into<String>, got: impl Display, want: impl Display) -> Self {
        BenchError::Mismatch {
            what: what.into(),
            got: got.to_string(),
            want: want.to_string(),
        }
    }
}
pub(crate) use ensure;

/// What a benchmark tells while it runs. The command line shows it on stderr (notes only
/// without `--json`, steps as a progress line); [`NoProgress`] drops it.
pub trait Progress {
    /// A phase begins ("latency: stream ping-pong, spinning ...").
    fn note(&mut self, what: &str) {
        let _ = what;
    }
    /// Work of known size advanced: `done` of `total` `what` (e.g. "packets").
    fn step(&mut self, what: &str, done: u64, total: u64) {
        let _ = (what, done, total);
    }
    /// Something the user should know that does not stop the benchmark (a peer that could
    /// not be measured, a capacity rounded up).
    fn warn(&mut self, what: &str) {
        let _ = what;
    }
}

/// Progress nobody watches (tests, callers that only want the report).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}

/// The median of `v` (the upper one of an even count); `v` must not be empty.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Pin this process to `cpu`, if one is given (best effort: a benchmark runs unpinned where
/// pinning is not allowed).
pub(crate) fn pin(cpu: Option<usize>) {
    if let Some(c) = cpu {
        let _ = rtloop_sys::pin_to_cpu(c);
    }
}

/// Create `dir` and write `report` as pretty JSON to `dir/results.json`.
pub(crate) fn write_results<T: serde::Serialize>(
    dir: &std::path::Path,
    report: &T,
) -> Result<(), BenchError> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(report)?,
    )?;
    Ok(())
}

/// The checks a benchmark's `Config::validate` makes: the same ranges the command line's
/// options allow, so a config from Python or a file is refused as the command refuses it.
pub(crate) mod check {
    use super::BenchError;

    /// `value` within `lo..=hi`.
    pub fn range<T: PartialOrd + std::fmt::Display>(
        name: &str,
        value: T,
        lo: T,
        hi: T,
    ) -> Result<(), BenchError> {
        if value < lo || value > hi {
            return Err(BenchError::config(
                name,
                value,
                format!("allowed {lo} to {hi}"),
            ));
        }
        Ok(())
    }

    /// A finite number > 0.
    pub fn positive(name: &str, value: f64) -> Result<(), BenchError> {
        if !(value.is_finite() && value > 0.0) {
            return Err(BenchError::config(name, value, "a number > 0"));
        }
        Ok(())
    }

    /// One of `allowed`.
    pub fn one_of(name: &str, value: &str, allowed: &[&str]) -> Result<(), BenchError> {
        if !allowed.contains(&value) {
            return Err(BenchError::config(
                name,
                format!("{value:?}"),
                format!("allowed {}", allowed.join(", ")),
            ));
        }
        Ok(())
    }

    /// A list with at least one entry.
    pub fn non_empty(name: &str, len: usize) -> Result<(), BenchError> {
        if len == 0 {
            return Err(BenchError::config(name, "[]", "give one or more"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_setting_says_which_what_was_given_and_what_is_allowed() {
        let e = check::range("rounds", 0, 1, 20).unwrap_err();
        assert!(
            matches!(&e, BenchError::Config { name, given, .. } if name == "rounds" && given == "0"),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "rounds = 0: allowed 1 to 20");
        assert!(e.is_refusal());
        // a peer's own setting check is a refusal too; a failure while running is not
        let peer = BenchError::Peer(rtloop_peers::PeerError::Config("chunk 0".into()));
        assert!(peer.is_refusal());
        assert!(!BenchError::Panicked("consumer").is_refusal());
        assert!(!BenchError::mismatch("the echo", 3, 4).is_refusal());
        assert_eq!(
            BenchError::mismatch("the echo", 3, 4).to_string(),
            "the echo: got 3, want 4"
        );
    }

    #[test]
    fn a_missing_value_and_a_child_that_failed_are_their_own_variants() {
        let e = None::<u8>.context("the writer's report").unwrap_err();
        assert!(matches!(e, BenchError::Missing(_)), "{e:?}");
        assert_eq!(e.to_string(), "missing: the writer's report");
        let f = || -> Result<(), BenchError> {
            ensure!(1 + 1 == 3, "a reader", "said {:?}, not ready", "hello");
            Ok(())
        };
        let e = f().unwrap_err();
        assert!(matches!(e, BenchError::Child { .. }), "{e:?}");
        assert_eq!(e.to_string(), "a reader: said \"hello\", not ready");
    }
}
