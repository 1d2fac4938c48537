//! # rtloop-testkit
//!
//! Helpers for rtloop's integration tests (conventions §4.4–§4.5):
//!
//! * [`unique_name`] — a stream name no other test (in this or another process) uses, so
//!   tests run in parallel;
//! * [`Watchdog`] — aborts the test process with a message if a test hangs;
//! * [`spawn_role`] / [`role`] — run the current test executable again as a child process
//!   that plays a role (writer, reader, ...) in a multi-process test;
//! * [`StreamGuard`] — removes a stream when the test ends, pass or fail;
//! * [`report`] / [`parse_reports`] — pass results from a child back to the parent;
//! * [`pty::Pty`] — a pseudo-terminal pair a serial sink writes to and the test reads.
//!
//! A multi-process test looks like this:
//!
//! ```no_run
//! use rtloop_testkit::{role, spawn_role, unique_name, StreamGuard, Watchdog};
//!
//! #[test]
//! fn reader_in_another_process_sees_every_sample() {
//!     if let Some(role) = role() {
//!         // the child: the parent passed the stream name in the environment
//!         let name = std::env::var("STREAM").unwrap();
//!         // ... play `role` ...
//!         return;
//!     }
//!     let _dog = Watchdog::arm(30, "reader_in_another_process_sees_every_sample");
//!     let name = unique_name("reader-sees-all");
//!     // ... create the stream, then:
//!     let _guard = StreamGuard::new(&name);
//!     let child = spawn_role(
//!         "reader_in_another_process_sees_every_sample",
//!         "reader",
//!         &[("STREAM", name.as_str())],
//!     );
//!     // ...
//! }
//! ```

#![forbid(unsafe_code)]

pub mod pty;
mod small_shm;
pub use small_shm::SmallShm;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

/// The environment variable that tells a re-run test executable which role to play.
pub const ROLE_ENV: &str = "RTLOOP_TEST_ROLE";

/// Prefix of the lines [`report`] prints.
pub const REPORT_PREFIX: &str = "rtloop-testkit-report:";

static COUNTER: Mutex<u64> = Mutex::new(0);

/// A stream name unique to this call: `t<pid>-<counter>-<label>`, cut to the 64-character
/// limit, using only characters stream names allow.
#[must_use]
pub fn unique_name(label: &str) -> String {
    let n = {
        let mut c = COUNTER
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *c += 1;
        *c
    };
    let clean: String = label
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || ch == '-' || ch == '_' {
                ch
            } else {
                '-'
            }
        })
        .collect();
    let mut name = format!("t{}-{}-{}", std::process::id(), n, clean);
    name.truncate(rtloop_stream::NAME_MAX);
    name
}

/// Aborts the whole test process with a message if it is not dropped within its time, so a
/// hung multi-process test fails with a reason instead of eating the CI budget.
#[derive(Debug)]
pub struct Watchdog {
    // dropping the sender wakes the watchdog thread, which then ends quietly
    _disarm: mpsc::Sender<()>,
}

impl Watchdog {
    /// Arm: after `seconds`, print what hung and abort the process.
    #[must_use]
    pub fn arm(seconds: u64, what: &str) -> Watchdog {
        let (tx, rx) = mpsc::channel::<()>();
        let what = what.to_owned();
        std::thread::Builder::new()
            .name("rtloop-watchdog".into())
            .spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) =
                    rx.recv_timeout(Duration::from_secs(seconds))
                {
                    eprintln!(
                        "rtloop-testkit watchdog: {what} did not finish within {seconds} s; \
                         aborting the test process (pid {})",
                        std::process::id()
                    );
                    std::process::abort();
                }
            })
            .expect("spawn the watchdog thread");
        Watchdog { _disarm: tx }
    }
}

/// The role this process was started to play, if it is a child started by [`spawn_role`].
#[must_use]
pub fn role() -> Option<String> {
    std::env::var(ROLE_ENV).ok()
}

/// The `Command` that re-runs exactly test `test_name` of the current test executable as a
/// child playing `role`, with `envs` set (the caller may add more and spawn it).
/// stdout is piped (for [`report`] lines), stderr inherited.
#[must_use]
pub fn role_command(test_name: &str, role: &str, envs: &[(&str, &str)]) -> Command {
    let exe = std::env::current_exe().expect("the current test executable");
    let mut cmd = Command::new(exe);
    cmd.args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, role)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd
}

/// Start the current test executable again, running only `test_name`, as a child playing
/// `role` (see [`role_command`]).
#[must_use]
pub fn spawn_role(test_name: &str, role: &str, envs: &[(&str, &str)]) -> Child {
    role_command(test_name, role, envs)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn child role {role:?} of test {test_name}: {e}"))
}

/// What a child reported with [`report`], with its whole stdout for failure messages.
#[derive(Debug, Clone)]
pub struct Reports {
    what: String,
    stdout: String,
    values: HashMap<String, String>,
}

impl Reports {
    /// The value reported for `key`; panics (showing the child's output) if there is none.
    #[must_use]
    pub fn get(&self, key: &str) -> &str {
        self.values.get(key).map_or_else(
            || {
                panic!(
                    "{} reported no {key:?}; its output:\n{}",
                    self.what, self.stdout
                )
            },
            String::as_str,
        )
    }
}

/// Wait for a child to exit, assert it succeeded, and return its [`report`]s.
pub fn finish(child: Child, what: &str) -> Reports {
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait for {what}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what} failed ({}); its output:\n{stdout}",
        out.status
    );
    Reports {
        what: what.to_owned(),
        values: parse_reports(&stdout),
        stdout: stdout.into_owned(),
    }
}

/// In a child: print `key=value` for the parent ([`finish`] / [`parse_reports`]).
pub fn report(key: &str, value: impl std::fmt::Display) {
    println!("{REPORT_PREFIX} {key}={value}");
}

/// The `key=value` pairs a child printed with [`report`].
#[must_use]
pub fn parse_reports(stdout: &str) -> HashMap<String, String> {
    stdout
        .lines()
        // libtest may print "test name ... " on the same line before the first report
        .filter_map(|l| l.find(REPORT_PREFIX).map(|i| &l[i + REPORT_PREFIX.len()..]))
        .filter_map(|kv| {
            let (k, v) = kv.trim().split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// Removes a stream's name when dropped (the end of the test, pass or fail). A stream that
/// is already gone is fine.
#[derive(Debug)]
pub struct StreamGuard {
    name: String,
}

impl StreamGuard {
    /// Guard stream `name`.
    #[must_use]
    pub fn new(name: &str) -> StreamGuard {
        StreamGuard {
            name: name.to_owned(),
        }
    }

    /// The guarded name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        // the file itself, whatever it is: tests also place symbolic links and foreign
        // files under stream names, which `Stream::remove` rightly refuses to touch
        let _ = std::fs::remove_file(rtloop_stream::stream_path(&self.name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_differ_and_are_valid_stream_names() {
        let a = unique_name("same label");
        let b = unique_name("same label");
        assert_ne!(a, b);
        let long = unique_name(&"x".repeat(200));
        for n in [&a, &b, &long] {
            rtloop_stream::validate_name(n).unwrap();
        }
        assert!(a.contains(&std::process::id().to_string()));
    }

    #[test]
    fn reports_round_trip_through_stdout_text() {
        let text = format!(
            "noise\ntest x ... {REPORT_PREFIX} got=12\n  {REPORT_PREFIX} pid=7\nmore noise"
        );
        let r = parse_reports(&text);
        assert_eq!(r.len(), 2);
        assert_eq!(r["got"], "12");
        assert_eq!(r["pid"], "7");
    }

    #[test]
    fn disarmed_watchdog_lets_the_process_live() {
        let dog = Watchdog::arm(1, "a test that finishes in time");
        drop(dog);
        std::thread::sleep(Duration::from_millis(1200));
    }
}

/// A directory for one test, removed with everything in it when this value is dropped —
/// also when the test panics (unwinding drops it). Derefs to its [`Path`].
#[derive(Debug)]
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    /// A new, empty directory under the system temp dir, named after `label`.
    #[must_use]
    pub fn new(label: &str) -> TempDir {
        TempDir(
            tempfile::Builder::new()
                .prefix(&format!("rtloop-test-{label}-"))
                .tempdir()
                .expect("create a temporary directory"),
        )
    }

    /// The directory.
    #[must_use]
    pub fn path(&self) -> &std::path::Path {
        self.0.path()
    }
}

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        self.0.path()
    }
}

impl AsRef<std::path::Path> for TempDir {
    fn as_ref(&self) -> &std::path::Path {
        self.0.path()
    }
}
