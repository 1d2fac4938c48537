//! Process orchestration: how one rtloop process starts another to play a part (a device,
//! an echo, a runtime module) and knows when it is ready.
//!
//! A part is a [`ChildRole`]: a serialisable value whose type names the part and whose fields
//! are everything the child needs. [`spawn_ready`] starts the `rtloop` executable as
//! `rtloop child NAME JSON`, waits for the child to say it is ready, and hands back the
//! child with its stdout (for results it prints later). In the child, the command line's one
//! entry point reads NAME, turns JSON back into the role with [`role_from`] and runs it; the
//! child calls [`ready`] once it can serve. No positional argument lists cross a process
//! boundary: a role is a typed value on both sides.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// What a child process is started to do.
pub trait ChildRole: Serialize + DeserializeOwned {
    /// The name the child entry point dispatches on (`rtloop child NAME JSON`).
    const NAME: &'static str;
}

/// Why a child could not be started, or its role not read.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The executable could not be started.
    #[error("cannot start {role} ({exe}): {source}")]
    Spawn {
        /// The role.
        role: &'static str,
        /// The executable tried.
        exe: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The child ended or said something else before it was ready.
    #[error("{role} did not start: it printed {line:?} instead of \"ready\"{stderr}")]
    NotReady {
        /// The role.
        role: &'static str,
        /// What it printed.
        line: String,
        /// Where its own messages went.
        stderr: &'static str,
    },
    /// The role could not be written or read as JSON.
    #[error("role {role}: {source}")]
    Json {
        /// The role.
        role: &'static str,
        /// The serde error.
        source: serde_json::Error,
    },
    /// Reading the child's first line failed.
    #[error("reading {role}'s first line: {source}")]
    Io {
        /// The role.
        role: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The command that runs the `rtloop` executable: `RTLOOP_EXE` if set; else this process's
/// own executable, unless that is a Python interpreter (the Python package), which runs
/// `python -m rtloop` (`RTLOOP_PYTHON` overrides which Python).
///
/// The child it starts ends (SIGKILL) when the thread that started it ends
/// ([`rtloop_sys::end_with_parent`]): a killed `rtloop lab`, `bench` or `run` leaves no
/// children behind. So start it from a thread that outlives it.
#[must_use]
pub fn rtloop_command() -> Command {
    let mut cmd = rtloop_command_for_this();
    rtloop_sys::end_with_parent(&mut cmd);
    cmd
}

fn rtloop_command_for_this() -> Command {
    if let Some(exe) = std::env::var_os("RTLOOP_EXE") {
        return Command::new(exe);
    }
    let exe = std::env::current_exe().unwrap_or_else(|_| "rtloop".into());
    let is_python = exe
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("python"));
    if is_python {
        let python = rtloop_sys::python_named().unwrap_or(exe);
        let mut cmd = Command::new(python);
        cmd.args(["-m", "rtloop"]);
        return cmd;
    }
    Command::new(exe)
}

/// The arguments that make the `rtloop` executable play `role`.
pub fn child_args<R: ChildRole>(role: &R) -> Result<[OsString; 3], LaunchError> {
    let json = serde_json::to_string(role).map_err(|source| LaunchError::Json {
        role: R::NAME,
        source,
    })?;
    Ok(["child".into(), R::NAME.into(), json.into()])
}

/// The command that starts a child playing `role`, for callers that set its standard
/// streams themselves (a child that takes instructions on stdin).
pub fn command<R: ChildRole>(role: &R) -> Result<Command, LaunchError> {
    let mut cmd = rtloop_command();
    cmd.args(child_args(role)?);
    Ok(cmd)
}

/// Start a child playing `role` without waiting for it: for children that report by lines
/// of their own (their stdout is piped, their stderr goes where this process's goes).
pub fn spawn<R: ChildRole>(role: &R) -> Result<Child, LaunchError> {
    let mut cmd = rtloop_command();
    let exe = format!("{:?}", cmd.get_program());
    cmd.args(child_args(role)?)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|source| LaunchError::Spawn {
            role: R::NAME,
            exe,
            source,
        })
}

/// Start a child playing `role` and wait until it prints `ready`; its stdout stays piped for
/// what it prints later, its stderr goes where this process's goes.
pub fn spawn_ready<R: ChildRole>(role: &R) -> Result<(Child, BufReader<ChildStdout>), LaunchError> {
    let mut child = spawn(role)?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut out = BufReader::new(stdout);
    let mut line = String::new();
    if let Err(source) = out.read_line(&mut line) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(LaunchError::Io {
            role: R::NAME,
            source,
        });
    }
    if line.trim() != "ready" {
        let _ = child.kill();
        let _ = child.wait();
        return Err(LaunchError::NotReady {
            role: R::NAME,
            line: line.trim().to_owned(),
            stderr: " (its messages are above)",
        });
    }
    Ok((child, out))
}

/// In the child: the role from its JSON.
pub fn role_from<R: ChildRole>(json: &str) -> Result<R, LaunchError> {
    serde_json::from_str(json).map_err(|source| LaunchError::Json {
        role: R::NAME,
        source,
    })
}

/// In the child: tell the parent it is ready to serve.
pub fn ready() {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Echo {
        lines: String,
        cpu: Option<usize>,
    }
    impl ChildRole for Echo {
        const NAME: &'static str = "echo";
    }

    #[test]
    fn a_role_round_trips_through_its_arguments() {
        let role = Echo {
            lines: "pp-1".into(),
            cpu: Some(1),
        };
        let [child, name, json] = child_args(&role).unwrap();
        assert_eq!(
            (child.to_str(), name.to_str()),
            (Some("child"), Some("echo"))
        );
        assert_eq!(role_from::<Echo>(json.to_str().unwrap()).unwrap(), role);
        let e = role_from::<Echo>("{\"lines\": 3}").unwrap_err();
        assert!(e.to_string().starts_with("role echo: invalid type"), "{e}");
    }

    #[test]
    fn a_child_that_does_not_say_ready_is_reported_with_what_it_said() {
        std::env::set_var("RTLOOP_EXE", "/bin/echo");
        let e = spawn_ready(&Echo {
            lines: "x".into(),
            cpu: None,
        })
        .unwrap_err();
        std::env::remove_var("RTLOOP_EXE");
        let text = e.to_string();
        assert!(
            text.starts_with("echo did not start: it printed \"child echo {"),
            "{text}"
        );
    }
}
