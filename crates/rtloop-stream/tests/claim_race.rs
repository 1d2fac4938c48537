//! Two processes race for a stream's writer, round after round, and count the rounds in
//! which both won (a double owner) — after a clean close, and after the holder died without
//! closing. The claim is one compare-and-swap of one word naming the holder, so the count
//! must be 0.
//!
//! The racers are this test executable re-run as children (see rtloop-testkit); they meet at
//! a barrier in a small shared file before every claim, so both claims land in the same
//! microseconds. Rounds: `RTLOOP_CLAIM_ROUNDS` (default 100 000 after a clean close, 5 000
//! after a death, each of which forks a holder that exits); `RTLOOP_SOAK=1` runs 10^6 / 10^5.

// std atomics here are the racers' bookkeeping in the shared file, not the protocol under test
#![allow(clippy::disallowed_types)]

mod common;

use common::{barrier, CoordMap};

use std::sync::atomic::Ordering;

use rtloop_stream::Stream;
use rtloop_testkit::{finish, report, role, spawn_role, unique_name, StreamGuard, Watchdog};

fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| panic!("child role needs {key}"))
}

/// A child that claims the writer and exits without closing it (as if killed).
fn leave_a_dead_holder(stream: &Stream) {
    // SAFETY: fork in a single-threaded child role process; the child only claims the
    // writer (a CAS in shared memory, /proc reads) and then `_exit`s without unwinding.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        let w = stream.writer();
        std::mem::forget(w);
        // SAFETY: ends the forked child at once, running no destructors of the parent's state.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: reaping the child we just forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

/// A racer: `ROUNDS` rounds of barrier → claim → barrier → count → close.
fn race(me: u64) {
    let _dog = Watchdog::arm(900, "claim racer");
    let stream = Stream::open(&env("STREAM")).expect("racer opens the stream");
    let coord = CoordMap::open(&env("COORD"));
    let c = coord.get();
    let rounds: u64 = env("ROUNDS").parse().expect("ROUNDS");
    let after_death = env("VARIANT") == "dead";
    let (mut doubles, mut none, mut wins) = (0u64, 0u64, 0u64);
    let mut k = 0;
    for _ in 0..rounds {
        if after_death && me == 0 {
            leave_a_dead_holder(&stream);
        }
        k += 1;
        barrier(c, k);
        let w = stream.writer().ok();
        if w.is_some() {
            wins += 1;
            if c.owners.fetch_add(1, Ordering::AcqRel) == 1 {
                doubles += 1; // the second live owner of this round
            }
        }
        k += 1;
        barrier(c, k);
        if me == 0 && c.owners.load(Ordering::Acquire) == 0 {
            none += 1;
        }
        drop(w);
        k += 1;
        barrier(c, k);
        if me == 0 {
            c.owners.store(0, Ordering::Release);
        }
        k += 1;
        barrier(c, k);
    }
    report("doubles", doubles);
    report("none", none);
    report("wins", wins);
}

fn rounds(default: u64, soak: u64) -> String {
    std::env::var("RTLOOP_CLAIM_ROUNDS").unwrap_or_else(|_| {
        if std::env::var("RTLOOP_SOAK").is_ok_and(|v| v == "1") {
            soak
        } else {
            default
        }
        .to_string()
    })
}

fn run(test_name: &str, variant: &str, rounds: &str) {
    let name = unique_name("claim-race");
    // kept: the racers hand the one stream back and forth (a clean close would end it)
    let stream = Stream::create(
        &name,
        &rtloop_stream::StreamConfig {
            keep: true,
            ..rtloop_stream::StreamConfig::new(rtloop_stream::DType::U64, common::CH, 1000.0, 64)
        },
    )
    .unwrap();
    let _g = StreamGuard::new(&name);
    let coord = format!("/dev/shm/rtloop-test-coord-{name}");
    let _c = RemoveOnDrop(coord.clone());
    drop(stream);
    let envs = |me: &'static str| {
        vec![
            ("STREAM", name.clone()),
            ("COORD", coord.clone()),
            ("ROUNDS", rounds.to_owned()),
            ("VARIANT", variant.to_owned()),
            ("RACER", me.to_owned()),
        ]
    };
    let spawn = |me: &'static str| {
        let e = envs(me);
        let e: Vec<(&str, &str)> = e.iter().map(|(k, v)| (*k, v.as_str())).collect();
        spawn_role(test_name, "racer", &e)
    };
    let (a, b) = (spawn("0"), spawn("1"));
    let (ra, rb) = (finish(a, "racer 0"), finish(b, "racer 1"));
    let get = |r: &rtloop_testkit::Reports, k: &str| r.get(k).parse::<u64>().unwrap();
    let doubles = get(&ra, "doubles") + get(&rb, "doubles");
    let wins = get(&ra, "wins") + get(&rb, "wins");
    let none = get(&ra, "none");
    eprintln!(
        "{variant}: {doubles} double owners, {none} rounds without owner, {wins} wins in {rounds} rounds"
    );
    assert_eq!(
        doubles, 0,
        "{doubles} rounds of {rounds} had two live writers"
    );
    assert_eq!(none, 0, "{none} rounds of {rounds} had no writer at all");
}

struct RemoveOnDrop(String);
impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn play() -> bool {
    match role().as_deref() {
        Some("racer") => {
            race(env("RACER").parse().expect("RACER"));
            true
        }
        Some(other) => panic!("unknown role {other}"),
        None => false,
    }
}

#[test]
fn racing_claims_after_a_clean_close_never_make_two_writers() {
    if play() {
        return;
    }
    run(
        "racing_claims_after_a_clean_close_never_make_two_writers",
        "clean",
        &rounds(100_000, 1_000_000),
    );
}

#[test]
fn racing_claims_after_the_holder_died_never_make_two_writers() {
    if play() {
        return;
    }
    run(
        "racing_claims_after_the_holder_died_never_make_two_writers",
        "dead",
        &rounds(5_000, 100_000),
    );
}
