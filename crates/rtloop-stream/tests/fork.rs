//! Handles belong to the process that made them. A child forked from a process holding the
//! writer and a lossless reader gets copies of both handles: using them is refused with a
//! clear error, and dropping them (the child exiting) releases nothing of the parent's.

mod common;

use common::{create, payload_bytes, pull_checked};
use rtloop_stream::{Liveness, ReadError, ReaderMode, Stream, WriteError};
use rtloop_testkit::{unique_name, StreamGuard};

/// Run `child` in a forked child process and return its exit code.
fn in_forked_child(child: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child runs only `child` (stream calls: atomics in shared memory, small
    // allocations, which glibc keeps usable after fork) and `_exit`s without unwinding.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(99);
        // SAFETY: ends the child at once; the parent's state is not the child's to tear down.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: reaping the child we forked.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child ended by a signal");
    libc::WEXITSTATUS(status)
}

#[test]
fn a_forked_child_can_neither_use_nor_release_the_parents_writer_and_reader() {
    let name = unique_name("fork");
    let stream = create(&name, 64);
    let _g = StreamGuard::new(&name);
    let mut w = stream.writer().unwrap();
    let mut r = stream.reader(ReaderMode::Lossless).unwrap();
    w.write_bytes(&payload_bytes(0, 10), None).unwrap();

    let code = in_forked_child(|| {
        // SAFETY: this runs in the forked child, whose memory is a copy of the parent's:
        // taking the handles out by value makes the child's copies owned values (dropped
        // below, as a child that exits normally would); the child then `_exit`s, so the
        // originals are never dropped twice, and the parent's own memory is untouched.
        let (mut w, mut r) = unsafe { (std::ptr::read(&w), std::ptr::read(&r)) };
        // every use of the parent's handles is refused, saying why
        let e = w.write_bytes(&payload_bytes(10, 1), None).unwrap_err();
        if !matches!(e, WriteError::ForkedCopy { .. }) || !e.to_string().contains("fork") {
            return 1;
        }
        if !matches!(w.reserve(1), Err(WriteError::ForkedCopy { .. })) {
            return 2;
        }
        let mut buf = vec![0u8; 64 * 32];
        if !matches!(
            r.pull_into(&mut buf, None, 8),
            Err(ReadError::ForkedCopy { .. })
        ) {
            return 3;
        }
        // the child may not take the writer either: the parent still holds it
        if Stream::open(&name).unwrap().writer().is_ok() {
            return 4;
        }
        drop((w, r)); // the child's copies go away: nothing of the parent's is released
        0
    });
    assert_eq!(code, 0, "child check {code} failed");

    // the parent still holds the writer and the lossless reader
    assert!(matches!(
        stream.writer_liveness(),
        Liveness::Active { pid, .. } if pid == std::process::id()
    ));
    assert!(Stream::open(stream.name()).unwrap().writer().is_err());
    let stats = stream.stats();
    assert_eq!(
        stats.readers.len(),
        1,
        "the lossless reader is still registered"
    );
    // the parent goes on: writes, and the lossless reader gets every sample intact
    let mut got = 0u64;
    for k in 1..=20 {
        w.write_bytes(&payload_bytes(k * 10, 10), None).unwrap();
        while got < (k + 1) * 10 {
            let (first, n) = pull_checked(&mut r, 32).unwrap();
            assert_eq!(first, got, "no sample skipped or overwritten");
            got += n as u64;
        }
    }
}
