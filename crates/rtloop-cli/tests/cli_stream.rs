//! The real `rtloop` binary: stream commands, sys-info and the demo, including every bad
//! input's exit code and message.

mod common;
use common::{rtloop, text};

fn unique(tag: &str) -> String {
    format!("cli-{tag}-{}", std::process::id())
}

#[test]
fn stream_create_list_info_remove_round_trip() {
    let name = unique("rt");
    let o = rtloop(&[
        "stream",
        "create",
        &name,
        "--dtype",
        "int16",
        "--channels",
        "3",
        "--rate",
        "500",
        "--capacity",
        "2048",
        "--ch-names",
        "Fz,Cz,Pz",
        "--units",
        "uV,uV,uV",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = rtloop(&["--json", "stream", "list"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let me = v
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name.as_str())
        .expect("listed");
    assert_eq!(me["dtype"], "int16");
    assert_eq!(me["n_channels"], 3);
    assert_eq!(me["capacity"], 2048);
    assert_eq!(me["stats"]["percent_used"], 0.0);
    let o = rtloop(&["stream", "info", &name]);
    let t = text(&o);
    assert!(
        o.status.success() && t.contains("Cz") && t.contains("500 Hz"),
        "{t}"
    );
    let o = rtloop(&[
        "stream",
        "monitor",
        &name,
        "--seconds",
        "0.2",
        "--interval-ms",
        "100",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        !lines.is_empty()
            && lines
                .iter()
                .all(|l| l["name"] == name.as_str() && l["percent_used"] == 0.0)
    );
    let o = rtloop(&["stream", "remove", &name]);
    assert!(o.status.success(), "{}", text(&o));
    let o = rtloop(&["stream", "info", &name]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("no stream named"), "{}", text(&o));
}

#[test]
fn bad_inputs_get_a_clear_error_and_nothing_is_created() {
    let name = unique("bad");
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &[
                "stream",
                "create",
                &name,
                "--channels",
                "0",
                "--capacity",
                "10",
            ],
            1,
            "at least 1 channel",
        ),
        (
            &[
                "stream",
                "create",
                &name,
                "--channels",
                "2",
                "--capacity",
                "0",
            ],
            1,
            "capacity must be at least 1",
        ),
        (
            &[
                "stream",
                "create",
                "a/b",
                "--channels",
                "2",
                "--capacity",
                "10",
            ],
            1,
            "contains '/'",
        ),
        (
            &[
                "stream",
                "create",
                "",
                "--channels",
                "2",
                "--capacity",
                "10",
            ],
            1,
            "it is empty",
        ),
        (
            &[
                "stream",
                "create",
                &"n".repeat(65),
                "--channels",
                "2",
                "--capacity",
                "10",
            ],
            1,
            "too long",
        ),
        (
            &[
                "stream",
                "create",
                &name,
                "--dtype",
                "complex64",
                "--channels",
                "2",
                "--capacity",
                "10",
            ],
            2,
            "allowed: int8",
        ),
        (
            &[
                "stream",
                "create",
                &name,
                "--channels",
                "2",
                "--capacity",
                "10",
                "--ch-names",
                "a",
            ],
            1,
            "1 channel names given for 2 channels",
        ),
        (
            &[
                "stream",
                "create",
                &name,
                "--channels",
                "2",
                "--capacity",
                "10",
                "--rate=-5",
            ],
            1,
            "nominal rate must be",
        ),
        (
            &[
                "stream",
                "create",
                &name,
                "--channels",
                "1",
                "--capacity",
                "100000000000000",
            ],
            1,
            "shared memory",
        ),
        (
            &["stream", "monitor", &name, "--interval-ms", "0"],
            2,
            "interval-ms",
        ),
        (&["demo", "--seconds", "0"], 2, "expected a number > 0"),
        (&["demo", "--channels", "0"], 2, "channels"),
        (&["no-such-command"], 2, "unrecognized subcommand"),
    ];
    for (args, code, words) in cases {
        let o = rtloop(args);
        assert_eq!(o.status.code(), Some(*code), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains(words),
            "{args:?}: expected {words:?} in {}",
            text(&o)
        );
    }
    assert!(
        !rtloop_stream::Stream::list().contains(&name),
        "a refused create left a stream behind"
    );
}

#[test]
fn existing_stream_is_kept_when_create_is_refused() {
    let name = unique("keep");
    assert!(rtloop(&[
        "stream",
        "create",
        &name,
        "--channels",
        "2",
        "--capacity",
        "4096"
    ])
    .status
    .success());
    let s = rtloop_stream::Stream::open(&name).unwrap();
    // the writer stays open: a clean close would end the stream and free its name
    let mut w = s.writer().unwrap();
    w.write(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let o = rtloop(&[
        "stream",
        "create",
        &name,
        "--channels",
        "2",
        "--capacity",
        "10",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("already exists"), "{}", text(&o));
    let r = s.reader(rtloop_stream::ReaderMode::Latest).unwrap();
    assert_eq!(
        r.window_as::<f32>(0, 2).unwrap().to_vec().unwrap(),
        &[1.0, 2.0, 3.0, 4.0],
        "stored data intact"
    );
    drop(w);
    assert!(
        !rtloop_stream::Stream::list().contains(&name),
        "the writer's close ended it"
    );
}

#[test]
fn sys_info_reports_the_machine_as_json() {
    let o = rtloop(&["sys-info", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["cpus"].as_u64().unwrap() >= 1);
    assert_eq!(v["page_size"], 4096);
    assert!(v["permissions"].is_object());
}

#[test]
fn demo_streams_every_sample_intact_and_removes_its_stream() {
    let o = rtloop(&["demo", "--seconds", "1", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["errors"], 0);
    assert_eq!(v["samples_written"], 30_000);
    assert_eq!(
        v["samples_read"].as_u64().unwrap() + v["samples_lost"].as_u64().unwrap(),
        30_000
    );
    assert!(v["latency"]["count"].as_u64().unwrap() > 0);
    let stream = v["stream"].as_str().unwrap().to_owned();
    assert!(
        !rtloop_stream::Stream::list().contains(&stream),
        "demo stream removed"
    );
}

#[test]
fn help_describes_every_command() {
    let o = rtloop(&["--help"]);
    let t = text(&o);
    for cmd in ["demo", "stream", "verify", "bench", "sys-info"] {
        assert!(t.contains(cmd), "--help lacks {cmd}: {t}");
    }
    for sub in [
        &["stream", "--help"][..],
        &["demo", "--help"],
        &["stream", "monitor", "--help"],
    ] {
        assert!(rtloop(sub).status.success());
    }
}

#[test]
fn stream_create_defaults_its_capacity_as_python_does() {
    let name = unique("defcap");
    let o = rtloop(&["stream", "create", &name, "--channels", "2"]);
    let info = rtloop(&["--json", "stream", "info", &name]);
    let _ = rtloop(&["stream", "remove", &name]);
    assert!(o.status.success(), "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert!(j["capacity"].as_u64().unwrap() >= 65_536, "{j}");
}

#[test]
fn stream_remove_refuses_a_file_that_is_not_a_stream_and_leaves_it() {
    let name = unique("notastream");
    let path = rtloop_stream::stream_path(&name);
    std::fs::write(&path, b"someone's notes").unwrap();
    let o = rtloop(&["stream", "remove", &name]);
    let left = std::fs::read(&path);
    let _ = std::fs::remove_file(&path);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("is not removed"), "{}", text(&o));
    assert!(text(&o).contains("stream magic"), "{}", text(&o));
    assert_eq!(left.unwrap(), b"someone's notes", "the file is left alone");
}
