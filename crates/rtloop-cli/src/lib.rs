//! The `rtloop` command line (clap). `run(argv)` is shared by the `rtloop` binary and the
//! Python package's console script.

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod cmd_bench;
pub mod cmd_bridge;
pub mod cmd_demo;
pub mod cmd_lab;
pub mod cmd_record;
pub mod cmd_run;
pub mod cmd_serve;
pub mod cmd_stream;
pub mod cmd_sysinfo;
pub mod cmd_verify;
pub mod cmd_view;
pub mod progress;
pub mod roles;

/// rtloop: realtime data streaming and closed-loop platform.
///
/// Streams are named shared-memory sample rings (one writer, many readers). Start with
/// `rtloop demo`, look around with `rtloop stream list`, check the machine with
/// `rtloop verify` and `rtloop bench stream`.
#[derive(Debug, Parser)]
#[command(
    name = "rtloop",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    /// Options every command takes.
    #[command(flatten)]
    pub global: Global,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Clone, clap::Args)]
pub struct Global {
    /// Print machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// More log output (repeat for more).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Log level filter (error, warn, info, debug, trace); also `RTLOOP_LOG`.
    #[arg(long, global = true, value_name = "LEVEL")]
    pub log_level: Option<String>,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a 384-channel int16 30 kHz synthetic writer and a reader in another process for a
    /// few seconds, showing throughput, latency and occupancy live, then a summary.
    Demo(cmd_demo::DemoArgs),
    /// Create, list, inspect, monitor and remove streams.
    #[command(subcommand)]
    Stream(cmd_stream::StreamCommand),
    /// Verify a stream end to end: generator and receiver processes through a stream with a
    /// prime capacity, checking every packet's content and order.
    Verify(cmd_verify::VerifyArgs),
    /// Benchmarks (throughput and latency against references measured in the same run).
    #[command(subcommand)]
    Bench(cmd_bench::BenchCommand),
    /// The latency lab: an emulated acquisition device with its own clock and hardware FIFO,
    /// a host reading ReadSize blocks with a loopback, and a ReadSize tuner (ONIX's closed-loop
    /// tuning workflow, on any transport).
    #[command(subcommand)]
    Lab(cmd_lab::LabCommand),
    /// Run a model of sources, modules and sinks, each its own process, driven once per tick
    /// (LiCoRICE-style); timing report at the end.
    ///
    /// The model (YAML: config, signals, sources, modules, sinks; docs/runtime-model.md) is
    /// validated as a whole before anything starts, and every problem is listed with its
    /// line. Signals are rtloop streams named MODEL.SIGNAL (removed at the end unless
    /// --keep). Modules are Python files with a `step` function (numpy views, optionally
    /// numba) or Rust files with `pub fn step(t: &mut Tick)` (compiled with rustc). Drivers:
    /// synthetic, udp_in, stream_in (sources); udp_out, stream_out, logger (SQLite), recorder,
    /// serial_out (sinks). During the run a summary line is printed every second; at the end a timing
    /// table (tick-start lateness, execution time per process, deadline misses), or JSON
    /// with --json, and with --out a directory with report.json and PNG histograms. Ctrl-C
    /// stops the model cleanly. Exit status: 0 ran to its limit or Ctrl-C; 1 a process
    /// failed or died, or a deadline was missed under `on_miss: stop`; 2 the model was
    /// refused (model-file problems, a tick shorter than the machine can schedule, a Rust
    /// module that does not compile).
    Run(cmd_run::RunArgs),
    /// Record streams to disk at full rate: per stream a flat little-endian data.bin
    /// (numpy.memmap-able), timestamps.bin, events.jsonl and a header.json kept up to date, so
    /// a recording cut by kill -9 is readable up to its last flush.
    Record(cmd_record::RecordArgs),
    /// Play a recorded file into a live stream at the original pace, a multiple of it, or as
    /// fast as possible, events at their samples: rtloop recordings, XDF, SpikeGLX, Open Ephys
    /// binary and NWB.
    Replay(cmd_record::ReplayArgs),
    /// Serve a stream to FieldTrip buffer clients over TCP and a UNIX socket.
    ///
    /// Any FieldTrip client works unchanged (MATLAB ft_read_data/ft_write_data/ft_read_event,
    /// FieldTrip.py, the C and Java clients, acquisition tools writing to
    /// buffer://host:1972). The buffer is the rtloop stream --stream in shared memory: a
    /// PUT_HDR (re)creates it, data and events PUT over the network land in it (local readers
    /// see them zero-copy), and a stream written by a local process is served as it is.
    ///
    /// What is kept: the reference server keeps 600000 samples (512 MiB of them when there are
    /// more than 256 channels) and 100 events. rtloop keeps --capacity samples, fewer if they
    /// would take more than --max-bytes, and --events events; GET_DAT and GET_EVT without a
    /// selection return everything kept. WAIT_DAT wakes as soon as samples or events arrive.
    ///
    /// On start it prints one line, `listening tcp=HOST:PORT unix=PATH stream=NAME` (a JSON
    /// object with --json), then serves until Ctrl-C, SIGTERM or --duration. The stream a
    /// PUT_HDR created is removed on exit unless --keep.
    Serve(cmd_serve::ServeArgs),
    /// Bridges: Lab Streaming Layer in (`lsl-in`) and out (`lsl-out`) of rtloop streams, and any
    /// BrainFlow board in (`brainflow-in`).
    #[command(subcommand)]
    Bridge(cmd_bridge::BridgeCommand),
    /// A live web page of every stream on this machine: writer alive or dead, readers,
    /// occupancy (PercentUsed) and lost samples; a scope of any stream (min/max per screen
    /// column, decimated by the server next to the ring, with channel pages, names, scaling,
    /// event markers and pause); and a histogram of any channel (the lab's and the runtime's
    /// live latency streams on a log axis).
    ///
    /// Prints `rtloop view: open URL` and serves until Ctrl-C, SIGTERM or --duration. The page
    /// reads streams without a reader slot, so it never holds a writer back.
    View(cmd_view::ViewArgs),
    /// Versions, kernel, CPUs, shared memory and realtime permissions of this machine.
    SysInfo(cmd_sysinfo::SysInfoArgs),
    /// Internal: a child role started by another rtloop process (verify, bench, demo).
    #[command(hide = true)]
    Child(roles::ChildArgs),
}

fn init_logging(g: &Global) {
    let level = g
        .log_level
        .clone()
        .or_else(|| std::env::var("RTLOOP_LOG").ok())
        .unwrap_or_else(|| {
            match g.verbose {
                0 => "warn",
                1 => "info",
                2 => "debug",
                _ => "trace",
            }
            .to_owned()
        });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(level))
        .with_writer(std::io::stderr)
        // colour only on a terminal: redirected logs carry no escape codes
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Parse `argv` and run the command; the exit code says how it went (0 ok, 1 failure,
/// 2 usage error).
pub fn run<I, T>(argv: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    init_logging(&cli.global);
    let g = cli.global.clone();
    let result = match cli.command {
        Command::Demo(a) => cmd_demo::run(&a, &g),
        Command::Stream(c) => cmd_stream::run(c, &g),
        Command::Verify(a) => cmd_verify::run(&a, &g),
        Command::Bench(c) => cmd_bench::run(c, &g),
        Command::Serve(a) => cmd_serve::run(&a, &g),
        Command::Bridge(c) => cmd_bridge::run(c, &g),
        Command::Lab(c) => cmd_lab::run(c, &g),
        Command::Run(a) => {
            return cmd_run::run(&a, &g).unwrap_or_else(|e| {
                eprintln!("rtloop: error: {}", error_text(&e));
                ExitCode::FAILURE
            })
        }
        Command::Record(a) => cmd_record::run(&a, &g),
        Command::Replay(a) => cmd_record::replay(&a, &g),
        Command::View(a) => cmd_view::run(&a, &g),
        Command::SysInfo(a) => cmd_sysinfo::run(&a, &g),
        Command::Child(a) => roles::run(&a, &g),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rtloop: error: {}", error_text(&e));
            // a config `rtloop bench from-json` refuses is a usage error, as clap's are
            if e.downcast_ref::<cmd_bench::Refused>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// An error and its causes on one line, each cause once: most of rtloop's errors already
/// say their cause in their own text (`stream "x": no stream named ...`), and printing
/// the chain after it (anyhow's `{:#}`) said it twice.
#[must_use]
pub fn error_text(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !out.contains(&c) {
            out.push_str(": ");
            out.push_str(&c);
        }
    }
    out
}

/// A command that re-runs this rtloop (for child processes). Under the Python console
/// script the current executable is the interpreter, so run `python -m rtloop` then, with
/// the interpreter the script named in `RTLOOP_PYTHON` (the OS reports the resolved one,
/// which is outside the virtual environment); `RTLOOP_EXE` overrides both.
#[must_use]
pub fn self_command() -> std::process::Command {
    rtloop_launch::rtloop_command()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn an_error_says_each_cause_once() {
        // as thiserror's `#[error("stream \"x\": {source}")]` with a `source` field is
        #[derive(Debug)]
        struct Says {
            source: std::io::Error,
        }
        impl std::fmt::Display for Says {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "stream \"x\": {}", self.source)
            }
        }
        impl std::error::Error for Says {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.source)
            }
        }
        let inner = std::io::Error::other("no stream named \"x\"");
        let e = anyhow::Error::new(Says { source: inner }).context("recording");
        assert_eq!(
            error_text(&e),
            "recording: stream \"x\": no stream named \"x\""
        );
        // a cause the message does not say is still printed
        let e = anyhow::Error::new(std::io::Error::other("disk full")).context("writing");
        assert_eq!(error_text(&e), "writing: disk full");
    }
}
