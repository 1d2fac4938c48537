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
    // the Python package's `rtloop` command is the binary (shipped in the wheel), so not even
    // the binding links the command line
    assert!(
        on_cli.is_empty(),
        "crates depending on rtloop-cli: {on_cli:?}"
    );
}

/// Every package `rtloop-py` links (normal dependencies, transitively), from the resolved
/// graph of `cargo metadata`.
fn linked_by_the_binding() -> std::collections::BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let name_of: BTreeMap<&str, &str> = m["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let nodes: BTreeMap<&str, &serde_json::Value> = m["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let root = name_of
        .iter()
        .find(|(_, n)| **n == "rtloop-py")
        .map(|(id, _)| *id)
        .expect("rtloop-py is a workspace member");
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![root];
    while let Some(id) = todo.pop() {
        for d in nodes[id]["deps"].as_array().unwrap() {
            // normal dependencies only (build scripts and tests are not in the extension)
            let normal = d["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null());
            let pkg = d["pkg"].as_str().unwrap();
            if normal && seen.insert(name_of[pkg].to_owned()) {
                todo.push(pkg);
            }
        }
    }
    seen
}

/// `import rtloop` loads the binding, so it links only what Python uses: the command line
/// and the benchmarks run as the `rtloop` executable the wheel ships beside it. Measured with
/// `scripts/wheel.sh --host` (stripped, profile `wheel`): the extension was 108 MB (14.4 MB
/// stripped) with the command line and benchmarks in it, and is 6.8 MB without them (the
/// wheel 8.1 MB with the 10.9 MB executable; tests/test_wheel.py holds them to 8 and 10 MB).
#[test]
fn the_binding_links_only_what_python_uses() {
    let linked = linked_by_the_binding();
    assert!(
        linked.contains("rtloop-stream") && linked.contains("pyo3"),
        "{linked:?}"
    );
    let heavy: Vec<&str> = [
        "rtloop-cli",
        "rtloop-bench",
        "rtloop-peers",
        "rtloop-view",
        "iceoryx2",
        "axum",
        "hyper",
        "tokio",
        "clap",
        "zmq",
    ]
    .into_iter()
    .filter(|n| linked.contains(*n))
    .collect();
    assert!(heavy.is_empty(), "the Python binding links {heavy:?}");
    // SQLite (rusqlite, bundled) stays: `rtloop.runtime.run` runs a model from the Python
    // process, and rtloop-runtime checks every sink of the model there, the logger's
    // database among them, with the driver table that opens it in the sink's process
    // (rtloop-runtime's `logger` feature). Plotting stays for `rtloop.lab`'s and the
    // runtime's PNG charts.
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
