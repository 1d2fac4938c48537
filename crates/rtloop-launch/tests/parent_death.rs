//! A child started through rtloop-launch ends when the process that started it is killed
//! with SIGKILL (which it cannot catch to clean up): a killed `rtloop lab` or `rtloop bench`
//! leaves none of its peers or devices running.
//!
//! The test runs this test binary again as the parent (`PARENT_ROLE` set): it starts a
//! child through `rtloop_command` (with `RTLOOP_EXE` pointing at `sleep`, so the child is a
//! real process that would run for ten minutes), prints the child's pid and waits. The test
//! kills that parent with SIGKILL and watches /proc until the child is gone.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PARENT_ROLE: &str = "RTLOOP_LAUNCH_TEST_PARENT";

/// Whether `pid` runs (exists and is not a zombie waiting for its reaper).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let after = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
            !after.starts_with('Z')
        }
        Err(_) => false,
    }
}

fn be_the_parent() -> ! {
    let sleep = ["/bin/sleep", "/usr/bin/sleep"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("a sleep executable");
    std::env::set_var("RTLOOP_EXE", sleep);
    let mut child = rtloop_launch::rtloop_command()
        .arg("600")
        .stdin(Stdio::null())
        .spawn()
        .expect("start the child");
    // the harness prints its test's name on the same line, without a newline
    println!("child-pid {}", child.id());
    // the test kills this process while it waits here
    let _ = child.wait();
    std::process::exit(0)
}

#[test]
fn a_child_ends_when_its_parent_is_killed() {
    if std::env::var_os(PARENT_ROLE).is_some() {
        be_the_parent();
    }
    let mut parent = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_child_ends_when_its_parent_is_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PARENT_ROLE, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(parent.stdout.take().unwrap());
    // the harness prints its own lines ("running 1 test") around the parent's
    let mut line = String::new();
    let child: u32 = loop {
        line.clear();
        assert_ne!(
            out.read_line(&mut line).unwrap(),
            0,
            "the parent ended early"
        );
        if let Some((_, pid)) = line.trim().split_once("child-pid ") {
            break pid.parse().unwrap();
        }
    };
    assert!(running(child), "the child did not start");
    parent.kill().unwrap(); // SIGKILL
    parent.wait().unwrap();
    // generous: the kernel sends the signal at once; a loaded machine may delay the exit
    let deadline = Instant::now() + Duration::from_secs(30);
    while running(child) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = running(child);
    if left {
        // clean up what the test made before failing
        let _ = Command::new("kill")
            .args(["-9", &child.to_string()])
            .status();
    }
    assert!(!left, "the child {child} outlived its killed parent");
}
