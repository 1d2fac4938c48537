//! `rtloop demo`.
use crate::Global;

/// Options of `rtloop demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
}

/// Run the demo.
pub fn run(_a: &DemoArgs, _g: &Global) -> anyhow::Result<()> {
    anyhow::bail!("rtloop demo is being built")
}
