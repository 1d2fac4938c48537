//! A stream's life as others see it: a clean close ends the stream and gives its name back
//! (readers already attached read on), a dead writer's stream is reclaimed by the next create
//! or listing, a file a crashed create left half made is removable, a stream nobody has
//! written yet is not "dead", and two processes that both replace-and-write a name never end
//! up with two writers, one of them on an unlinked file.

// std atomics here are the racers' bookkeeping in a shared file, not the protocol under test
#![allow(clippy::disallowed_types)]

mod common;

use std::fs::OpenOptions;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use common::{barrier, payload_bytes, pull_checked, CoordMap, CH};
use rtloop_stream::{
    ClaimError, CreateError, DType, OpenError, ReaderMode, Stream, StreamConfig, StreamState,
};
use rtloop_testkit::{finish, report, role, spawn_role, unique_name, StreamGuard, Watchdog};

/// The tests of this file create, list and reclaim streams, and every create or listing
/// reclaims *any* dead writer's stream: they take turns so one test's create does not
/// reclaim the dead stream another is looking at.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn cfg(keep: bool) -> StreamConfig {
    StreamConfig {
        keep,
        ..StreamConfig::new(DType::U64, CH, 1000.0, 256)
    }
}

/// Fork a child that claims the writer of `name`, writes 10 samples and `_exit`s without
/// closing (as a killed process leaves it).
fn leave_a_dead_writer(name: &str) {
    let stream = Stream::open(name).unwrap();
    // SAFETY: the child only claims the writer and writes into shared memory (no locks the
    // parent's other threads could hold are taken: the test harness threads do not touch
    // this stream), then `_exit`s without running the parent's destructors.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        let code = match stream.writer() {
            Ok(mut w) => {
                let ok = w.write_bytes(&payload_bytes(0, 10), None).is_ok();
                std::mem::forget(w);
                i32::from(!ok)
            }
            Err(_) => 2,
        };
        // SAFETY: ends the forked child at once.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: reaping the child we just forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child wrote"
    );
}

#[test]
fn a_clean_close_removes_the_name_and_attached_readers_read_on() {
    let _t = turn();
    let name = unique_name("life-close");
    let _g = StreamGuard::new(&name);
    let stream = Stream::create(&name, &cfg(false)).unwrap();
    let mut r = stream.reader(ReaderMode::Lossless).unwrap();
    let mut w = stream.writer().unwrap();
    w.write_bytes(&payload_bytes(0, 20), None).unwrap();
    assert_eq!(StreamState::of(&stream).word(), "live");
    drop(w);
    // the name is gone: a later run cannot resolve or open this run's data
    assert!(
        matches!(Stream::open(&name), Err(OpenError::NotFound { .. })),
        "an ended stream's name is removed"
    );
    assert!(!Stream::list().contains(&name));
    assert!(!stream.is_current());
    // the reader attached before the close reads everything the writer wrote
    let (first, n) = pull_checked(&mut r, 64).unwrap();
    assert_eq!((first, n), (0, 20));
    assert_eq!(StreamState::of(&stream), StreamState::Closed);
    // and nobody can write into the ended stream any more: it would reach no reader
    match stream.writer() {
        Err(ClaimError::Ended { name: n }) => assert_eq!(n, name),
        other => panic!("a writer on an ended stream: {other:?}"),
    }
    // the name is free for the next run at once
    let again = Stream::create(&name, &cfg(false)).unwrap();
    assert_eq!(again.written(), 0, "the next run starts empty");
}

/// Bytes written into a stream's counters by something other than its writer (a stray
/// process writing into `/dev/shm`) make it "damaged", with why, in its state and in the
/// listing; a damaged stream is never reported live, and its live writer's next commits do
/// not make it look whole again while the counters stay wrong.
#[test]
fn a_stream_whose_counters_were_overwritten_is_damaged_and_says_why() {
    use std::os::unix::fs::FileExt;
    let _t = turn();
    let name = unique_name("life-damage");
    let _g = StreamGuard::new(&name);
    let stream = Stream::create(&name, &cfg(false)).unwrap();
    let mut w = stream.writer().unwrap();
    w.write_bytes(&payload_bytes(0, 20), None).unwrap();
    assert_eq!(stream.damage(), None, "a stream its writer wrote is whole");
    assert_eq!(StreamState::of(&stream).word(), "live");
    // the outside write: a count near 10^18 in place of 20
    let file = OpenOptions::new()
        .write(true)
        .open(rtloop_stream::stream_path(&name))
        .unwrap();
    let at = stream.samples_written_file_offset();
    file.write_all_at(&987_654_321_987_654_321u64.to_ne_bytes(), at)
        .unwrap();
    let why = stream.damage().expect("overwritten counters are seen");
    assert!(
        why.contains("sample counters cannot be right") && why.contains("987654321987654321"),
        "{why}"
    );
    match StreamState::of(&stream) {
        StreamState::Damaged { reason } => assert_eq!(reason, why),
        other => panic!("a stream with overwritten counters is {other}"),
    }
    let (listed, _) = Stream::survey(false);
    let row = listed.iter().find(|e| e.name == name).unwrap();
    assert_eq!(row.state.word(), "damaged", "the listing agrees");
    assert!(row
        .state
        .to_string()
        .starts_with("damaged: its sample counters"));
    // the same counter put back as the writer left it: whole again
    file.write_all_at(&20u64.to_ne_bytes(), at).unwrap();
    assert_eq!(stream.damage(), None);
    drop(w);
}

#[test]
fn a_kept_stream_keeps_its_name_for_the_next_writer() {
    let _t = turn();
    let name = unique_name("life-keep");
    let _g = StreamGuard::new(&name);
    let stream = Stream::create(&name, &cfg(true)).unwrap();
    assert!(stream.info().keep);
    let mut w = stream.writer().unwrap();
    w.write_bytes(&payload_bytes(0, 5), None).unwrap();
    drop(w);
    let reopened = Stream::open(&name).expect("a kept stream outlives its writer");
    assert!(reopened.info().keep);
    assert_eq!(StreamState::of(&reopened), StreamState::Closed);
    assert_eq!(reopened.written(), 5);
    // a closed, kept stream is no "dead" stream: nothing reclaims it
    let (_, freed) = Stream::survey(true);
    assert!(freed.iter().all(|f| f.name != name), "{freed:?}");
    let mut w2 = reopened.writer().expect("the next writer takes over");
    w2.write_bytes(&payload_bytes(5, 5), None).unwrap();
    assert_eq!(reopened.written(), 10);
}

#[test]
fn a_dead_writers_stream_is_reclaimed_by_the_next_listing_and_create() {
    let _t = turn();
    for via in ["survey", "create", "collect"] {
        let name = unique_name("life-dead");
        let _g = StreamGuard::new(&name);
        let stream = Stream::create(&name, &cfg(false)).unwrap();
        let mut reader = stream.reader(ReaderMode::Latest).unwrap();
        drop(stream);
        leave_a_dead_writer(&name);
        let (list, _) = Stream::survey(false);
        let seen = list.iter().find(|e| e.name == name).expect("listed");
        assert!(
            matches!(seen.state, StreamState::Dead { .. }),
            "{:?}",
            seen.state
        );
        assert!(seen.state.to_string().contains("ended without closing"));
        if via == "create" {
            let other = unique_name("life-other");
            let _o = StreamGuard::new(&other);
            let _s = Stream::create(&other, &cfg(false)).unwrap();
        } else {
            let freed = if via == "survey" {
                Stream::survey(true).1
            } else {
                Stream::collect_ended()
            };
            let f = freed.iter().find(|f| f.name == name).unwrap_or_else(|| {
                panic!("{via}: the dead writer's stream is reclaimed: {freed:?}")
            });
            assert!(f.bytes > 0 && f.why.contains("dead"), "{f:?}");
        }
        assert!(!Stream::list().contains(&name), "{via}");
        // a reader that was attached still reads what the dead writer left
        let (first, n) = pull_checked(&mut reader, 64).unwrap();
        assert_eq!((first, n), (0, 10), "{via}");
    }
}

#[test]
fn a_kept_dead_stream_stays_until_removed_by_hand() {
    let _t = turn();
    let name = unique_name("life-keep-dead");
    let _g = StreamGuard::new(&name);
    drop(Stream::create(&name, &cfg(true)).unwrap());
    leave_a_dead_writer(&name);
    assert!(Stream::collect_ended().iter().all(|f| f.name != name));
    assert!(Stream::list().contains(&name));
    Stream::remove(&name).unwrap();
}

#[test]
fn a_half_made_file_is_removable_replaceable_and_reclaimed() {
    let _t = turn();
    // what a process killed inside `create` leaves: the file at its size, no magic yet
    for how in ["remove", "replace", "reclaim"] {
        let name = unique_name("life-half");
        let _g = StreamGuard::new(&name);
        let path = rtloop_stream::stream_path(&name);
        {
            let f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .unwrap();
            f.set_len(1 << 20).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(60))
                .unwrap();
        }
        assert!(Stream::is_half_made(&name), "{how}");
        let (list, _) = Stream::survey(false);
        let seen = list.iter().find(|e| e.name == name).expect("listed");
        assert_eq!(seen.state.word(), "damaged", "{how}");
        match how {
            "remove" => {
                Stream::remove(&name).expect("a half-made stream of this user is removable")
            }
            "replace" => {
                let s = Stream::create_replacing(&name, &cfg(false))
                    .expect("a half-made stream is replaced");
                assert_eq!(s.written(), 0);
            }
            _ => {
                let freed = Stream::collect_ended();
                let f = freed.iter().find(|f| f.name == name).expect("reclaimed");
                assert!(f.why.contains("half made"), "{f:?}");
                assert_eq!(f.bytes, 1 << 20);
            }
        }
        if how != "replace" {
            assert!(!path.exists(), "{how}");
        }
    }
    // a file that is being made right now (young, locked by its creator) is left alone
    let name = unique_name("life-young");
    let _g = StreamGuard::new(&name);
    let path = rtloop_stream::stream_path(&name);
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .unwrap();
    f.set_len(1 << 16).unwrap();
    rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(60))
        .unwrap();
    assert!(!Stream::is_half_made(&name), "a creator holds it");
    assert!(Stream::collect_ended().iter().all(|x| x.name != name));
    assert!(path.exists());
}

#[test]
fn a_stream_no_writer_has_claimed_yet_is_not_replaced_while_its_creator_lives() {
    let _t = turn();
    let name = unique_name("life-new");
    let _g = StreamGuard::new(&name);
    // made by another live process (this test's child), not written yet
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let s = Stream::create(&name, &cfg(false)).unwrap();
    // pretend the creator is the child: only the header's creator pid matters here
    drop(s);
    set_creator_pid(&name, child.id());
    assert_eq!(
        StreamState::of(&Stream::open(&name).unwrap()),
        StreamState::Waiting {
            creator_pid: child.id()
        }
    );
    match Stream::create_replacing(&name, &cfg(false)) {
        Err(e @ CreateError::NotYetWritten { .. }) => {
            assert!(
                e.to_string().contains("has not claimed its writer yet"),
                "{e}"
            );
        }
        other => panic!("a new stream was replaced under its creator: {other:?}"),
    }
    // once its creator is gone, nobody will write it: it is replaceable
    child.kill().unwrap();
    child.wait().unwrap();
    let s = Stream::create_replacing(&name, &cfg(false)).expect("replaced");
    assert_eq!(s.info().creator_pid, std::process::id());
}

/// Rewrite the creator pid in the header of `name` (a test-only way to say who made it).
fn set_creator_pid(name: &str, pid: u32) {
    use std::os::unix::fs::FileExt;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(rtloop_stream::stream_path(name))
        .unwrap();
    // offset of Header::creator_pid: after name (144 + NAME_MAX bytes)
    let off = 144 + rtloop_stream::NAME_MAX as u64;
    let mut old = [0u8; 4];
    f.read_exact_at(&mut old, off).unwrap();
    assert_eq!(
        u32::from_ne_bytes(old),
        std::process::id(),
        "creator pid offset"
    );
    f.write_all_at(&pid.to_ne_bytes(), off).unwrap();
}

// ---- two processes replace-and-write the same name, round after round ----

fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| panic!("child role needs {key}"))
}

/// A racer: each round, `create(replace)` then `writer()`, as docs/getting-started.md does.
fn replace_racer(me: u64) {
    let _dog = Watchdog::arm(600, "replace racer");
    let name = env("STREAM");
    let coord = CoordMap::open(&env("COORD"));
    let c = coord.get();
    let rounds: u64 = env("ROUNDS").parse().expect("ROUNDS");
    let (mut doubles, mut orphans, mut wins) = (0u64, 0u64, 0u64);
    let mut k = 0;
    for _ in 0..rounds {
        k += 1;
        barrier(c, k);
        let w = Stream::create_replacing(&name, &cfg(false))
            .ok()
            .and_then(|s| s.writer().ok());
        if let Some(w) = &w {
            wins += 1;
            if c.owners.fetch_add(1, Ordering::AcqRel) == 1 {
                doubles += 1;
            }
            if !w.stream().is_current() {
                orphans += 1; // writing to an unlinked file: nobody would ever read it
            }
        }
        k += 1;
        barrier(c, k);
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
    report("orphans", orphans);
    report("wins", wins);
}

#[test]
fn racing_replace_and_write_never_leaves_a_writer_on_an_unlinked_stream() {
    if let Some(r) = role() {
        assert_eq!(r, "replacer");
        replace_racer(env("RACER").parse().unwrap());
        return;
    }
    let _t = turn();
    let rounds = std::env::var("RTLOOP_REPLACE_ROUNDS").unwrap_or_else(|_| {
        if std::env::var("RTLOOP_SOAK").is_ok_and(|v| v == "1") {
            "20000"
        } else {
            "1000"
        }
        .to_owned()
    });
    let name = unique_name("life-race");
    let _g = StreamGuard::new(&name);
    let coord = format!("/dev/shm/rtloop-test-coord-{name}");
    struct Rm(String);
    impl Drop for Rm {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _c = Rm(coord.clone());
    let spawn = |me: &str| {
        spawn_role(
            "racing_replace_and_write_never_leaves_a_writer_on_an_unlinked_stream",
            "replacer",
            &[
                ("STREAM", &name),
                ("COORD", &coord),
                ("ROUNDS", &rounds),
                ("RACER", me),
            ],
        )
    };
    let (a, b) = (spawn("0"), spawn("1"));
    let (ra, rb) = (finish(a, "racer 0"), finish(b, "racer 1"));
    let get = |r: &rtloop_testkit::Reports, k: &str| r.get(k).parse::<u64>().unwrap();
    let doubles = get(&ra, "doubles") + get(&rb, "doubles");
    let orphans = get(&ra, "orphans") + get(&rb, "orphans");
    let wins = get(&ra, "wins") + get(&rb, "wins");
    eprintln!("{doubles} rounds with two writers, {orphans} writers on an unlinked stream, {wins} wins in {rounds} rounds");
    assert_eq!(doubles, 0, "{doubles} of {rounds} rounds had two writers");
    assert_eq!(orphans, 0, "{orphans} writers wrote to an unlinked stream");
    assert!(wins > 0, "some round had a writer");
}
