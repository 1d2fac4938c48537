//! `rtloop stream ...`.
use crate::Global;

/// Stream commands.
#[derive(Debug, clap::Subcommand)]
pub enum StreamCommand {
    /// List streams.
    List,
}

/// Run a stream command.
pub fn run(_c: StreamCommand, _g: &Global) -> anyhow::Result<()> {
    anyhow::bail!("rtloop stream is being built")
}
