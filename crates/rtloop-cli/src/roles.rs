//! The one child entry point: `rtloop child NAME JSON` runs the typed role NAME (an
//! [`rtloop_launch::ChildRole`]) that another rtloop process started with
//! [`rtloop_launch::spawn`] or [`rtloop_launch::spawn_ready`].

use anyhow::bail;
use rtloop_launch::ChildRole;

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

/// Run the role `name` with the function that plays it, its JSON read as that role.
macro_rules! dispatch {
    ($name:expr, $json:expr; $($role:ty => $play:expr),* $(,)?) => {{
        $(
            if $name == <$role as ChildRole>::NAME {
                let role: $role = rtloop_launch::role_from($json)?;
                return $play(&role);
            }
        )*
        bail!("unknown child role {:?}", $name)
    }};
}

/// Run a child role: the benchmarks' (rtloop_bench::child), else the command line's own.
pub fn run(a: &ChildArgs, _g: &Global) -> anyhow::Result<()> {
    let [json] = a.args.as_slice() else {
        bail!("child {}: expected one argument, the role as JSON", a.role)
    };
    if let Some(r) = rtloop_bench::child::run(&a.role, json) {
        return Ok(r?);
    }
    dispatch!(a.role, json;
        crate::cmd_demo::ReaderRole => crate::cmd_demo::reader_role,
        rtloop_lab::reference::EchoRole => |r| Ok(rtloop_lab::reference::run_echo(r)?),
        rtloop_lab::reference::LoopDeviceRole => |r| Ok(rtloop_lab::reference::run_loop_device(r)?),
        rtloop_lab::loadtest::DeviceRole => |r| Ok(rtloop_lab::loadtest::run_device(r)?),
        rtloop_runtime::process::ChildArgs => crate::cmd_run::process_role,
    )
}
