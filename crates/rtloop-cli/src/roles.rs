//! `rtloop child NAME JSON` runs the typed role NAME (an [`rtloop_launch::ChildRole`]) that
//! another rtloop process started: the library that owns the role registered how it is
//! played, and [`rtloop_launch::play`] finds it.

use crate::Global;

/// A child role and its arguments (internal).
#[derive(Debug, Clone, clap::Args)]
pub struct ChildArgs {
    /// The role.
    pub role: String,
    /// The role as JSON.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// Run a child role.
pub fn run(a: &ChildArgs, _g: &Global) -> anyhow::Result<()> {
    let [json] = a.args.as_slice() else {
        return Err(rtloop_launch::PlayError::Arguments(a.role.clone()).into());
    };
    Ok(rtloop_launch::play(&a.role, json)?)
}
