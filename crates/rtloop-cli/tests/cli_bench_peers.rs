//! `rtloop bench peers` as a user runs it: writer and readers as real processes on the
//! transports every machine has (the Python tests add LSL and ZeroMQ), the report and its
//! files, and every bad setting refused before anything starts.

mod common;
use common::rtloop_with;

/// `--wait auto`: a reader with a CPU of its own spins, more readers than that block.
fn wait_for(readers: u64) -> &'static str {
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    if readers < cpus {
        "spin"
    } else {
        "block"
    }
}

#[test]
fn peers_run_end_to_end_with_a_row_per_transport_and_configuration() {
    let out = std::env::temp_dir().join(format!("cli-peers-{}", std::process::id()));
    let dir = out.to_str().unwrap();
    let o = rtloop_with(
        &[
            "--json",
            "bench",
            "peers",
            "--transports",
            "stream,unix,iceoryx2",
            "--chunks",
            "1,16",
            "--readers",
            "1,2",
            "--rounds",
            "2",
            "--quick",
            "--out",
            dir,
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3 * 2 * 2, "transports x chunks x readers");
    for r in rows {
        assert_eq!(r["lost"], 0, "{r}");
        assert_eq!(r["errors"], 0, "{r}");
        assert_eq!(r["unfinished"], 0, "{r}");
        assert!(r["mb_per_s"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["rounds_mb_per_s"].as_array().unwrap().len(), 2, "{r}");
        let lat = &r["latency"];
        assert!(lat["count"].as_u64().unwrap() >= 50, "{r}");
        assert!(lat["p50_ns"].as_u64() <= lat["p99_ns"].as_u64(), "{r}");
        assert_eq!(r["wait"], wait_for(r["readers"].as_u64().unwrap()), "{r}");
    }
    // no LSL measured: no ratio claimed; the latency verdict compares like with like
    assert!(v["verdict"]["min_throughput_x_lsl"].is_null());
    assert_eq!(v["verdict"]["latency_p99"].as_array().unwrap().len(), 4);
    assert!(v["machine"].as_str().unwrap().contains("Linux"));
    let mut files = vec!["results.json".to_string(), "table.md".to_string()];
    for n in [1, 2] {
        for what in ["throughput", "latency-p99"] {
            files.push(format!("{what}-{n}-readers-{}.png", wait_for(n)));
        }
    }
    for f in files {
        assert!(out.join(&f).exists(), "{f}");
    }
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(
        table.contains("| 16 | 2 |") && table.contains("iceoryx2"),
        "{table}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_settings_are_refused_before_anything_starts() {
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["--transports", "zeromq"],
            2,
            "unknown transport \"zeromq\"; allowed: stream, lsl, zmq-ipc, zmq-tcp, unix, iceoryx2",
        ),
        (
            &["--chunks", "0"],
            1,
            "chunk 0 out of range: allowed 1..=65536",
        ),
        (
            &["--readers", "1,17"],
            1,
            "readers 17 out of range: allowed 1..=16",
        ),
        (
            &["--channels", "4"],
            1,
            "channels 4 out of range: allowed 12..=65536",
        ),
        (&["--rate=-5"], 1, "rate -5 out of range"),
        (&["--rounds", "0"], 2, "0 is not in 1..=20"),
        (
            &["--wait", "sometimes"],
            2,
            "possible values: auto, block, spin",
        ),
        (
            &["--min-chunks", "2000000"],
            1,
            "min_chunks = 2000000: allowed 0 to 1000000",
        ),
    ];
    for (args, code, want) in cases {
        let mut a = vec!["bench", "peers"];
        a.extend_from_slice(args);
        let o = rtloop_with(&a, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(*code), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?} printed a report");
    }
}

#[test]
fn a_named_transport_whose_library_is_missing_is_an_error_saying_how_to_get_it() {
    let system = [
        "/usr/lib/x86_64-linux-gnu/libzmq.so.5",
        "/usr/lib/libzmq.so.5",
    ];
    if system.iter().any(|p| std::path::Path::new(p).exists()) {
        eprintln!("this machine has a system libzmq: nothing is missing");
        return;
    }
    let o = rtloop_with(
        &[
            "bench",
            "peers",
            "--transports",
            "stream,zmq-ipc",
            "--quick",
        ],
        &[
            ("RTLOOP_PYTHON", "false"),
            ("RTLOOP_LIBZMQ", "/nonexistent/libzmq.so"),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("zmq is not available here: libzmq not found: install pyzmq"),
        "{err}"
    );
    assert!(
        err.contains("/nonexistent/libzmq.so"),
        "the paths tried are listed: {err}"
    );
    // unnamed (the default set), a missing library is reported and the rest is measured
    let o = rtloop_with(
        &[
            "--json",
            "bench",
            "peers",
            "--chunks",
            "16",
            "--readers",
            "1",
            "--rounds",
            "1",
            "--quick",
        ],
        &[
            ("RTLOOP_PYTHON", "false"),
            ("RTLOOP_LIBZMQ", "/nonexistent/libzmq.so"),
            ("RTLOOP_LIBLSL", "/nonexistent/liblsl.so"),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let peers = v["transports"].as_array().unwrap();
    let missing: Vec<&str> = peers
        .iter()
        .filter(|p| p["library"].is_null())
        .map(|p| p["transport"].as_str().unwrap())
        .collect();
    assert!(
        missing.contains(&"zmq-ipc") && missing.contains(&"zmq-tcp"),
        "{v}"
    );
    assert_eq!(
        v["rows"].as_array().unwrap().len(),
        peers.len() - missing.len()
    );
}
