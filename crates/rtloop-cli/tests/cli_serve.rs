//! `rtloop serve` as its own process: the listening line, a client over TCP and the UNIX
//! socket, a clean stop on SIGTERM (stream and socket file removed), bad options; and
//! `rtloop bench fieldtrip` end to end on a short run.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rtloop_fieldtrip::Client;

fn rtloop() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rtloop"))
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
        (vec!["--max-message", "10"], "max-message"),
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
    assert_eq!(faq.len(), 12, "6 FAQ blocks x 2 transports");
    for row in faq {
        assert!(row["write_values_per_s"].as_f64().unwrap() > 0.0);
        assert!(row["read_values_per_s"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(v["latency"].as_array().unwrap().len(), 20);
    for f in ["results.json", "faq_throughput.png", "write_latency.png"] {
        assert!(out.join(f).exists(), "{f}");
    }
    let _ = std::fs::remove_dir_all(&out);
}
