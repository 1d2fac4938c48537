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
//! open. Each connection is served on its own thread, and closing the socket ends every
//! connection still open, so a client that stays connected (a status poller) never holds
//! the recording's end up. The socket is owner-only whatever the umask, and connections from
//! another user are refused.

use std::io::{self, BufRead, BufReader, Write};
use std::net::Shutdown;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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

/// Each open connection (a handle to shut it down) and the thread answering it.
type Connections = Arc<Mutex<Vec<(UnixStream, std::thread::JoinHandle<()>)>>>;

/// A control socket being served on its own thread; closed (the thread joined, the socket
/// file removed) by [`ControlSocket::close`] or on drop.
#[derive(Debug)]
pub struct ControlSocket {
    path: PathBuf,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    conns: Connections,
}

impl ControlSocket {
    /// Listen on `path` (a stale socket there is replaced) for commands to the recorders
    /// `controls` of `streams`.
    ///
    /// # Errors
    /// Something other than a socket is at `path` (it is left as it is), or the socket
    /// cannot be made there (its directory is missing or not writable, or the path is too
    /// long for a UNIX socket).
    pub fn serve(
        path: &Path,
        streams: Vec<String>,
        controls: Vec<Arc<Control>>,
    ) -> io::Result<ControlSocket> {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => {
                let _ = std::fs::remove_file(path);
            }
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "cannot listen on control socket {}: a file that is not a socket is there; give a path that is free or holds an old socket",
                        path.display()
                    ),
                ))
            }
            Err(_) => {}
        }
        // owner-only whatever the umask, and connections from other users refused
        let listener = rtloop_sys::bind_private_unix(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot listen on control socket {}: {e}", path.display()),
            )
        })?;
        let done = Arc::new(AtomicBool::new(false));
        let conns: Connections = Arc::default();
        let (stop, live) = (done.clone(), conns.clone());
        let (streams, controls) = (Arc::new(streams), Arc::new(controls));
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
                let Ok(handle) = conn.try_clone() else {
                    continue;
                };
                let (streams, controls) = (streams.clone(), controls.clone());
                let t = std::thread::spawn(move || converse(conn, &streams, &controls));
                let mut live = live
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                // connections that ended are forgotten, so a long recording polled many
                // times keeps no trace of them
                live.retain(|(_, t)| !t.is_finished());
                live.push((handle, t));
            }
        });
        Ok(ControlSocket {
            path: path.to_owned(),
            done,
            thread: Some(thread),
            conns,
        })
    }

    /// Where the socket listens.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stop listening and end every open connection (its client reads the end of the
    /// stream), wait for their threads, remove the socket file.
    pub fn close(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        let Some(t) = self.thread.take() else { return };
        self.done.store(true, Ordering::Relaxed);
        // a connection wakes the accept loop, which then sees `done`
        let _ = UnixStream::connect(&self.path);
        let _ = t.join();
        let conns = std::mem::take(
            &mut *self
                .conns
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for (c, t) in conns {
            // the answering thread's read ends, and so does it
            let _ = c.shutdown(Shutdown::Both);
            let _ = t.join();
        }
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

    /// Two clients at once are both answered, and closing while they stay connected ends
    /// their connections instead of waiting for them.
    #[test]
    fn closing_ends_connections_that_stay_open() {
        let dir = rtloop_testkit::TempDir::new("control-open");
        let path = dir.path().join("ctl");
        let controls = vec![Arc::new(Control::default())];
        let sock = ControlSocket::serve(&path, vec!["a".into()], controls).unwrap();
        // a client waiting for an answer that never comes fails instead of hanging
        let client = || {
            let c = UnixStream::connect(&path).unwrap();
            c.set_read_timeout(Some(std::time::Duration::from_secs(60)))
                .unwrap();
            BufReader::new(c)
        };
        let (mut first, mut second) = (client(), client());
        assert!(ask(&mut second, "status").starts_with('{'));
        assert!(ask(&mut first, "status").starts_with('{'));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            sock.close();
            let _ = tx.send(());
        });
        // generous: closing takes microseconds, but a loaded machine may be slow to run it
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .expect("close() returned while two clients stayed connected");
        let mut rest = String::new();
        assert_eq!(
            first.read_line(&mut rest).unwrap(),
            0,
            "the client reads the end"
        );
        assert!(!path.exists());
    }

    /// A file that is not a socket at the path is refused and left as it is.
    #[test]
    fn a_file_in_the_way_is_refused_and_kept() {
        let dir = rtloop_testkit::TempDir::new("control-file");
        let path = dir.path().join("ctl");
        std::fs::write(&path, b"precious").unwrap();
        let e = ControlSocket::serve(&path, vec![], vec![]).unwrap_err();
        assert!(e.to_string().contains("not a socket"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"precious");
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
