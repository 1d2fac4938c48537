//! The layout tells the architecture (docs/architecture.md): libraries never depend on the
//! command line, the core depends only on the OS layer, and the OS layer on no rtloop crate.
//! Read from `cargo metadata`, so a new dependency that breaks the rule fails here.

use std::collections::BTreeMap;
use std::process::Command;

/// What `cargo ARGS` (offline, in this crate's directory) prints; its error if it fails.
fn cargo(args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO"))
        .args(args)
        .arg("--offline")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Each workspace crate and the rtloop crates it depends on (normal dependencies).
fn graph() -> BTreeMap<String, Vec<String>> {
    let out = cargo(&["metadata", "--format-version", "1", "--no-deps"]);
    let m: serde_json::Value = serde_json::from_slice(&out).unwrap();
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
    let out = cargo(&["metadata", "--format-version", "1"]);
    let m: serde_json::Value = serde_json::from_slice(&out).unwrap();
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
    // (rtloop-runtime's `logger` feature); `rtloop.load_log` reads the log with the
    // reader beside that sink. Plotting stays for `rtloop.lab`'s and the runtime's PNG
    // charts.
}

/// The logger's log has one owner, rtloop-runtime (its sink writes it, the reader beside it
/// reads it): the Python package calls that reader and writes no SQL of its own.
#[test]
fn the_python_package_reads_the_runtime_log_through_rust() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/rtloop");
    let mut checked = 0;
    let mut found = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if !p.extension().is_some_and(|x| x == "py" || x == "pyi") {
            continue;
        }
        checked += 1;
        let text = std::fs::read_to_string(&p).unwrap();
        for sql in [
            "import sqlite3",
            "from sqlite3",
            "FROM ticks",
            "FROM signals",
            "PRAGMA table_info",
            "SELECT ",
        ] {
            if text.contains(sql) {
                found.push(format!(
                    "{}: {sql:?}",
                    p.file_name().unwrap().to_string_lossy()
                ));
            }
        }
    }
    assert!(
        checked > 10,
        "{checked} Python files under {}",
        dir.display()
    );
    assert!(found.is_empty(), "SQL in the Python package: {found:?}");
    let log = source("python/rtloop/log.py");
    assert!(
        log.contains("_rtloop.read_log("),
        "rtloop.load_log calls the binding"
    );
    let binding = source("crates/rtloop-py/src/runtime_log.rs");
    assert!(binding.contains("rtloop_runtime::drivers::logger::read::"));
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
            .all(|d| d == "rtloop-stream" || d == "rtloop-sys" || d == "rtloop-fieldtrip"),
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

#[test]
fn iceoryx2_is_set_up_in_one_place() {
    // the peers benchmark's transport and the stream benchmark's peer column both open their
    // ports through rtloop-peers' iceoryx2 module; no other crate links iceoryx2 itself
    // the crate imported (`use iceoryx2::prelude::*`), not rtloop's module of that name
    let mut using: Vec<String> = files_with(&["use iceoryx2::"]);
    using.sort();
    assert_eq!(
        using,
        ["crates/rtloop-peers/src/transport/iceoryx2.rs"],
        "files that use iceoryx2 directly"
    );
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut manifests: Vec<String> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|c| c.unwrap().path().join("Cargo.toml"))
        .filter(|m| {
            std::fs::read_to_string(m)
                .unwrap_or_default()
                .lines()
                .any(|l| l.starts_with("iceoryx2 = {"))
        })
        .map(|m| {
            let krate = m.parent().unwrap().file_name().unwrap();
            format!("crates/{}/Cargo.toml", krate.to_string_lossy())
        })
        .collect();
    manifests.sort();
    assert_eq!(
        manifests,
        ["crates/rtloop-peers/Cargo.toml"],
        "crates that depend on iceoryx2"
    );
}

/// The realtime runtime built with no features links no plotting, SQLite, liblsl or BrainFlow loader,
/// recorder or web server: a model that uses none of them carries none of them.
#[test]
fn the_runtime_without_features_links_no_heavy_driver_or_plotting() {
    let out = cargo(&[
        "tree",
        "-p",
        "rtloop-runtime",
        "--no-default-features",
        "-e",
        "normal",
        "--prefix",
        "none",
    ]);
    let tree = String::from_utf8_lossy(&out);
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

/// Each package of a build and the features it is built with: `cargo tree -e normal,build`
/// of `args`, as `name version -> features`.
fn features_of(args: &[&str]) -> BTreeMap<String, String> {
    let mut all = vec!["tree", "--locked", "-e", "normal,build", "--prefix", "none"];
    all.extend(["-f", "{p}|{f}"]);
    all.extend(args);
    String::from_utf8_lossy(&cargo(&all))
        .lines()
        .filter_map(|l| l.rsplit_once('|'))
        .map(|(p, f)| {
            let name = p.split(" (").next().unwrap_or(p).trim().to_owned();
            (name, f.trim_end_matches(" (*)").to_owned())
        })
        .collect()
}

/// The wheel's two builds (scripts/wheel.sh: the `rtloop` executable, then the extension) ask
/// for the same features of every dependency they share, so the second reuses the first's
/// compiled code (crates/rtloop-workspace-hack lists the union); a difference compiled the
/// crates above it twice (59 of the extension's crates, 75 CPU seconds of the wheel's 409).
#[test]
fn the_wheels_two_builds_share_their_dependencies_features() {
    let exe = features_of(&["-p", "rtloop-cli", "--no-default-features"]);
    let ext = features_of(&["-p", "rtloop-py"]);
    let differ: Vec<String> = exe
        .iter()
        .filter_map(|(p, f)| {
            let g = ext.get(p)?;
            (f != g).then(|| format!("{p}: executable [{f}], extension [{g}]"))
        })
        .collect();
    assert!(
        differ.is_empty(),
        "add the union to crates/rtloop-workspace-hack/Cargo.toml:\n{}",
        differ.join("\n")
    );
    assert!(
        exe.len() > 100 && ext.len() > 100,
        "{} {}",
        exe.len(),
        ext.len()
    );
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

/// Every `.rs` file under `crates/*/src`, as (path from the workspace root, text).
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, root, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().unwrap();
    let mut out = Vec::new();
    for c in std::fs::read_dir(root.join("crates")).unwrap() {
        let src = c.unwrap().path().join("src");
        if src.is_dir() {
            walk(&src, &root, &mut out);
        }
    }
    assert!(out.len() > 100, "{} source files", out.len());
    out
}

/// The files among `sources()` whose text contains any of `needles`.
fn files_with(needles: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = sources()
        .into_iter()
        .filter(|(_, text)| needles.iter().any(|n| text.contains(n)))
        .map(|(p, _)| p)
        .collect();
    v.sort();
    v
}

fn source(rel: &str) -> String {
    std::fs::read_to_string(format!("{}/../../{rel}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn the_fieldtrip_servers_limits_are_checked_in_the_library_only() {
    // ServerConfig and BufferConfig validate themselves; the command line and the binding
    // only parse numbers and call that check
    let lib = source("crates/rtloop-fieldtrip/src/config.rs");
    for f in [
        "impl ServerConfig",
        "impl BufferConfig",
        "pub fn validate(&self) -> Result<(), ConfigError>",
    ] {
        assert!(lib.contains(f), "rtloop-fieldtrip's config.rs lacks {f:?}");
    }
    for front in [
        "crates/rtloop-cli/src/cmd_serve.rs",
        "crates/rtloop-py/src/fieldtrip.rs",
    ] {
        let text = source(front);
        assert!(
            text.contains(".validate()"),
            "{front} does not call validate()"
        );
        // the limits themselves: clap ranges, or the numbers written out again
        for limit in [".range(", "65536", "65_536", "1_048_576", "1_000_000"] {
            assert!(
                !text.contains(limit),
                "{front} writes a limit again: {limit:?}"
            );
        }
    }
}

#[test]
fn only_the_writer_checks_that_data_is_whole_samples() {
    // `WriteError::ChannelMismatch` is built by rtloop-stream's writer alone; others ask it
    // (`Writer::whole_samples`) and may only match on the error
    let builders: Vec<String> = sources()
        .into_iter()
        .filter(|(p, _)| !p.starts_with("crates/rtloop-stream/"))
        .filter(|(_, t)| {
            t.match_indices("ChannelMismatch {")
                .any(|(i, _)| !t[i..].starts_with("ChannelMismatch { .. }"))
        })
        .map(|(p, _)| p)
        .collect();
    assert!(
        builders.is_empty(),
        "the writer's channel check written again in {builders:?}"
    );
}

#[test]
fn which_python_to_run_is_decided_in_one_place() {
    // rtloop_sys::python / python_named read $RTLOOP_PYTHON; everything else calls them
    assert_eq!(
        files_with(&["var(\"RTLOOP_PYTHON\")", "var_os(\"RTLOOP_PYTHON\")"]),
        ["crates/rtloop-sys/src/lib.rs"],
        "files that read RTLOOP_PYTHON themselves"
    );
    let sys = source("crates/rtloop-sys/src/lib.rs");
    assert_eq!(sys.matches("\"RTLOOP_PYTHON\"").count(), 1, "read once");
}

#[test]
fn a_sockets_receive_buffer_is_set_in_one_place() {
    // rtloop_sys::set_recv_buffer (which never truncates the size) is the one copy
    assert_eq!(
        files_with(&[
            "SO_RCVBUFFORCE",
            "set_socket_recv_buffer_size_force",
            "fn set_rcvbuf"
        ]),
        ["crates/rtloop-sys/src/lib.rs"],
        "files that force a receive buffer themselves"
    );
}

#[test]
fn brainflows_buffer_is_sized_in_one_place() {
    // rtloop_brainflow::buffer_samples: the bridge and the runtime's driver both call it
    assert_eq!(
        files_with(&["rate * 600.0", ".max(45_000)"]),
        ["crates/rtloop-brainflow/src/lib.rs"],
        "files that size BrainFlow's buffer themselves"
    );
}

#[test]
fn the_transport_takes_only_the_fieldtrip_client_from_the_fieldtrip_crate() {
    // the socket read that polls before it sleeps belongs to the OS layer (rtloop_sys::
    // SpinRead), which the FieldTrip client and the socket channels both use
    let mut taken: Vec<String> = sources()
        .into_iter()
        .filter(|(p, _)| p.starts_with("crates/rtloop-transport/"))
        .flat_map(|(_, t)| {
            t.match_indices("rtloop_fieldtrip::")
                .map(|(i, _)| {
                    let rest = &t[i + "rtloop_fieldtrip::".len()..];
                    let end = rest
                        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                        .unwrap_or(rest.len());
                    rest[..end].to_owned()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    taken.sort();
    taken.dedup();
    assert_eq!(
        taken,
        ["Client", "ClientError"],
        "rtloop-transport's uses of rtloop_fieldtrip"
    );
    assert_eq!(
        files_with(&["pub struct SpinRead"]),
        ["crates/rtloop-sys/src/spin_read.rs"]
    );
}

#[test]
fn the_cores_sync_facade_depends_on_no_module_above_it() {
    // sync.rs is what ring, reader and writer build on: it may use the OS layer (sys) only
    let sync = source("crates/rtloop-stream/src/sync.rs");
    let above: Vec<&str> = sync
        .match_indices("crate::")
        .map(|(i, _)| {
            let rest = &sync[i + "crate::".len()..];
            &rest[..rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len())]
        })
        .filter(|m| *m != "sys")
        .collect();
    assert!(above.is_empty(), "sync.rs uses crate::{above:?}");
}

#[test]
fn the_named_errors_are_typed_not_strings() {
    // each error says what failed by its variant, not by a string to parse
    let typed = [
        ("crates/rtloop-record/src/xdf.rs", "XdfError"),
        ("crates/rtloop-runtime/src/process.rs", "StepError"),
        ("crates/rtloop-metrics/src/charts.rs", "ChartError"),
        ("crates/rtloop-record/src/formats/spikeglx.rs", "MetaError"),
        (
            "crates/rtloop-record/src/formats/openephys.rs",
            "OebinError",
        ),
        ("crates/rtloop-fieldtrip/src/config.rs", "ConfigError"),
        ("crates/rtloop-bench/src/udp_load.rs", "UdpLoadError"),
        ("crates/rtloop-bench/src/lib.rs", "BenchError"),
    ];
    for (file, ty) in typed {
        let text = source(file);
        assert!(
            !text.contains(&format!("pub struct {ty}(")),
            "{file}: {ty} is a tuple struct"
        );
        let start = text
            .find(&format!("pub enum {ty} {{"))
            .unwrap_or_else(|| panic!("{file}: no enum {ty}"));
        let body = &text[start..start + text[start..].find("\n}").unwrap()];
        let stringly: Vec<&str> = body
            .lines()
            .map(str::trim)
            .filter(|l| l.ends_with("(String),") || l.ends_with("(String)"))
            .collect();
        assert!(stringly.is_empty(), "{file}: {ty} has {stringly:?}");
    }
    for (file, f) in [
        (
            "crates/rtloop-record/src/formats/spikeglx.rs",
            "pub fn parse_meta(",
        ),
        (
            "crates/rtloop-record/src/formats/spikeglx.rs",
            "pub fn layout(",
        ),
        (
            "crates/rtloop-record/src/formats/openephys.rs",
            "pub fn parse_oebin(",
        ),
    ] {
        let text = source(file);
        let i = text.find(f).unwrap_or_else(|| panic!("{file}: no {f}"));
        let sig = &text[i..i + text[i..].find('{').unwrap()];
        assert!(!sig.contains(", String>"), "{file}: {sig}");
    }
}

#[test]
fn the_runtime_library_carries_no_measuring_code() {
    // a program that runs models links the runtime; the load generators and their checkers
    // are the benchmarks' (rtloop-bench), so it never links them
    let in_runtime: Vec<String> = files_with(&["fn udp_sweep", "fn loop_latency", "fn bare_echo"])
        .into_iter()
        .filter(|p| p.starts_with("crates/rtloop-runtime/"))
        .collect();
    assert!(
        in_runtime.is_empty(),
        "measuring code in the runtime: {in_runtime:?}"
    );
    assert!(
        !source("crates/rtloop-runtime/src/lib.rs").contains("mod udp_load"),
        "the runtime declares the UDP load generator"
    );
}

#[test]
fn every_child_role_is_registered_by_its_library_and_played_by_the_executable() {
    // no dispatcher lists the roles: each library registers its own beside the role's type,
    // and the executable plays whichever it is asked for
    assert!(
        !source("crates/rtloop-cli/src/roles.rs").contains("ChildRole>::NAME"),
        "the command line dispatches on role names itself"
    );
    let defined: Vec<String> = sources()
        .into_iter()
        .filter(|(p, _)| !p.starts_with("crates/rtloop-launch/"))
        .flat_map(|(_, text)| {
            text.lines()
                .filter_map(|l| l.trim().strip_prefix("const NAME: &'static str = \""))
                .map(|n| n.trim_end_matches("\";").to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(defined.len() >= 15, "{defined:?}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rtloop"))
        .args(["child", "no-such-role", "{}"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown child role \"no-such-role\""), "{err}");
    for name in &defined {
        assert!(
            err.contains(&format!(" {name},")) || err.contains(&format!(" {name}\n")),
            "the rtloop executable does not play {name}: {err}"
        );
    }
}

#[test]
fn a_child_says_it_is_ready_one_way() {
    // rtloop-launch's ready line (`ready` or `ready JSON`) is the one handshake: no child
    // writes its own, no parent parses one by hand
    let by_hand: Vec<String> = files_with(&["\"ready ", "\"ready\"", "ready: true"])
        .into_iter()
        .filter(|p| !p.starts_with("crates/rtloop-launch/"))
        .collect();
    assert!(
        by_hand.is_empty(),
        "ready lines written or read by hand: {by_hand:?}"
    );
    // an in-process recording says it started through the library, not by files appearing
    let py = source("python/rtloop/recording.py");
    let recorder = &py[py.find("class Recorder").unwrap()..];
    let recorder = &recorder[..recorder.find("\ndef ").unwrap_or(recorder.len())];
    assert!(
        !recorder.contains("header.json"),
        "rtloop.Recorder polls for header.json"
    );
}

#[test]
fn the_demo_is_a_library_call_the_command_line_renders() {
    // rtloop-lab runs the demo (stream, reader process, pacing, checks); the command line
    // only makes its config, shows its status and renders its report
    let cli = source("crates/rtloop-cli/src/cmd_demo.rs");
    for own in [
        "rtloop_launch::",
        "Stream::create",
        "writer()",
        "ReaderRole",
    ] {
        assert!(
            !cli.contains(own),
            "cmd_demo.rs runs the demo itself ({own})"
        );
    }
    assert!(cli.contains("rtloop_lab::demo::run("));
}

#[test]
fn no_benchmark_is_one_long_script() {
    // each benchmark's run() calls its parts; none grows back into a several-hundred-line
    // script (runtime's was 383 lines, pipeline's 296)
    for (path, text) in sources()
        .into_iter()
        .filter(|(p, _)| p.starts_with("crates/rtloop-bench/src/"))
    {
        let lines: Vec<&str> = text.lines().collect();
        if let Some(start) = lines.iter().position(|l| l.starts_with("pub fn run(")) {
            let len = lines[start..].iter().position(|l| *l == "}").unwrap();
            assert!(len <= 150, "{path}: run() is {len} lines");
        }
    }
}

#[test]
fn the_fieldtrip_codec_owns_the_wire_codes_and_the_event_encoding() {
    // rtloop_fieldtrip::codec speaks the protocol: rtloop.fieldtrip takes the command, chunk
    // and data type codes from the binding and hands event types and values to it as Python
    // values; it neither writes a code nor packs or unpacks an event value itself
    let py = source("python/rtloop/fieldtrip.py");
    let hex: Vec<String> = py
        .match_indices("0x0")
        .filter(|(i, _)| {
            // a number such as 0x0101 (not the 0xFFFFFFFF of a field's range)
            let before = py[..*i].chars().next_back();
            !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .map(|(i, _)| py[i..].chars().take(6).collect())
        .collect();
    assert!(
        hex.is_empty(),
        "fieldtrip.py writes wire codes itself: {hex:?}"
    );
    for own in [
        "def _encode_value",
        "def _decode_value",
        ".tobytes()",
        "np.frombuffer(",
        "encode(\"utf-8\")",
        "decode(\"utf-8\")",
        "_CODE = ",
        ".split(b\"\\0\")", // the CHANNEL_NAMES chunk's labels
    ] {
        assert!(
            !py.contains(own),
            "fieldtrip.py encodes FieldTrip values itself ({own:?})"
        );
    }
    for from_codec in [
        "_rtloop.FIELDTRIP_COMMANDS",
        "_rtloop.FIELDTRIP_DATATYPES",
        "_rtloop.fieldtrip_dtype_code",
    ] {
        assert!(py.contains(from_codec), "fieldtrip.py lacks {from_codec}");
    }
    let binding = source("crates/rtloop-py/src/fieldtrip.rs");
    for codec_use in [
        "codec::cmd::ALL",
        "codec::datatype_name",
        "WireEvent::from_fields",
        ".type_field()",
        "codec::channel_labels",
    ] {
        assert!(
            binding.contains(codec_use),
            "the binding does not take {codec_use} from the codec"
        );
    }
}

#[test]
fn the_recording_format_is_read_by_the_recorder_crate_only() {
    // rtloop_record::Recording is the one reader of a recording (which directory, the header
    // and its format check, the whole samples from the file sizes, the events up to a cut
    // line) and rtloop_record::row_of the one row mapping; rtloop.load calls them through the
    // binding and only maps the files with numpy
    let py = source("python/rtloop/recording.py");
    let reading = &py[..py.find("class Recorder").unwrap()];
    for own in [
        "json.",            // parses header.json or events.jsonl itself
        "st_size",          // counts the samples from the file sizes itself
        "\"first_sample\"", // row/sample arithmetic of its own
        "\"gaps\"",         // walks the gaps itself
    ] {
        assert!(
            !reading.contains(own),
            "rtloop.recording reads the recording format itself ({own})"
        );
    }
    for call in [
        "RecordingFiles(",
        "recording_row_of(",
        "recording_sample_of(",
    ] {
        assert!(
            reading.contains(call),
            "rtloop.recording does not call {call}"
        );
    }
    let binding = source("crates/rtloop-py/src/recording.rs");
    for call in [
        "Recording::load(",
        ".events()",
        "rtloop_record::row_of(",
        "rtloop_record::sample_of(",
    ] {
        assert!(binding.contains(call), "the binding does not call {call}");
    }
    // no Python module opens the format's files by name
    for e in std::fs::read_dir(format!(
        "{}/../../python/rtloop",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
    {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "py") {
            let text = std::fs::read_to_string(&p).unwrap();
            for name in ["\"header.json\"", "\"events.jsonl\"", "'header.json'"] {
                assert!(!text.contains(name), "{} opens {name} itself", p.display());
            }
        }
    }
}

/// Every `.py` file of the Python package, as (path from the workspace root, text).
fn python_sources() -> Vec<(String, String)> {
    let dir = format!("{}/../../python/rtloop", env!("CARGO_MANIFEST_DIR"));
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (
                format!("python/rtloop/{name}"),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    assert!(out.len() > 10, "{} Python files", out.len());
    out
}

/// The Rust library owns each report: the binding hands it to Python as objects made from
/// the Rust value (`pythonize`, crates/rtloop-py/src/report.rs), never as JSON text for
/// Python to parse again. So `json.loads` in the package is only for what is no report of
/// the binding's, each listed here with why.
#[test]
fn python_gets_reports_from_the_binding_as_objects_not_json_text() {
    let allowed: &[(&str, &str, &str)] = &[
        // the benchmarks run as the `rtloop` executable (the binding does not link them, see
        // the_binding_links_only_what_python_uses): its stdout is the only way back
        (
            "python/rtloop/bench.py",
            "report.of(json.loads(out))",
            "child process",
        ),
        // a logger database's columns hold JSON text (shape, channel names, units)
        ("python/rtloop/log.py", "json.loads(shape_text)", "file"),
        ("python/rtloop/log.py", "json.loads(channels_text", "file"),
        ("python/rtloop/log.py", "json.loads(units_text", "file"),
        // a recording's header.json and events.jsonl, read from disk
        (
            "python/rtloop/recording.py",
            "json.loads((p / \"header.json\")",
            "file",
        ),
        ("python/rtloop/recording.py", "json.loads(line)", "file"),
        // a stream's description is text its writer chose (JSON or not)
        (
            "python/rtloop/stream.py",
            "json.loads(text)",
            "writer's text",
        ),
        // a module's context, given to the module host as an argument of its child process
        (
            "python/rtloop/runtime.py",
            "d = json.loads(text)",
            "child process",
        ),
    ];
    let mut found = Vec::new();
    for (path, text) in python_sources() {
        for line in text.lines().filter(|l| l.contains("json.loads(")) {
            let ok = allowed
                .iter()
                .any(|(p, needle, _)| *p == path && line.contains(needle));
            if !ok {
                found.push(format!("{path}: {}", line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "JSON parsed in python/rtloop that is not in the list of allowed reads (a report \
         comes from the binding as objects: crates/rtloop-py/src/report.rs):\n{}",
        found.join("\n")
    );
    // and the binding makes no JSON text of a report
    let json_text: Vec<String> = sources()
        .into_iter()
        .filter(|(p, t)| {
            p.starts_with("crates/rtloop-py/src/") && t.contains("serde_json::to_string")
        })
        .map(|(p, _)| p)
        .collect();
    assert!(
        json_text.is_empty(),
        "the binding writes JSON text: {json_text:?}"
    );
}

/// The report classes are generated from the Rust types (tests/python_reports.rs checks the
/// file is what they generate), so none is written by hand anywhere in the package.
#[test]
fn the_python_report_classes_are_generated_from_the_rust_types() {
    let generated = source("python/rtloop/reports.py");
    assert!(
        generated.contains("# Generated by crates/rtloop-cli/tests/python_reports.rs"),
        "python/rtloop/reports.py is not the generated file"
    );
    assert!(
        source("crates/rtloop-cli/tests/python_reports.rs")
            .contains("fn reports_py_is_what_the_rust_report_types_generate"),
        "the check that python/rtloop/reports.py is what the Rust types generate is gone"
    );
    let by_hand: Vec<String> = python_sources()
        .into_iter()
        .filter(|(p, _)| p != "python/rtloop/reports.py")
        .flat_map(|(p, text)| {
            text.lines()
                .filter(|l| l.starts_with("class ") && l.contains("(Report)"))
                .map(|l| format!("{p}: {l}"))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        by_hand.is_empty(),
        "report classes written by hand (declare the fields on the Rust type and regenerate \
         python/rtloop/reports.py): {by_hand:?}"
    );
}
