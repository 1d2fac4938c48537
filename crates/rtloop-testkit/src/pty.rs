//! Pseudo-terminal pairs for tests of serial output: a sink opens the follower's path like
//! a serial device; the test reads the leader. To know where the bytes written so far end,
//! [`Pty::take`] writes a marker byte through the test's own follower fd and reads up to it
//! (a tty keeps the order of what is written to it).

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};
use rustix::pty::OpenptFlags;

/// How long [`Pty::take`] waits for its mark before failing (never reached normally).
const PATIENCE: Duration = Duration::from_secs(20);

/// Written by [`Pty::take`] after what it collects: tests never send this byte themselves.
pub const MARK: u8 = 0xEE;

/// A pseudo-terminal pair. The test keeps a follower fd of its own open, so the pty and what
/// was written to it outlive the sink's fd, and writes its marks through it.
pub struct Pty {
    /// The leader side, which the test reads (non-blocking).
    pub leader: OwnedFd,
    /// The test's own follower fd (non-blocking).
    pub follower: OwnedFd,
    /// The follower's path, which the sink opens.
    pub path: String,
}

impl Pty {
    /// A new pair; panics if the system has no pseudo-terminals.
    #[must_use]
    pub fn open() -> Pty {
        let leader =
            rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)
                .expect("a pseudo-terminal");
        rustix::pty::grantpt(&leader).expect("grantpt");
        rustix::pty::unlockpt(&leader).expect("unlockpt");
        let path = rustix::pty::ptsname(&leader, Vec::new())
            .expect("ptsname")
            .into_string()
            .expect("a UTF-8 pty path");
        let follower = rustix::fs::open(
            path.as_str(),
            OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .expect("the pty's follower");
        // the test never blocks on the pty: it reads with a deadline
        rustix::fs::fcntl_setfl(&leader, OFlags::NONBLOCK | OFlags::RDWR).expect("fcntl");
        rustix::fs::fcntl_setfl(&follower, OFlags::NONBLOCK | OFlags::RDWR).expect("fcntl");
        Pty {
            leader,
            follower,
            path,
        }
    }

    /// Everything written to the follower since the last call: writes a mark and reads the
    /// leader up to it. Both fds are non-blocking: when a sink filled the pty, the mark goes
    /// in once reading made room.
    #[must_use]
    pub fn take(&self) -> Vec<u8> {
        let start = Instant::now();
        let (mut marked, mut got) = (false, Vec::new());
        let mut buf = [0u8; 4096];
        loop {
            if !marked {
                match rustix::io::write(&self.follower, &[MARK]) {
                    Ok(n) => marked = n == 1,
                    Err(rustix::io::Errno::AGAIN) => {}
                    Err(e) => panic!("writing the mark: {e}"),
                }
            }
            match rustix::io::read(&self.leader, &mut buf) {
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    if got.last() == Some(&MARK) {
                        got.pop();
                        assert!(!got.contains(&MARK), "one mark per call: {got:?}");
                        return got;
                    }
                }
                Err(rustix::io::Errno::AGAIN) => {
                    assert!(
                        start.elapsed() < PATIENCE,
                        "the mark did not come through the pty; got {} bytes",
                        got.len()
                    );
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("reading the pty leader: {e}"),
            }
        }
    }
}
