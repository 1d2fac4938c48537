//! `rtloop sys-info`.
use crate::Global;

/// Options of `rtloop sys-info`.
#[derive(Debug, Clone, clap::Args)]
pub struct SysInfoArgs {}

/// Print machine facts.
pub fn run(_a: &SysInfoArgs, _g: &Global) -> anyhow::Result<()> {
    anyhow::bail!("rtloop sys-info is being built")
}
