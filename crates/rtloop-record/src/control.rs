//! A recording's control socket: one command per line over a UNIX socket, one line back,
//! for headless rigs. `rtloop record --control PATH` and `rtloop.record(..., control=PATH)`
//! both serve it through [`ControlSocket`].
//!
//! | command | effect | reply |
//! |---|---|---|
//! | `status` | none | one JSON line: streams, samples, lost, lost_events (per stream), paused |
//! | `start` | write samples (after `--wait-start` or `pause`) | `ok` |
//! | `pause` | discard samples until `start` | `ok` |
//! | `split` | close each segment and open the next | `ok` |
//! | `stop` | end the recording | `ok` |
//!
//! Anything else gets `error: unknown command "..."; allowed: ...` and the connection stays
//! open. The socket is owner-only whatever the umask, and connections from another user are
//! refused.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;

use crate::Control;

/// The commands the control socket takes, in the order its error message lists them.
pub const COMMANDS: [&str; 5] = ["status", "start", "pause", "split", "stop"];

/// What `status` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    /// The streams recorded, in order.
    pub streams: Vec<String>,
    /// Samples written so far, per stream.
    pub samples: Vec<u64>,
    /// Samples lost so far, per stream.
    pub lost: Vec<u64>,
    /// Events lost so far, per stream.
    pub lost_events: Vec<u64>,
    /// True while any recorder discards samples (waiting for `start`, or paused).
    pub paused: bool,
}

/// The live status of recorders `controls` of `streams`.
#[must_use]
pub fn status(streams: &[String], controls: &[Arc<Control>]) -> Status {
    let each = |f: &dyn Fn(&Control) -> u64| controls.iter().map(|c| f(c)).collect();
    Status {
        streams: streams.to_vec(),
        samples: each(&|c| c.samples.load(Ordering::Relaxed)),
        lost: each(&|c| c.lost.load(Ordering::Relaxed)),
        lost_events: each(&|c| c.lost_events.load(Ordering::Relaxed)),
        paused: controls.iter().any(|c| c.paused.load(Ordering::Relaxed)),
    }
}

/// Carry out one command line on `controls`; the line to answer.
#[must_use]
pub fn answer(line: &str, streams: &[String], controls: &[Arc<Control>]) -> String {
    // Ordering: flags with nothing published through them: Relaxed.
    let set = |f: &dyn Fn(&Control)| controls.iter().for_each(|c| f(c));
    match line.trim() {
        "status" => serde_json::to_string(&status(streams, controls))
            .unwrap_or_else(|e| format!("error: {e}")),
        "start" => {
            set(&|c| c.paused.store(false, Ordering::Relaxed));
            "ok".into()
        }
        "pause" => {
            set(&|c| c.paused.store(true, Ordering::Relaxed));
            "ok".into()
        }
        "split" => {
            set(&|c| c.split.store(true, Ordering::Relaxed));
            "ok".into()
        }
        "stop" => {
            set(&|c| c.stop.store(true, Ordering::Relaxed));
            "ok".into()
        }
        other => format!(
            "error: unknown command {other:?}; allowed: {}",
            COMMANDS.join(", ")
        ),
    }
}

/// A control socket being served on its own thread; closed (the thread joined, the socket
/// file removed) by [`ControlSocket::close`] or on drop.
#[derive(Debug)]
pub struct ControlSocket {
    path: PathBuf,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControlSocket {
    /// Listen on `path` (a stale socket file there is replaced) for commands to the
    /// recorders `controls` of `streams`.
    ///
    /// # Errors
    /// The socket cannot be made at `path` (its directory is missing or not writable, or
    /// the path is too long for a UNIX socket).
    pub fn serve(
        path: &Path,
        streams: Vec<String>,
        controls: Vec<Arc<Control>>,
    ) -> io::Result<ControlSocket> {
        let _ = std::fs::remove_file(path);
        // owner-only whatever the umask, and connections from other users refused
        let listener = rtloop_sys::bind_private_unix(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot listen on control socket {}: {e}", path.display()),
            )
        })?;
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                // Ordering: a flag with nothing published through it: Relaxed.
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                if let Err(peer) = rtloop_sys::peer_is_me(&conn) {
                    tracing::warn!(?peer, "refused a control connection from another user");
                    continue;
                }
                converse(conn, &streams, &controls);
            }
        });
        Ok(ControlSocket {
            path: path.to_owned(),
            done,
            thread: Some(thread),
        })
    }

    /// Where the socket listens.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stop listening: wake the accept loop, wait for it, remove the socket file.
    pub fn close(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        let Some(t) = self.thread.take() else { return };
        self.done.store(true, Ordering::Relaxed);
        // a connection wakes the accept loop, which then sees `done`
        let _ = UnixStream::connect(&self.path);
        let _ = t.join();
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.shut();
    }
}

/// Answer one connection's lines until it closes.
fn converse(conn: UnixStream, streams: &[String], controls: &[Arc<Control>]) {
    let Ok(mut w) = conn.try_clone() else { return };
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { break };
        if writeln!(w, "{}", answer(&line, streams, controls)).is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(s: &mut BufReader<UnixStream>, line: &str) -> String {
        writeln!(s.get_mut(), "{line}").unwrap();
        let mut back = String::new();
        s.read_line(&mut back).unwrap();
        back.trim_end().to_owned()
    }

    /// Every command over a real socket changes the recorders' controls as it says, an
    /// unknown one is refused with what is allowed, and closing removes the socket file.
    #[test]
    fn each_command_over_the_socket() {
        let dir = rtloop_testkit::TempDir::new("control");
        let path = dir.path().join("ctl");
        let controls = vec![Arc::new(Control::default()), Arc::new(Control::default())];
        controls[0].samples.store(5, Ordering::Relaxed);
        controls[1].lost.store(2, Ordering::Relaxed);
        let sock =
            ControlSocket::serve(&path, vec!["a".into(), "b".into()], controls.clone()).unwrap();
        let mut s = BufReader::new(UnixStream::connect(&path).unwrap());
        let status: serde_json::Value = serde_json::from_str(&ask(&mut s, "status")).unwrap();
        assert_eq!(
            status,
            serde_json::json!({"streams": ["a", "b"], "samples": [5, 0], "lost": [0, 2],
                "lost_events": [0, 0], "paused": false})
        );
        assert_eq!(ask(&mut s, "pause"), "ok");
        assert!(controls.iter().all(|c| c.paused.load(Ordering::Relaxed)));
        assert!(ask(&mut s, "status").contains("\"paused\":true"));
        assert_eq!(ask(&mut s, "start"), "ok");
        assert!(!controls.iter().any(|c| c.paused.load(Ordering::Relaxed)));
        assert_eq!(ask(&mut s, "split"), "ok");
        assert!(controls.iter().all(|c| c.split.load(Ordering::Relaxed)));
        assert_eq!(
            ask(&mut s, "rewind"),
            "error: unknown command \"rewind\"; allowed: status, start, pause, split, stop"
        );
        assert_eq!(
            ask(&mut s, "  stop "),
            "ok",
            "surrounding blanks are ignored"
        );
        assert!(controls.iter().all(|c| c.stop.load(Ordering::Relaxed)));
        drop(s);
        assert!(path.exists());
        sock.close();
        assert!(!path.exists(), "the socket file goes with the socket");
    }

    /// A socket that cannot be made says where.
    #[test]
    fn a_socket_in_a_missing_directory_is_refused_with_its_path() {
        let path = std::env::temp_dir().join("rtloop-no-such-dir-for-control/ctl");
        let e = ControlSocket::serve(&path, vec![], vec![]).unwrap_err();
        assert!(
            e.to_string().contains("cannot listen on control socket")
                && e.to_string().contains("rtloop-no-such-dir-for-control/ctl"),
            "{e}"
        );
    }
}
