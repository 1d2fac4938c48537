//! The layout tells the architecture (docs/architecture.md): libraries never depend on the
//! command line, the core depends only on the OS layer, and the OS layer on no rtloop crate.
//! Read from `cargo metadata`, so a new dependency that breaks the rule fails here.

use std::collections::BTreeMap;
use std::process::Command;

/// Each workspace crate and the rtloop crates it depends on (normal dependencies).
fn graph() -> BTreeMap<String, Vec<String>> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    m["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|n| n.starts_with("rtloop"))
                .map(str::to_owned)
                .collect();
            (p["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

#[test]
fn no_library_depends_on_the_command_line() {
    let g = graph();
    assert!(g.len() >= 13, "{g:?}");
    let on_cli: Vec<&String> = g
        .iter()
        .filter(|(_, deps)| deps.iter().any(|d| d == "rtloop-cli"))
        .map(|(n, _)| n)
        .collect();
    // the Python binding carries the `rtloop` command itself (its console entry point):
    // nothing else may depend on the command line, and the binding uses nothing else of it
    // (the load test, for one, is the lab library's typed call)
    assert_eq!(on_cli, ["rtloop-py"], "crates depending on rtloop-cli");
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../rtloop-py/src/lib.rs"
    ))
    .unwrap();
    let uses: Vec<&str> = src
        .match_indices("rtloop_cli::")
        .map(|(i, _)| {
            let rest = &src[i..];
            &rest[..rest.find('(').unwrap_or(rest.len()).min(60)]
        })
        .collect();
    assert_eq!(
        uses,
        ["rtloop_cli::run"],
        "the binding's uses of the command line"
    );
}

#[test]
fn the_benchmarks_are_a_library_the_command_line_calls() {
    let g = graph();
    assert!(
        g["rtloop-cli"].iter().any(|d| d == "rtloop-bench"),
        "{:?}",
        g["rtloop-cli"]
    );
    // the benchmark's children are typed roles of the library, started through rtloop-launch
    assert!(
        g["rtloop-bench"].iter().any(|d| d == "rtloop-launch"),
        "{:?}",
        g["rtloop-bench"]
    );
    let cli = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let left: Vec<String> = std::fs::read_dir(cli)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("cmd_bench_") || n.starts_with("peer_"))
        .collect();
    assert!(
        left.is_empty(),
        "benchmark code in the command line: {left:?}"
    );
}

#[test]
fn the_core_depends_only_on_the_os_layer() {
    let g = graph();
    assert_eq!(g["rtloop-stream"], ["rtloop-sys"]);
    assert!(g["rtloop-sys"].is_empty(), "{:?}", g["rtloop-sys"]);
}

#[test]
fn the_measurement_helpers_depend_only_on_the_os_layer() {
    // clocks, histograms, tables and charts measure anything: they read no stream
    assert_eq!(graph()["rtloop-metrics"], ["rtloop-sys"]);
}

#[test]
fn process_orchestration_depends_only_on_the_os_layer() {
    // rtloop-launch is below every library that starts child processes; from the OS layer
    // it takes the parent-death signal every child gets
    let g = graph();
    let launch = g
        .iter()
        .find(|(n, _)| *n == "rtloop-launch")
        .expect("rtloop-launch is a workspace member");
    assert!(
        launch
            .1
            .iter()
            .all(|d| d == "rtloop-sys" || !d.starts_with("rtloop-")),
        "rtloop-launch depends on {:?}",
        launch.1
    );
}

#[test]
fn one_transport_abstraction_serves_the_lab_and_the_peers_benchmark() {
    // rtloop-transport owns the channels; the lab builds its link from them and links none
    // of the peer libraries (LSL, ZeroMQ, iceoryx2), which implement the same traits in peers
    let g = graph();
    let transport = &g["rtloop-transport"];
    assert!(
        transport
            .iter()
            .all(|d| d == "rtloop-stream" || d == "rtloop-fieldtrip"),
        "rtloop-transport depends on {transport:?}"
    );
    for user in ["rtloop-lab", "rtloop-peers"] {
        assert!(
            g[user].iter().any(|d| d == "rtloop-transport"),
            "{user} does not use rtloop-transport: {:?}",
            g[user]
        );
    }
    let heavy: Vec<&String> = g["rtloop-lab"]
        .iter()
        .filter(|d| ["rtloop-peers", "rtloop-lsl", "rtloop-native"].contains(&d.as_str()))
        .collect();
    assert!(heavy.is_empty(), "the lab links {heavy:?}");
}

/// The realtime runtime built with no features links no plotting, SQLite, liblsl or BrainFlow loader,
/// recorder or web server: a model that uses none of them carries none of them.
#[test]
fn the_runtime_without_features_links_no_heavy_driver_or_plotting() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "rtloop-runtime",
            "--no-default-features",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    let heavy: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| {
            [
                "plotters",
                "rusqlite",
                "rtloop-lsl",
                "rtloop-brainflow",
                "rtloop-record",
                "rtloop-view",
                "axum",
            ]
            .contains(n)
        })
        .collect();
    assert!(heavy.is_empty(), "the bare runtime links {heavy:?}");
    assert!(tree.contains("rtloop-stream"), "{tree}");
}

/// The recorder's control socket is the recorder's (`rtloop_record::control`): the command
/// line and the Python binding serve it through the library, and neither listens on a
/// socket of its own for it nor parses its commands.
#[test]
fn the_recorders_control_socket_belongs_to_the_recorder() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let read = |p: &str| std::fs::read_to_string(format!("{root}/{p}")).unwrap();
    let lib = read("rtloop-record/src/control.rs");
    assert!(lib.contains("bind_private_unix") && lib.contains("\"split\" =>"));
    let cli = read("rtloop-cli/src/cmd_record.rs");
    assert!(
        cli.contains("serve_control"),
        "rtloop record serves the library's socket"
    );
    let py = read("rtloop-py/src/runtime.rs");
    assert!(
        py.contains("serve_control"),
        "rtloop.record serves the library's socket"
    );
    for (what, src) in [("cmd_record.rs", &cli), ("the binding", &py)] {
        for own in [
            "bind_private_unix",
            "UnixListener",
            "\"split\" =>",
            "\"pause\" =>",
        ] {
            assert!(
                !src.contains(own),
                "{what} has its own control socket ({own})"
            );
        }
    }
}
