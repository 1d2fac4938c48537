//! `rtloop serve` as its own process: the listening line, a client over TCP and the UNIX
//! socket, a clean stop on SIGTERM (stream and socket file removed), bad options; and
//! `rtloop bench fieldtrip` end to end on a short run.

mod common;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rtloop_fieldtrip::Client;

fn rtloop() -> Command {
    common::rtloop_cmd()
}

struct Served {
    child: Child,
    line: String,
}

fn serve(args: &[&str]) -> Served {
    let mut child = rtloop()
        .arg("serve")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    Served { child, line }
}

impl Served {
    fn field(&self, k: &str) -> String {
        self.line
            .split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .unwrap_or_else(|| panic!("no {k} in {:?}", self.line))
            .to_owned()
    }
    fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id() as i32;
        // SIGTERM, as a service manager would
        Command::new("kill").arg(pid.to_string()).status().unwrap();
        let t = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(t.elapsed() < Duration::from_secs(10), "serve did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn serve_runs_as_a_process_and_stops_cleanly() {
    let name = format!("cli-serve-{}", std::process::id());
    let dir = std::env::temp_dir().join(&name);
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("ft.sock");
    let s = serve(&[
        "--bind",
        "127.0.0.1:0",
        "--unix",
        sock.to_str().unwrap(),
        "--stream",
        &name,
    ]);
    assert!(s.line.starts_with("listening tcp=127.0.0.1:"), "{}", s.line);
    let mut c = Client::connect(&s.field("tcp=")).unwrap();
    c.put_header(2, 100.0, 9, &[]).unwrap();
    c.put_data(2, &[1.0f32, 2.0]).unwrap();
    let mut u = Client::connect(&format!("unix:{}", s.field("unix="))).unwrap();
    assert_eq!(u.get_data::<f32>(0, 0).unwrap(), [1.0, 2.0]);
    assert!(rtloop_stream::Stream::open(&name).is_ok());
    drop((c, u));
    assert!(s.stop().success());
    assert!(!sock.exists(), "socket file removed on exit");
    assert!(
        rtloop_stream::Stream::open(&name).is_err(),
        "the stream a PUT_HDR created is removed on exit"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_json_line_and_bad_options() {
    let name = format!("cli-servej-{}", std::process::id());
    let mut s = rtloop()
        .args([
            "--json",
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--stream",
            &name,
            "--duration",
            "0.3",
        ])
        .output()
        .unwrap();
    assert!(s.status.success());
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&s.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(v["event"], "listening");
    assert_eq!(v["stream"], name.as_str());
    // each bad option: exit status and a message saying what is allowed
    for (args, want) in [
        (vec!["--stream", "bad/name"], "--stream"),
        (vec!["--no-tcp"], "--no-tcp needs --unix"),
        (vec!["--bind", "not-an-address"], "not-an-address"),
        (vec!["--capacity", "0"], "capacity"),
        (
            vec!["--max-message", "10"],
            "--max-message: max_message=10: allowed 64 to 4294967295",
        ),
        (
            vec!["--max-clients", "0"],
            "--max-clients: max_clients=0: allowed 1 to 65536",
        ),
        (
            vec!["--memory-mb", "0"],
            "--memory-mb: memory_budget=0 bytes (0 MiB): allowed 1 to 1048576 MiB",
        ),
        (
            vec!["--events", "0"],
            "--events: events=0: allowed 1 to 1000000",
        ),
        (
            vec!["--poll", "fast"],
            "want adaptive, off, or microseconds",
        ),
    ] {
        s = rtloop()
            .arg("serve")
            .args(&args)
            .arg("--duration")
            .arg("0.2")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&s.stderr);
        assert!(!s.status.success(), "{args:?} was accepted");
        assert!(text.contains(want), "{args:?}: {text}");
    }
    // a port in use: a clear error naming it
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    s = rtloop()
        .args(["serve", "--bind", &addr, "--duration", "0.2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&s.stderr);
    assert!(!s.status.success());
    assert!(
        text.contains("cannot listen on TCP") && text.contains(&addr),
        "{text}"
    );
}

#[test]
fn bench_fieldtrip_runs_end_to_end() {
    let out = std::env::temp_dir().join(format!("cli-ftbench-{}", std::process::id()));
    let o = rtloop()
        .args([
            "--json",
            "bench",
            "fieldtrip",
            "--quick",
            "--rounds",
            "20",
            "--transports",
            "unix,inproc",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let faq = v["faq"].as_array().unwrap();
    assert_eq!(faq.len(), 21, "7 blocks x (limit unix, unix, inproc)");
    assert!(faq.iter().any(|r| r["transport"] == "limit unix"));
    // the server's CPU per request is counted for the socket servers, not in-process
    for row in faq {
        let counted = row["read_cpu_ns_per_request"].as_f64().is_some();
        assert_eq!(counted, row["transport"] != "inproc", "{row}");
    }
    let paced = v["paced"].as_array().unwrap();
    assert_eq!(paced.len(), 2, "limit unix and unix read every 200 µs");
    for p in paced {
        assert!(p["requests"].as_u64().unwrap() > 0, "{p}");
        assert!(p["cpu_ns_per_request"].as_f64().is_some(), "{p}");
    }
    for row in faq {
        assert!(row["write_values_per_s"].as_f64().unwrap() > 0.0);
        assert!(row["read_values_per_s"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(
        v["latency"].as_array().unwrap().len(),
        30,
        "10 sizes x (limit unix, unix, inproc)"
    );
    for f in ["results.json", "faq_throughput.png", "write_latency.png"] {
        assert!(out.join(f).exists(), "{f}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// The reference runs in the same run as rtloop over TCP, and the verdict follows the figures.
#[test]
fn bench_fieldtrip_holds_rtloop_against_the_reference_in_the_same_run() {
    let o = rtloop()
        .args([
            "--json",
            "bench",
            "fieldtrip",
            "--quick",
            "--rounds",
            "10",
            "--transports",
            "tcp",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let faq = v["faq"].as_array().unwrap();
    assert_eq!(faq.len(), 21, "7 blocks x (reference, limit, rtloop)");
    assert!(faq.iter().any(|r| r["transport"] == "reference tcp"));
    let rows = v["versus_reference"].as_array().unwrap();
    assert_eq!(rows.len(), 7);
    for r in rows {
        let (w, rd) = (
            r["write_ratio"].as_f64().unwrap(),
            r["read_ratio"].as_f64().unwrap(),
        );
        assert!(w > 0.0 && rd > 0.0, "{r}");
        assert_eq!(r["goal"].as_f64(), Some(2.0));
        assert_eq!(r["met"].as_bool(), Some(w >= 2.0 && rd >= 2.0), "{r}");
        // the limit runs in the same run: rtloop's reads are held against it too
        assert!(r["read_vs_limit_tcp"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["limit_goal"].as_f64(), Some(0.9));
        assert!(r["read_vs_other"].is_null(), "{r}");
    }
    assert_eq!(v["poll"], "adaptive");
}

/// `--other` measures another FieldTrip server (here a second `rtloop serve`) in the same run,
/// beside the reference and the limit, with its process's CPU counted; a bad address is refused
/// with what is allowed.
#[test]
fn bench_fieldtrip_measures_another_server_in_the_same_run() {
    let name = format!("cli-ftother-{}", std::process::id());
    let s = serve(&["--bind", "127.0.0.1:0", "--stream", &name]);
    let other = format!("{}@{}", s.field("tcp="), s.child.id());
    let o = rtloop()
        .args([
            "--json",
            "bench",
            "fieldtrip",
            "--quick",
            "--rounds",
            "10",
            "--transports",
            "tcp",
            "--other",
            &other,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let faq = v["faq"].as_array().unwrap();
    assert_eq!(
        faq.len(),
        28,
        "7 blocks x (reference, other, limit, rtloop)"
    );
    for row in faq.iter().filter(|r| r["transport"] == "other tcp") {
        assert!(row["read_values_per_s"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["read_cpu_ns_per_request"].as_f64().is_some(), "{row}");
    }
    for r in v["versus_reference"].as_array().unwrap() {
        assert!(r["read_vs_other"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["write_vs_other"].as_f64().unwrap() > 0.0, "{r}");
    }
    s.stop();
    let o = rtloop()
        .args(["bench", "fieldtrip", "--quick", "--other", "1972"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(text.contains("HOST:PORT"), "{text}");
}

/// CPU seconds the process has used (user + system), from /proc.
fn cpu_of(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // fields 14 and 15 (utime, stime), counted from the state field (3)
    let ticks = f[11] + f[12];
    Duration::from_millis(ticks * 1000 / 100)
}

/// By default the server polls for a client in a request/response loop, and only then: with
/// clients connected but quiet it sleeps, using no CPU.
#[test]
fn serve_polls_for_a_looping_client_and_sleeps_when_clients_are_quiet() {
    let name = format!("cli-servep-{}", std::process::id());
    let s = serve(&["--bind", "127.0.0.1:0", "--stream", &name]);
    let addr = s.field("tcp=");
    let pid = s.child.id();
    let mut clients: Vec<Client> = (0..3).map(|_| Client::connect(&addr).unwrap()).collect();
    clients[0].put_header(2, 100.0, 9, &[]).unwrap();
    clients[0].put_data(2, &[1.0f32; 2 * 8]).unwrap();
    for c in &mut clients {
        for _ in 0..500 {
            assert_eq!(c.get_data::<f32>(7, 7).unwrap(), [1.0, 1.0]);
        }
    }
    // every client now quiet, connections open
    std::thread::sleep(Duration::from_millis(200));
    let before = cpu_of(pid);
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_of(pid) - before;
    // a polling thread would use about a second; a sleeping server, a few ticks at most
    assert!(
        used < Duration::from_millis(200),
        "a quiet server used {used:?} of CPU in 1 s"
    );
    // and still answers at once
    assert_eq!(clients[2].poll().unwrap(), (8, 0));
    drop(clients);
    assert!(s.stop().success());
}
