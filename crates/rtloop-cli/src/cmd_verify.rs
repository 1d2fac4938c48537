//! `rtloop verify`: the HMF transmitter's generator/receiver test through rtloop streams
//! (rtloop_bench::verify); the options, the table or JSON, and the exit status.

use crate::progress::{of_total, BenchProgress};
use crate::Global;

/// Options of `rtloop verify`.
#[derive(Debug, Clone, clap::Args)]
pub struct VerifyArgs {
    /// Packets each generator sends (HMF ran 10^9).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub packets: u64,
    /// Generator/receiver pairs running at once, each through its own stream.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=32))]
    pub pairs: u64,
    /// Bytes per packet (a multiple of 8).
    #[arg(long, default_value_t = 8192, value_parser = packet_bytes)]
    pub packet_bytes: u64,
    /// Packets the stream keeps (HMF used primes: 24989, 49999, 74959).
    #[arg(long, default_value_t = 24989, value_parser = clap::value_parser!(u64).range(1..))]
    pub capacity: u64,
    /// lossless: the generator waits for the receiver, every packet must arrive;
    /// latest: the generator never waits, packets the receiver misses count as lost.
    #[arg(long, default_value = "lossless", value_parser = ["lossless", "latest"])]
    pub mode: String,
    /// Packets per commit.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub batch: u64,
    /// What the receiver checks: every word of every packet (all), or only the first word,
    /// HMF's default flag check (first).
    #[arg(long, default_value = "all", value_parser = ["all", "first"])]
    pub check: String,
}

fn packet_bytes(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(v) if v >= 8 && v % 8 == 0 && v <= 1 << 24 => Ok(v),
        _ => Err(format!(
            "expected a multiple of 8 from 8 to 16777216, got {s:?}"
        )),
    }
}

/// Run the verification.
pub fn run(a: &VerifyArgs, g: &Global) -> anyhow::Result<()> {
    let c = rtloop_bench::verify::Config {
        packets: a.packets,
        pairs: a.pairs,
        packet_bytes: a.packet_bytes,
        capacity: a.capacity,
        mode: a.mode.clone(),
        batch: a.batch,
        check: a.check.clone(),
    };
    // live progress on stderr, also when piped (a plain line every few seconds)
    let mut p = BenchProgress::with_line("verify", g.json, |what, done, total, elapsed| {
        of_total(done, total, elapsed, what)
    });
    let r = rtloop_bench::verify::run(&c, &mut p)?;
    drop(p);
    if g.json {
        println!("{}", r.json()?);
    } else {
        print!("{}", r.table());
    }
    Ok(r.check()?)
}
