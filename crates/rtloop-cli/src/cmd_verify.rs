//! `rtloop verify`.
use crate::Global;

/// Options of `rtloop verify`.
#[derive(Debug, Clone, clap::Args)]
pub struct VerifyArgs {
    /// Packets per pair.
    #[arg(long, default_value_t = 1_000_000)]
    pub packets: u64,
}

/// Run the verification.
pub fn run(_a: &VerifyArgs, _g: &Global) -> anyhow::Result<()> {
    anyhow::bail!("rtloop verify is being built")
}
