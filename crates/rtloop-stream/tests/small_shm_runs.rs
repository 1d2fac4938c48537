//! Runs after runs on a 64 MiB shared-memory mount (a container's default): ended streams
//! give their memory back, so twenty runs of a 24 MiB stream fit where three would not if
//! ended streams stayed — whether each run closes its writer or is killed. (Its own test
//! binary: the mount is pointed at through a process-wide variable.)

mod common;

use common::{payload_bytes, CH};
use rtloop_stream::{DType, Stream, StreamConfig};
use rtloop_testkit::{unique_name, SmallShm};

const RUNS: usize = 20;

/// Fork a child that makes `name` (24 MiB), writes, and then closes or `_exit`s holding the
/// writer (as a killed run does). Returns whether the child made and wrote the stream.
fn a_run(name: &str, close: bool) -> bool {
    // SAFETY: the child creates and writes a stream (files, mmap, atomics) and `_exit`s
    // without running the parent's destructors; the test harness's other threads hold no
    // lock the child needs (the only test of this binary runs alone).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        let cfg = StreamConfig::new(DType::U64, CH, 1000.0, 786_432);
        let code = match Stream::create(name, &cfg).map(|s| s.writer()) {
            Ok(Ok(mut w)) => {
                let ok = w.write_bytes(&payload_bytes(0, 1000), None).is_ok();
                if close {
                    drop(w);
                } else {
                    std::mem::forget(w);
                }
                i32::from(!ok)
            }
            _ => 1,
        };
        // SAFETY: ends the forked child at once.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: reaping the child we just forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

#[test]
fn twenty_runs_fit_a_64_mib_mount_whether_they_close_or_are_killed() {
    let Some(shm) = SmallShm::mount(64) else {
        return;
    };
    for close in [true, false] {
        for k in 0..RUNS {
            // a new name each run, as a lab's scripts with a run number in the name do
            let name = unique_name(&format!("run-{k}"));
            assert!(
                a_run(&name, close),
                "run {k} (close: {close}) could not make its 24 MiB stream: ended streams kept \
                 the mount full"
            );
        }
        let used: u64 = std::fs::read_dir(shm.path())
            .unwrap()
            .flatten()
            .map(|e| e.metadata().map_or(0, |m| m.len()))
            .sum();
        assert!(
            used <= 32 << 20,
            "close {close}: {used} bytes left in the mount after {RUNS} runs"
        );
    }
    // what the killed runs left goes with the next listing
    let (_, freed) = Stream::survey(true);
    assert!(freed.len() <= 1, "{freed:?}");
    assert!(Stream::list().is_empty(), "{:?}", Stream::list());
}
