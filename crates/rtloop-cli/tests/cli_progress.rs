//! Long work shows progress on stderr also when its output is piped (a plain line every
//! `RTLOOP_PROGRESS_SECONDS`), keeps `--json` stdout clean, and writes no escape codes into
//! redirected output. Here stdout and stderr are pipes, as in CI or `| tee`.

mod common;
use std::process::Output;

use rtloop_testkit::{unique_name, StreamGuard, TempDir};

fn rtloop(args: &[&str], every: &str) -> Output {
    common::rtloop_with(args, &[("RTLOOP_PROGRESS_SECONDS", every)])
}

fn progress_lines(o: &Output, label: &str) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.starts_with(&format!("{label} [")))
        .map(str::to_owned)
        .collect()
}

fn no_escape_codes(o: &Output) {
    assert!(!o.stdout.contains(&0x1b), "escape code in piped stdout");
    assert!(!o.stderr.contains(&0x1b), "escape code in piped stderr");
    assert!(
        !o.stderr.contains(&b'\r'),
        "carriage return in piped stderr"
    );
}

#[test]
fn record_prints_progress_lines_when_piped_and_json_stays_on_stdout() {
    let name = unique_name("progress-rec");
    let _guard = StreamGuard::new(&name);
    let dir = TempDir::new("progress-rec");
    let created = rtloop(
        &[
            "stream",
            "create",
            &name,
            "--channels",
            "2",
            "--dtype",
            "float32",
        ],
        "5",
    );
    assert!(created.status.success(), "{created:?}");
    let out = dir.path().join("out");
    let o = rtloop(
        &[
            "--json",
            "record",
            &name,
            "--out",
            out.to_str().unwrap(),
            "--seconds",
            "1.2",
        ],
        "0.2",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // 1.2 s at one line per 0.2 s: several lines, each naming the stream and its counts
    let lines = progress_lines(&o, "record");
    assert!(lines.len() >= 3, "progress lines: {lines:?}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains(&format!("{name}: 0 samples, lost 0, lost events 0"))),
        "{lines:?}"
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON only");
    assert_eq!(report[0]["ended"], "stopped");
    no_escape_codes(&o);
}

#[test]
fn verify_prints_progress_lines_when_piped() {
    // one line per loop turn (every 100 ms): a run of 20,000 checked packets takes several
    let o = rtloop(&["--json", "verify", "--packets", "20000"], "0.001");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = progress_lines(&o, "verify");
    assert!(
        !lines.is_empty(),
        "no progress: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        lines.iter().all(|l| l.contains("/20,000 packets (")),
        "{lines:?}"
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON only");
    assert_eq!(report["ok"], 20000);
    no_escape_codes(&o);
}

#[test]
fn progress_can_be_turned_off_and_a_bad_interval_is_named() {
    let o = rtloop(&["--json", "verify", "--packets", "2000"], "0");
    assert!(o.status.success());
    assert!(progress_lines(&o, "verify").is_empty());
    let o = rtloop(&["--json", "verify", "--packets", "2000"], "soon");
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("RTLOOP_PROGRESS_SECONDS=\"soon\" is not a number of seconds >= 0; using 5"),
        "{err}"
    );
}
