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

/// The role from its one argument, JSON.
fn typed<R: ChildRole>(a: &ChildArgs) -> anyhow::Result<R> {
    let [json] = a.args.as_slice() else {
        bail!("child {}: expected one argument, the role as JSON", R::NAME)
    };
    Ok(rtloop_launch::role_from(json)?)
}

/// Run the role `a` names with the function that plays it.
macro_rules! dispatch {
    ($a:expr; $($role:ty => $play:expr),* $(,)?) => {{
        $(
            if $a.role == <$role as ChildRole>::NAME {
                let role: $role = typed($a)?;
                return $play(&role);
            }
        )*
        bail!("unknown child role {:?}", $a.role)
    }};
}

/// Run a child role.
pub fn run(a: &ChildArgs, _g: &Global) -> anyhow::Result<()> {
    #[cfg(feature = "iceoryx2-peer")]
    {
        use crate::peer_iceoryx2 as ix2;
        if a.role.starts_with("ix2-") {
            dispatch!(a;
                ix2::PubRole => ix2::pub_role,
                ix2::SubRole => ix2::sub_role,
                ix2::EchoRole => ix2::echo_role,
            );
        }
    }
    dispatch!(a;
        crate::cmd_demo::ReaderRole => crate::cmd_demo::reader_role,
        crate::cmd_verify::GenRole => crate::cmd_verify::gen_role,
        crate::cmd_verify::RecvRole => crate::cmd_verify::recv_role,
        crate::cmd_bench::StreamEchoRole => crate::cmd_bench::stream_echo_role,
        rtloop_lab::reference::EchoRole => |r| Ok(rtloop_lab::reference::run_echo(r)?),
        rtloop_lab::loadtest::DeviceRole => |r| Ok(rtloop_lab::loadtest::run_device(r)?),
        rtloop_peers::spsc::ProducerRole => |r| Ok(rtloop_peers::spsc::run_producer(r)?),
        rtloop_peers::spsc::ConsumerRole => |r| Ok(rtloop_peers::spsc::run_consumer(r)?),
        rtloop_peers::run::WriterRole => crate::cmd_bench_peers::writer_role,
        rtloop_peers::run::ReaderRole => crate::cmd_bench_peers::reader_role,
        rtloop_runtime::process::ChildArgs => crate::cmd_run::process_role,
    )
}
