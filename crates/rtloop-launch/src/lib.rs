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
//!
//! The library that owns a role registers the function that plays it with [`register_role!`],
//! beside the role's type. Any program that links it can then be its own child: its `main`
//! starts with [`play_if_child`], and the `rtloop` executable is not needed (the runtime, for
//! one, starts its processes from whatever program runs the model).

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

/// A role this program can play when it is started as a child: registered by the library
/// that owns the role, with [`register_role!`].
pub struct RoleEntry {
    /// The role's name ([`ChildRole::NAME`]).
    pub name: &'static str,
    /// Reads the role from its JSON and plays it to its end.
    pub play: fn(&str) -> Result<(), PlayError>,
}

inventory::collect!(RoleEntry);

#[doc(hidden)]
pub use inventory as __inventory;

/// Register the function that plays a role: `register_role!(MyRole, play_my_role);` where
/// `fn play_my_role(&MyRole) -> Result<(), E>` and `E` converts into a boxed error.
#[macro_export]
macro_rules! register_role {
    ($role:ty, $play:expr) => {
        $crate::__inventory::submit! {
            $crate::RoleEntry {
                name: <$role as $crate::ChildRole>::NAME,
                play: |json| {
                    let role: $role = $crate::role_from(json)?;
                    ($play)(&role).map_err(|e| $crate::PlayError::Role {
                        role: <$role as $crate::ChildRole>::NAME,
                        error: e.into(),
                    })
                },
            }
        }
    };
}

/// Why a role could not be played.
#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    /// No library linked into this program registered a role of that name.
    #[error("unknown child role {name:?}; this program plays {}", .known.join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
        /// The roles this program plays.
        known: Vec<&'static str>,
    },
    /// The arguments are not `child NAME JSON`.
    #[error("child {0}: expected one argument, the role as JSON")]
    Arguments(String),
    /// The role's JSON could not be read.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// The role ran and failed.
    #[error("{role}: {error}")]
    Role {
        /// The role.
        role: &'static str,
        /// Its error.
        error: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// The names of the roles this program plays, sorted.
#[must_use]
pub fn roles() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = inventory::iter::<RoleEntry>
        .into_iter()
        .map(|r| r.name)
        .collect();
    v.sort_unstable();
    v
}

/// In the child: play the role `name` from its JSON, with the function its library
/// registered.
pub fn play(name: &str, json: &str) -> Result<(), PlayError> {
    match inventory::iter::<RoleEntry>
        .into_iter()
        .find(|r| r.name == name)
    {
        Some(r) => (r.play)(json),
        None => Err(PlayError::Unknown {
            name: name.to_string(),
            known: roles(),
        }),
    }
}

/// At the top of a program's `main`: if this process was started as a child (`PROGRAM child
/// NAME JSON`), play the role and say how the process should exit; else `None`, and `main`
/// goes on. A child that fails prints why on stderr and exits with 1. Set up the program's
/// logging (a `tracing` subscriber) before it: the roles report warnings through `tracing`,
/// and without a subscriber they are lost.
#[must_use]
pub fn play_if_child() -> Option<std::process::ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).take(4).collect();
    if args.first().map(String::as_str) != Some("child") {
        return None;
    }
    let result = match args.as_slice() {
        [_, name, json] => play(name, json),
        [_, name, ..] => Err(PlayError::Arguments(name.clone())),
        _ => Err(PlayError::Arguments(String::new())),
    };
    Some(match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(1)
        }
    })
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
    let (child, out, ()) = spawn_ready_with(role)?;
    Ok((child, out))
}

/// [`spawn_ready`] for a child that says what it offers when it is ready ([`ready_with`]):
/// that, read as `T`, beside the child.
pub fn spawn_ready_with<R: ChildRole, T: DeserializeOwned>(
    role: &R,
) -> Result<(Child, BufReader<ChildStdout>, T), LaunchError> {
    let mut child = spawn(role)?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut out = BufReader::new(stdout);
    match wait_ready::<T>(R::NAME, &mut out) {
        Ok(offer) => Ok((child, out, offer)),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

/// In the parent: read the child's first line from `out`, the one readiness handshake of
/// every rtloop child: `ready`, or `ready JSON` with what it offers (an address, a socket
/// path), read as `T` (`()` for a bare `ready`).
pub fn wait_ready<T: DeserializeOwned>(
    role: &'static str,
    out: &mut impl BufRead,
) -> Result<T, LaunchError> {
    let mut line = String::new();
    out.read_line(&mut line)
        .map_err(|source| LaunchError::Io { role, source })?;
    let text = line.trim();
    let offer = match text.strip_prefix("ready") {
        Some("") => "null",
        Some(rest) if rest.starts_with(' ') => rest.trim_start(),
        _ => {
            return Err(LaunchError::NotReady {
                role,
                line: text.to_owned(),
                stderr: " (its messages are above)",
            })
        }
    };
    serde_json::from_str(offer).map_err(|source| LaunchError::Json { role, source })
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
    let _ = write_ready(&mut std::io::stdout().lock(), &());
}

/// In the child: tell the parent it is ready, and what it offers (read by
/// [`spawn_ready_with`] or [`wait_ready`]).
///
/// # Errors
/// stdout cannot be written.
pub fn ready_with<T: Serialize>(offer: &T) -> std::io::Result<()> {
    write_ready(&mut std::io::stdout().lock(), offer)
}

/// [`ready_with`] on another output (a child that reports through a writer it is given).
///
/// # Errors
/// `out` cannot be written.
pub fn write_ready<T: Serialize>(out: &mut impl Write, offer: &T) -> std::io::Result<()> {
    let json = serde_json::to_string(offer).map_err(std::io::Error::other)?;
    if json == "null" {
        writeln!(out, "ready")?;
    } else {
        writeln!(out, "ready {json}")?;
    }
    out.flush()
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

    fn play_echo(r: &Echo) -> Result<(), std::io::Error> {
        if r.lines == "fail" {
            return Err(std::io::Error::other("asked to fail"));
        }
        Ok(())
    }
    register_role!(Echo, play_echo);

    #[test]
    fn ready_says_what_the_child_offers_and_anything_else_is_refused() {
        let mut buf = Vec::new();
        write_ready(&mut buf, &("127.0.0.1:5", 7u16)).unwrap();
        write_ready(&mut buf, &()).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&buf),
            "ready [\"127.0.0.1:5\",7]\nready\n"
        );
        let mut r = std::io::Cursor::new(buf);
        let offer: (String, u16) = wait_ready("echo", &mut r).unwrap();
        assert_eq!(offer, ("127.0.0.1:5".to_string(), 7));
        wait_ready::<()>("echo", &mut r).unwrap();
        // ended before it was ready, or said something else
        let e = wait_ready::<()>("echo", &mut r).unwrap_err();
        assert!(matches!(e, LaunchError::NotReady { .. }), "{e:?}");
        let e = wait_ready::<()>("echo", &mut std::io::Cursor::new("readyish\n")).unwrap_err();
        assert!(matches!(e, LaunchError::NotReady { .. }), "{e:?}");
        // an offer that is not what the parent expects
        let e = wait_ready::<u16>("echo", &mut std::io::Cursor::new("ready \"x\"\n")).unwrap_err();
        assert!(matches!(e, LaunchError::Json { .. }), "{e:?}");
    }

    #[test]
    fn a_registered_role_is_played_by_name_and_an_unknown_one_is_refused() {
        assert!(roles().contains(&"echo"), "{:?}", roles());
        play("echo", r#"{"lines": "x", "cpu": null}"#).unwrap();
        let e = play("echo", r#"{"lines": "fail", "cpu": null}"#).unwrap_err();
        assert!(matches!(e, PlayError::Role { role: "echo", .. }), "{e:?}");
        assert_eq!(e.to_string(), "echo: asked to fail");
        let e = play("echo", r#"{"lines": 3}"#).unwrap_err();
        assert!(
            matches!(e, PlayError::Launch(LaunchError::Json { .. })),
            "{e:?}"
        );
        let e = play("nobody", "{}").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unknown child role \"nobody\"; this program plays ")
                && e.to_string().contains("echo"),
            "{e}"
        );
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
