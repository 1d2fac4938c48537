//! `rtloop.bench`: the benchmarks, called as the command line calls them
//! (`rtloop_bench::<name>::run`), their progress going to Python's `logging`.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use rtloop_bench::{BenchError, Progress};

/// Progress as log records (`rtloop.bench` logger, through pyo3-log).
struct LogProgress;

impl Progress for LogProgress {
    fn note(&mut self, what: &str) {
        tracing::info!(target: "rtloop.bench", "{what}");
    }
    fn step(&mut self, what: &str, done: u64, total: u64) {
        tracing::info!(target: "rtloop.bench", "{what}: {done}/{total}");
    }
    fn warn(&mut self, what: &str) {
        tracing::warn!(target: "rtloop.bench", "{what}");
    }
}

fn config<C: serde::de::DeserializeOwned>(name: &str, json: &str) -> PyResult<C> {
    serde_json::from_str(json)
        .map_err(|e| PyValueError::new_err(format!("rtloop.bench.{name}: {e}")))
}

fn report(r: Result<impl serde::Serialize, BenchError>) -> PyResult<String> {
    match r {
        Ok(r) => serde_json::to_string(&r).map_err(|e| PyRuntimeError::new_err(e.to_string())),
        Err(e @ BenchError::Config(_)) => Err(PyValueError::new_err(e.to_string())),
        Err(e) => Err(PyRuntimeError::new_err(e.to_string())),
    }
}

/// Run benchmark `name` (stream, fieldtrip, pipeline, runtime, peers, verify) with its
/// config as JSON (the library's `Config` fields; unknown ones are refused), the GIL released;
/// returns its report as JSON, the object `--json` prints. A bad config raises ValueError
/// saying what is allowed; a failed run RuntimeError with its error.
#[pyfunction]
pub(crate) fn bench_run(py: Python<'_>, name: &str, config_json: &str) -> PyResult<String> {
    use rtloop_bench as b;
    let p = &mut LogProgress;
    match name {
        "stream" => {
            let c: b::stream::Config = config(name, config_json)?;
            report(crate::exit::detach(py, || b::stream::run(&c, p)))
        }
        "fieldtrip" => {
            let c: b::fieldtrip::Config = config(name, config_json)?;
            report(crate::exit::detach(py, || b::fieldtrip::run(&c, p)))
        }
        "pipeline" => {
            let c: b::pipeline::Config = config(name, config_json)?;
            report(crate::exit::detach(py, || b::pipeline::run(&c, p)))
        }
        "runtime" => {
            let c: b::runtime::Config = config(name, config_json)?;
            report(crate::exit::detach(py, || b::runtime::run(&c, p)))
        }
        "peers" => {
            let c: b::peers::Config = config(name, config_json)?;
            report(crate::exit::detach(py, || b::peers::run(&c, p)))
        }
        "verify" => {
            let c: b::verify::Config = config(name, config_json)?;
            report(crate::exit::detach(py, || b::verify::run(&c, p)))
        }
        other => Err(PyValueError::new_err(format!(
            "no benchmark {other:?}; there are stream, fieldtrip, pipeline, runtime, peers, verify"
        ))),
    }
}
