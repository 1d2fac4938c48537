//! `rtloop run MODEL`: run a model of sources, modules and sinks driven by a tick.
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rtloop_runtime::run::{RunError, RunOptions};

use crate::Global;

/// Options of `rtloop run` (the help text is on the command in lib.rs).
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The model file (YAML).
    pub model: PathBuf,
    /// Stop after this many seconds (besides the model's num_ticks).
    #[arg(long, value_name = "S")]
    pub seconds: Option<f64>,
    /// Run this many ticks (overrides the model's num_ticks).
    #[arg(long, value_name = "N")]
    pub ticks: Option<u64>,
    /// Keep the signals' streams after the run (to inspect them with `rtloop stream`).
    #[arg(long)]
    pub keep: bool,
    /// The output directory: sinks write here (a logger's `path`, a recorder's `out` are
    /// relative to it), and so do report.json and the PNG histograms (tick start, each
    /// process's execution time). Default: out/<model name> in the current directory; a run
    /// never writes next to its model file unless this says so.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// No live summary lines.
    #[arg(long, short)]
    pub quiet: bool,
    /// Only validate the model, compile its Rust modules and check that each Python module's
    /// `step` takes its inputs then its outputs (parsed, not run), then exit.
    #[arg(long)]
    pub check: bool,
}

/// Run `rtloop run`.
pub fn run(a: &RunArgs, g: &Global) -> anyhow::Result<ExitCode> {
    if a.check {
        return match rtloop_runtime::model::load(&a.model) {
            Ok(m) => {
                for p in &m.processes {
                    if let Err(e) = rtloop_runtime::run::check_python_step(&m, p) {
                        eprintln!("rtloop: module {:?}: {e}", p.name);
                        return Ok(ExitCode::from(2));
                    }
                    if let rtloop_runtime::model::Body::Rust { code } = &p.body {
                        if let Err(e) = rtloop_runtime::rust_module::compile(
                            code,
                            &rtloop_runtime::rust_module::default_cache_dir(),
                        ) {
                            eprintln!("rtloop: module {:?}: {e}", p.name);
                            return Ok(ExitCode::from(2));
                        }
                    }
                }
                println!(
                    "{}: ok ({} signals, {} processes, tick {} µs)",
                    a.model.display(),
                    m.signals.len(),
                    m.processes.len(),
                    m.config.tick.as_micros()
                );
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                eprintln!("rtloop: {e}");
                Ok(ExitCode::from(2))
            }
        };
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed));
    }
    let opts = RunOptions {
        seconds: a.seconds,
        ticks: a.ticks,
        keep: a.keep,
        live_every: (!a.quiet && !g.json).then_some(Duration::from_secs(1)),
        stop,
        rtloop_command: crate::self_command,
        out_dir: a.out.clone(),
    };
    let report = match rtloop_runtime::run::run(&a.model, &opts) {
        Ok(r) => r,
        Err(
            e @ (RunError::Model(_) | RunError::TickTooShort { .. } | RunError::Compile { .. }),
        ) => {
            eprintln!("rtloop: {e}");
            return Ok(ExitCode::from(2));
        }
        Err(e) => return Err(e.into()),
    };
    if g.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    let files = report.write_dir(&report.out_dir)?;
    if !g.json {
        println!(
            "outputs in {} (report.json and {} plots beside what the sinks wrote)",
            report.out_dir.display(),
            files.len().saturating_sub(1)
        );
    }
    if let Some(p) = &report.problem {
        eprintln!("rtloop: model {} stopped: {p}", report.model);
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
