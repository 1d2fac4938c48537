//! A socket read that polls before it sleeps: the FieldTrip client and the socket channels
//! of rtloop-transport read with it.

use std::io::{self, Read};

/// A socket read that first polls without blocking for up to `spin` before it sleeps.
///
/// On a virtual machine a blocked reader's wake-up costs about 40 µs (the vCPU halts), which
/// is most of a loopback round trip; polling for a few tens of µs keeps a ping-pong of
/// requests and replies on running CPUs. It costs a CPU while it polls, so it is off by
/// default (a FieldTrip client's `spin`, a socket channel's).
#[derive(Debug)]
pub struct SpinRead<'a, S> {
    sock: &'a mut S,
    spin: std::time::Duration,
}

impl<'a, S> SpinRead<'a, S> {
    /// Wrap `sock`; a zero `spin` reads as the socket does.
    pub fn new(sock: &'a mut S, spin: std::time::Duration) -> Self {
        SpinRead { sock, spin }
    }

    /// The socket.
    pub fn inner(&mut self) -> &mut S {
        self.sock
    }
}

impl<S: Read + std::os::fd::AsFd> Read for SpinRead<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.spin.is_zero() && !buf.is_empty() {
            let started = std::time::Instant::now();
            'spin: loop {
                for _ in 0..32 {
                    match rustix::net::recv(
                        &*self.sock,
                        &mut *buf,
                        rustix::net::RecvFlags::DONTWAIT,
                    ) {
                        Ok((n, _)) => return Ok(n),
                        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {
                            core::hint::spin_loop();
                        }
                        // let the blocking read report it
                        Err(_) => break 'spin,
                    }
                }
                if started.elapsed() >= self.spin {
                    break;
                }
            }
        }
        self.sock.read(buf)
    }
}
