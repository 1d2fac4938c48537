//! Child roles started by other rtloop processes (`rtloop child <role> ...`).
use std::io::{BufRead, BufReader};
use std::process::Stdio;

use anyhow::{bail, Context};

use crate::Global;

/// A child role and its arguments (internal).
#[derive(Debug, Clone, clap::Args)]
pub struct ChildArgs {
    /// The role.
    pub role: String,
    /// Role arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// Run a child role.
pub fn run(a: &ChildArgs, _g: &Global) -> anyhow::Result<()> {
    match a.role.as_str() {
        "demo-reader" => crate::cmd_demo::reader_role(&typed(a)?),
        "verify-gen" => crate::cmd_verify::gen_role(&typed(a)?),
        "verify-recv" => crate::cmd_verify::recv_role(&typed(a)?),
        "pp-bare-echo" => Ok(rtloop_lab::reference::run_echo(&typed(a)?)?),
        "pp-stream-echo" => crate::cmd_bench::stream_echo_role(&typed(a)?),
        "spsc-producer" => Ok(rtloop_peers::spsc::run_producer(&typed(a)?)?),
        "spsc-consumer" => Ok(rtloop_peers::spsc::run_consumer(&typed(a)?)?),
        "lab-device" => Ok(rtloop_lab::loadtest::run_device(&typed(a)?)?),
        "runtime-process" => crate::cmd_run::process_role(&a.args),
        "peer-writer" => crate::cmd_bench_peers::writer_role(&a.args),
        "peer-reader" => crate::cmd_bench_peers::reader_role(&a.args),
        #[cfg(feature = "iceoryx2-peer")]
        "ix2-pub" => crate::peer_iceoryx2::pub_role(&a.args),
        #[cfg(feature = "iceoryx2-peer")]
        "ix2-sub" => crate::peer_iceoryx2::sub_role(&a.args),
        #[cfg(feature = "iceoryx2-peer")]
        "ix2-echo" => crate::peer_iceoryx2::echo_role(&a.args),
        other => anyhow::bail!("unknown child role {other:?}"),
    }
}

/// The typed role of a child started with [`rtloop_launch::spawn_ready`]: its one argument
/// is the role as JSON.
fn typed<R: rtloop_launch::ChildRole>(a: &ChildArgs) -> anyhow::Result<R> {
    let [json] = a.args.as_slice() else {
        bail!("child {}: expected one argument, the role as JSON", R::NAME)
    };
    Ok(rtloop_launch::role_from(json)?)
}

/// Start `rtloop child ROLE ARGS...` and wait for it to print `ready` (its stdout stays
/// piped for the results it prints later).
pub fn spawn_ready(
    role: &str,
    args: &[String],
) -> anyhow::Result<(std::process::Child, BufReader<std::process::ChildStdout>)> {
    let mut c = crate::self_command()
        .args(["child", role])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {role}"))?;
    let mut out = BufReader::new(c.stdout.take().context("child stdout")?);
    let mut line = String::new();
    out.read_line(&mut line)?;
    if line.trim() != "ready" {
        let _ = c.kill();
        let _ = c.wait();
        bail!("{role} did not start: {line:?}");
    }
    Ok((c, out))
}
