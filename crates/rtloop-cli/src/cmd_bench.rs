//! `rtloop bench ...`.
use crate::Global;

/// Benchmarks.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Stream throughput and latency against memcpy and a cache-line ping-pong.
    Stream,
}

/// Run a benchmark.
pub fn run(_c: BenchCommand, _g: &Global) -> anyhow::Result<()> {
    anyhow::bail!("rtloop bench is being built")
}
