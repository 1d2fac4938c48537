//! The FieldTrip benchmark (`rtloop bench fieldtrip`): the FieldTrip FAQ's buffer benchmark
//! ("How fast is the FieldTrip buffer?") against rtloop's server as `rtloop serve` runs it,
//! in a process of its own ([`ServerRole`]) — samples/s written and read for the FAQ's
//! channels x samples blocks, and the time per write over block sizes 1..1000 — over TCP,
//! over the UNIX socket and in-process (the FAQ's "dma": no socket).
//!
//! The reference, measured in the same run with the same client and the same round trips, is
//! [`rtloop_peers::fieldtrip_reference`]: a server that does what FieldTrip's C server does
//! per request, with TCP_NODELAY. The client never polls, as FieldTrip's C client does not:
//! what rtloop gains comes from the server alone.
//!
//! "Samples" are counted as the FAQ counts them: channel values (float32) per second.

use std::fmt::Write as _;
use std::io::BufReader;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtloop_fieldtrip::polling::Polling;
use rtloop_fieldtrip::{Buffer, BufferConfig, Client, Server, ServerConfig};
use rtloop_metrics::{fmt_ns, LatencyHistogram, Summary, Table};
use serde::{Deserialize, Serialize};

use crate::{BenchError, Context, Progress};

type Result<T, E = BenchError> = std::result::Result<T, E>;

/// The FAQ table's blocks (channels, samples), and 512x512, the largest the goal names.
pub const FAQ_BLOCKS: [(u32, u32); 7] = [
    (32, 16),
    (32, 64),
    (32, 256),
    (64, 256),
    (128, 256),
    (256, 256),
    (512, 512),
];
/// rtloop over TCP against the reference, written and read, at every block.
pub const GOAL_RATIO: f64 = 2.0;
/// rtloop's reads against the limit (a bare server moving the same bytes), every block.
pub const LIMIT_GOAL: f64 = 0.9;
/// The FAQ's best in-process ("dma") figure: 8,894,464 values/s (PowerBook G4, 64x256).
pub const FAQ_BEST_DMA: f64 = 8_894_464.0;
const FLOAT32: u32 = 9;

/// What to run.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Short runs (smoke tests): 0.02 s per cell in short turns and 1 to 100 latency
    /// rounds per size, none unrecorded; every row is there, the figures are rough.
    pub quick: bool,
    /// Seconds per cell of the throughput table.
    pub seconds: f64,
    /// Transports to measure: tcp, unix, inproc.
    pub transports: Vec<String>,
    /// Also measure writes with a new connection per request (the FAQ's "tcp stateless").
    pub stateless: bool,
    /// Channels of the latency-per-write curve (the FAQ's plots use 64).
    pub latency_channels: u32,
    /// Writes timed per block size of the latency curve.
    pub rounds: u32,
    /// How `rtloop serve` waits for requests (its `--poll`: adaptive, off or microseconds).
    pub poll: String,
    /// Leave the reference server out (it is measured over TCP only).
    pub no_reference: bool,
    /// Also measure another FieldTrip server at `HOST:PORT` (FieldTrip's own, say), as
    /// "other tcp"; `HOST:PORT@PID` also counts that process's CPU per request.
    pub other: Option<String>,
    /// Write results.json and PNG plots into this directory.
    pub out: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            quick: false,
            seconds: 1.0,
            transports: vec!["tcp".into(), "unix".into(), "inproc".into()],
            stateless: false,
            latency_channels: 64,
            rounds: 2000,
            poll: "adaptive".into(),
            no_reference: false,
            other: None,
            out: None,
        }
    }
}

/// One transport's way in: a client factory.
enum Target {
    /// A server at an address, and the process it runs in (its CPU is counted) if known.
    Socket(String, Option<u32>),
    InProcess(Arc<Buffer>),
}

impl Target {
    fn client(&self) -> Result<Client> {
        Ok(match self {
            Target::Socket(a, _) => Client::connect(a)?,
            Target::InProcess(b) => Client::in_process(b.clone()),
        })
    }
}

/// The FieldTrip server the benchmark measures, in a process of its own: what `rtloop serve
/// --bind 127.0.0.1:0 --unix UNIX --stream STREAM --poll POLL` runs (the server with `rtloop
/// serve`'s defaults, the stream removed at the end), until its stdin closes. The same process
/// runs the limit (TCP and `LIMIT_UNIX`); with `reference_only` the process runs the reference
/// server alone (its accept loop wakes every 1 ms, which must not count against the others'
/// CPU). Every server measured lives outside the client's process and its CPU is counted.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerRole {
    /// The stream the buffer is.
    pub stream: String,
    /// The UNIX socket to listen on (TCP listens on a free port of 127.0.0.1).
    pub unix: PathBuf,
    /// How connections wait for requests (`rtloop serve --poll`).
    pub poll: String,
    /// The limit's UNIX socket.
    pub limit_unix: PathBuf,
    /// Run only the reference server.
    #[serde(default)]
    pub reference_only: bool,
}

impl rtloop_launch::ChildRole for ServerRole {
    const NAME: &'static str = "ft-bench-server";
}

rtloop_launch::register_role!(ServerRole, server_role);

/// Where a [`ServerRole`] serves: what it offers when it says it is ready.
#[derive(Debug, Default, Serialize, Deserialize)]
struct ServerOffer {
    /// rtloop's server over TCP.
    tcp: Option<String>,
    /// rtloop's server's UNIX socket.
    unix: Option<String>,
    /// The limit over TCP.
    limit_tcp: Option<String>,
    /// The limit's UNIX socket (`unix:PATH`).
    limit_unix: Option<String>,
    /// The reference server (with `reference_only`, alone).
    reference: Option<String>,
}

/// Run [`ServerRole`]: says it is ready with where it serves ([`ServerOffer`]: rtloop's
/// server and the limit, or only the reference with `reference_only`), serves until stdin
/// closes.
pub fn server_role(role: &ServerRole) -> Result<()> {
    if role.reference_only {
        let reference = rtloop_peers::fieldtrip_reference::ReferenceServer::start()
            .context("cannot start the reference server")?;
        rtloop_launch::ready_with(&ServerOffer {
            reference: Some(reference.addr().to_string()),
            ..ServerOffer::default()
        })?;
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        return Ok(());
    }
    let polling: Polling = role
        .poll
        .parse()
        .map_err(|e| BenchError::config("poll", format!("{:?}", role.poll), e))?;
    let mut bcfg = BufferConfig::new(&role.stream);
    bcfg.remove_on_drop = true;
    let buffer = Arc::new(Buffer::new(bcfg));
    let server = Server::start(
        buffer.clone(),
        ServerConfig {
            tcp: Some("127.0.0.1:0".into()),
            unix: Some(role.unix.clone()),
            polling,
            ..ServerConfig::default()
        },
    )?;
    let tcp = server.tcp_addr().map(|a| a.to_string());
    let unix = server.unix_path().map(|p| p.display().to_string());
    let limit = rtloop_peers::fieldtrip_limit::LimitServer::start(&role.limit_unix, polling)
        .context("cannot start the limit server")?;
    rtloop_launch::ready_with(&ServerOffer {
        tcp,
        unix,
        limit_tcp: Some(limit.tcp_addr().to_string()),
        limit_unix: Some(limit.unix_addr().to_string()),
        reference: None,
    })?;
    // the benchmark closes our stdin when it is done (or dies)
    let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
    server.shutdown();
    buffer.close();
    drop(limit);
    Ok(())
}

/// A server process ([`ServerRole`]), stopped on drop.
struct ServerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Where it serves.
    offer: ServerOffer,
    dir: PathBuf,
}

impl ServerProcess {
    fn start(stream: &str, poll: &str, reference_only: bool) -> Result<ServerProcess> {
        let dir = std::env::temp_dir().join(format!(
            "rtloop-ftbench-{}{}",
            std::process::id(),
            if reference_only { "-ref" } else { "" }
        ));
        std::fs::create_dir_all(&dir)?;
        let role = ServerRole {
            stream: stream.to_owned(),
            unix: dir.join("ft.sock"),
            poll: poll.to_owned(),
            limit_unix: dir.join("limit.sock"),
            reference_only,
        };
        let mut child = rtloop_launch::command(&role)?
            // as `rtloop serve --log-level error`
            .env("RTLOOP_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start the FieldTrip server")?;
        let stdin = child.stdin.take();
        let mut out = BufReader::new(child.stdout.take().context("server stdout")?);
        let offer =
            rtloop_launch::wait_ready(<ServerRole as rtloop_launch::ChildRole>::NAME, &mut out);
        let mut p = ServerProcess {
            child,
            stdin,
            offer: ServerOffer::default(),
            dir,
        };
        // (dropped on an error: the server is stopped and its directory removed)
        p.offer = offer?;
        let want: &[&str] = if reference_only {
            &["reference"]
        } else {
            &["tcp", "unix", "limit_tcp", "limit_unix"]
        };
        for k in want {
            p.field(k)?;
        }
        Ok(p)
    }

    /// Where it serves `what` (a field of its [`ServerOffer`]).
    fn field(&self, what: &str) -> Result<String> {
        let o = &self.offer;
        match what {
            "tcp" => o.tcp.clone(),
            "unix" => o.unix.clone(),
            "limit_tcp" => o.limit_tcp.clone(),
            "limit_unix" => o.limit_unix.clone(),
            _ => o.reference.clone(),
        }
        .ok_or_else(|| BenchError::Child {
            child: "the FieldTrip server".into(),
            problem: format!("said it was ready without {what}: {o:?}"),
        })
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // its stdin closed: the server shuts down and removes its stream
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One transport at one block of the FAQ table.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FaqRow {
    /// The transport ("reference tcp", "tcp", "unix", "inproc").
    pub transport: String,
    /// Channels per block.
    pub channels: u32,
    /// Samples per block.
    pub samples: u32,
    /// Values (channels x samples) per second written, one connection.
    pub write_values_per_s: f64,
    /// Values per second read (GET_DAT of blocks of the same size), one connection.
    pub read_values_per_s: f64,
    /// Values per second written with a new connection per request, if measured.
    pub stateless_write_values_per_s: Option<f64>,
    /// CPU time the server's process used per write, ns (None in-process, or for a server
    /// whose process is not known).
    pub write_cpu_ns_per_request: Option<f64>,
    /// CPU time the server's process used per read, ns.
    pub read_cpu_ns_per_request: Option<f64>,
    /// Writes counted.
    pub write_requests: u64,
    /// Reads counted.
    pub read_requests: u64,
}

/// rtloop over TCP against the reference at one block.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RatioRow {
    /// Channels per block.
    pub channels: u32,
    /// Samples per block.
    pub samples: u32,
    /// rtloop's writes over the reference's.
    pub write_ratio: f64,
    /// rtloop's reads over the reference's.
    pub read_ratio: f64,
    /// The goal for both ratios.
    pub goal: f64,
    /// Both ratios reach the goal.
    pub met: bool,
    /// rtloop's TCP reads over the limit's (a bare server moving the same bytes over TCP).
    pub read_vs_limit_tcp: Option<f64>,
    /// rtloop's UNIX socket reads over the limit's over a UNIX socket.
    pub read_vs_limit_unix: Option<f64>,
    /// The goal for the ratios to the limit.
    pub limit_goal: f64,
    /// rtloop's TCP reads over the other server's (`--other`), if measured.
    pub read_vs_other: Option<f64>,
    /// rtloop's TCP writes over the other server's.
    pub write_vs_other: Option<f64>,
}

/// The time per write at one block size.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LatencyPoint {
    /// The transport.
    pub transport: String,
    /// Channels per block.
    pub channels: u32,
    /// Samples per block.
    pub samples: u32,
    /// Time per PUT_DAT (PUT_OK received).
    pub write: Summary,
}

/// A client that reads the newest 32x16 block every [`PACED_PERIOD`], against one server:
/// what the server's waiting costs when the client does not loop flat out.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PacedRow {
    /// The transport.
    pub transport: String,
    /// Reads made.
    pub requests: u64,
    /// Time per read (GET_DAT round trip).
    pub read: Summary,
    /// CPU the server's process used, as a share of one core.
    pub cpu_share: Option<f64>,
    /// CPU the server's process used per read, ns.
    pub cpu_ns_per_request: Option<f64>,
}

/// How often the paced client asks.
pub const PACED_PERIOD: Duration = Duration::from_micros(200);

/// Reads of the newest 32x16 block, one every [`PACED_PERIOD`] (the client sleeps between
/// them), for `secs` (at least one); the server's CPU is counted over the whole time.
fn paced(target: &Target, name: &str, secs: f64) -> Result<PacedRow> {
    let (ch, s) = (32, 16);
    let mut c = target.client()?;
    c.put_header(ch, 1000.0, FLOAT32, &[])?;
    c.put_data_bytes(ch, FLOAT32, &block(ch, s), true)?;
    let mut out = Vec::new();
    let mut h = LatencyHistogram::new();
    let pid = pid_of(target);
    let mut cpu = None;
    let started = Instant::now();
    let n = with_cpu(pid, &mut cpu, || -> Result<u64> {
        let mut n = 0u64;
        let mut next = Instant::now();
        // at least one read: on a loaded machine a short run's time can be gone before it
        loop {
            let t = Instant::now();
            c.get_data_into(Some((0, s - 1)), &mut out)?;
            h.record(t.elapsed().as_nanos() as u64);
            n += 1;
            next += PACED_PERIOD;
            if started.elapsed().as_secs_f64() >= secs {
                return Ok(n);
            }
            if let Some(d) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
        }
    })?;
    let wall = started.elapsed().as_nanos() as f64;
    Ok(PacedRow {
        transport: name.to_owned(),
        requests: n,
        read: h.summary(),
        cpu_share: cpu.map(|x| x as f64 / wall),
        cpu_ns_per_request: cpu.map(|x| x as f64 / n.max(1) as f64),
    })
}

/// What the FieldTrip benchmark measured.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FieldTripReport {
    /// Seconds per cell of the throughput table.
    pub seconds_per_cell: f64,
    /// `rtloop serve --poll`.
    pub poll: String,
    /// rtloop TCP against the reference, per block.
    pub versus_reference: Vec<RatioRow>,
    /// The FAQ's best in-process figure.
    pub faq_best_dma_values_per_s: f64,
    /// The FAQ table.
    pub faq: Vec<FaqRow>,
    /// The latency-per-write curves.
    pub latency: Vec<LatencyPoint>,
    /// A client reading every 200 µs: time per read and the server's CPU.
    pub paced: Vec<PacedRow>,
    /// Whether the stateless column was measured (the table shows it then).
    #[serde(skip)]
    pub stateless: bool,
    /// Where results.json and the plots were written.
    #[serde(skip)]
    pub out: Option<PathBuf>,
}

fn block(ch: u32, s: u32) -> Vec<u8> {
    (0..ch * s).flat_map(|i| (i as f32).to_ne_bytes()).collect()
}

/// How the targets take turns in a cell: the cell's time is cut into `slices`, and the
/// targets take turns slice by slice, so a change in the machine (the host preempting a vCPU
/// for a while) falls on all of them alike.
#[derive(Debug, Clone, Copy)]
struct Turns {
    /// Seconds each target is counted per cell, over all its slices.
    secs: f64,
    slices: u32,
    /// Pause between turns: longer than `rtloop serve`'s linger, so a server that polls for
    /// a looping client has let go (and released PM QoS) before the next target runs.
    pause: Duration,
    /// Uncounted requests at the start of each turn, seconds. The guest's idle driver
    /// (haltpoll) adapts how long an idle vCPU polls before halting to the recent wake-ups,
    /// so a target that runs right after a busier one would start with the other's fast
    /// wake-ups; each target is counted only once the machine has settled to its own pattern.
    settle: f64,
}

impl Turns {
    fn measured(secs: f64) -> Self {
        Self {
            secs,
            slices: 5,
            pause: Duration::from_millis(50),
            settle: 0.05,
        }
    }

    /// `--quick`: every cell, row and check of a measured run, in a tenth of its time; the
    /// figures are rough (the turns are too short for the machine to settle).
    fn quick() -> Self {
        Self {
            secs: 0.02,
            slices: 2,
            pause: Duration::from_millis(5),
            settle: 0.005,
        }
    }
}

/// One target's connection and counts in one block's cell.
struct Cell {
    client: Client,
    sel: Option<(u32, u32)>,
    writes: (u64, f64),
    reads: (u64, f64),
    /// CPU ns of the server's process during the counted writes and reads.
    write_cpu: Option<u64>,
    read_cpu: Option<u64>,
}

/// CPU time a process has used so far, ns: the sum over its threads' run time
/// (`/proc/PID/task/*/schedstat`, nanosecond resolution; a thread that ended meanwhile drops
/// out, which the benchmark avoids by keeping its connections open through a cell).
fn cpu_ns(pid: u32) -> Option<u64> {
    let mut sum = 0u64;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(t) = t else { continue };
        if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
            sum += s
                .split_whitespace()
                .next()
                .and_then(|x| x.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Some(sum)
}

/// Add the CPU `pid` used while `f` ran to `acc` (nothing if the process is not known).
fn with_cpu<T>(pid: Option<u32>, acc: &mut Option<u64>, f: impl FnOnce() -> T) -> T {
    let before = pid.and_then(cpu_ns);
    let r = f();
    if let (Some(b), Some(a)) = (before, pid.and_then(cpu_ns)) {
        *acc = Some(acc.unwrap_or(0) + a.saturating_sub(b));
    }
    r
}

fn pid_of(t: &Target) -> Option<u32> {
    match t {
        Target::Socket(_, pid) => *pid,
        Target::InProcess(_) => None,
    }
}

/// Run `op` for `secs` (at least once); returns (requests, elapsed). The clock is read after
/// every request: one of the reference's large requests can take a second.
fn timed(secs: f64, mut op: impl FnMut() -> Result<()>) -> Result<(u64, f64)> {
    let t = Instant::now();
    let mut n = 0u64;
    loop {
        op()?;
        n += 1;
        let e = t.elapsed().as_secs_f64();
        if e >= secs {
            return Ok((n, e));
        }
    }
}

/// One block's cells for every target: writes (PUT_DAT, PUT_OK awaited), then reads of the
/// newest block (GET_DAT, as a client following the data does), the targets taking turns.
fn faq_block(
    targets: &[(&str, Target)],
    ch: u32,
    s: u32,
    turns: Turns,
    stateless: bool,
) -> Result<Vec<FaqRow>> {
    let data = block(ch, s);
    let values = f64::from(ch * s);
    let mut cells = Vec::new();
    for (_, target) in targets {
        let mut client = target.client()?;
        client.put_header(ch, 1000.0, FLOAT32, &[])?;
        // warm-up: one write touches the pages of the first block on both sides
        client.put_data_bytes(ch, FLOAT32, &data, true)?;
        cells.push(Cell {
            client,
            sel: None,
            writes: (0, 0.0),
            reads: (0, 0.0),
            write_cpu: None,
            read_cpu: None,
        });
    }
    let slice = turns.secs / f64::from(turns.slices);
    for _ in 0..turns.slices {
        for ((_, target), c) in targets.iter().zip(&mut cells) {
            std::thread::sleep(turns.pause);
            let client = &mut c.client;
            let mut write = || {
                client.put_data_bytes(ch, FLOAT32, &data, true)?;
                Ok(())
            };
            timed(turns.settle, &mut write)?;
            let (n, e) = with_cpu(pid_of(target), &mut c.write_cpu, || {
                timed(slice, &mut write)
            })?;
            c.writes = (c.writes.0 + n, c.writes.1 + e);
        }
    }
    let mut out = Vec::new();
    for c in &mut cells {
        let newest = c.client.get_header()?.def.nsamples;
        c.sel = Some((newest - s, newest - 1));
    }
    for _ in 0..turns.slices {
        for ((name, target), c) in targets.iter().zip(&mut cells) {
            std::thread::sleep(turns.pause);
            let (client, sel) = (&mut c.client, c.sel);
            let mut read = || {
                client.get_data_into(sel, &mut out)?;
                Ok(())
            };
            timed(turns.settle, &mut read)?;
            let (n, e) = with_cpu(pid_of(target), &mut c.read_cpu, || timed(slice, &mut read))?;
            if out.len() != (ch * s * 4) as usize {
                return Err(BenchError::mismatch(
                    format!("{name} {ch}x{s}: GET_DAT bytes"),
                    out.len(),
                    ch * s * 4,
                ));
            }
            c.reads = (c.reads.0 + n, c.reads.1 + e);
        }
    }
    drop(out);
    let mut rows = Vec::new();
    for ((name, target), c) in targets.iter().zip(cells) {
        drop(c.client);
        // only rtloop's stateless mode is measured (FieldTrip's own figures for it are in
        // bench/README.md); in-process has no connection to make
        let stateless_rate = match target {
            Target::Socket(..) if stateless && matches!(*name, "tcp" | "unix") => {
                let (n, e) = timed(turns.secs, || {
                    let mut c = target.client()?;
                    c.put_data_bytes(ch, FLOAT32, &data, true)?;
                    Ok(())
                })?;
                Some(n as f64 * values / e)
            }
            _ => None,
        };
        rows.push(FaqRow {
            transport: (*name).to_owned(),
            channels: ch,
            samples: s,
            write_values_per_s: c.writes.0 as f64 * values / c.writes.1,
            read_values_per_s: c.reads.0 as f64 * values / c.reads.1,
            stateless_write_values_per_s: stateless_rate,
            write_cpu_ns_per_request: c.write_cpu.map(|x| x as f64 / c.writes.0.max(1) as f64),
            read_cpu_ns_per_request: c.read_cpu.map(|x| x as f64 / c.reads.0.max(1) as f64),
            write_requests: c.writes.0,
            read_requests: c.reads.0,
        });
    }
    Ok(rows)
}

/// Time `rounds` writes per block size (after one unrecorded), or as many as fit in `budget`
/// seconds per size (at least 3; `quick`: at least 1, none unrecorded): the reference takes
/// up to 1.7 s per large write (its 16 KiB receive buffer is smaller than a loopback
/// segment), so the quick run's three largest sizes took 11 s of its 19 at least 4 writes each.
fn latency_curve(
    target: &Target,
    name: &str,
    ch: u32,
    rounds: u32,
    budget: f64,
    quick: bool,
) -> Result<Vec<LatencyPoint>> {
    let least = if quick { 1 } else { 3 };
    let mut c = target.client()?;
    c.put_header(ch, 1000.0, FLOAT32, &[])?;
    let mut points = Vec::new();
    for s in [1u32, 2, 5, 10, 20, 50, 100, 200, 500, 1000] {
        let data = block(ch, s);
        let mut h = LatencyHistogram::new();
        if !quick {
            c.put_data_bytes(ch, FLOAT32, &data, true)?;
        }
        let started = Instant::now();
        for _ in 0..rounds {
            let t = Instant::now();
            c.put_data_bytes(ch, FLOAT32, &data, true)?;
            h.record(t.elapsed().as_nanos() as u64);
            if h.len() >= least && started.elapsed().as_secs_f64() > budget {
                break;
            }
        }
        points.push(LatencyPoint {
            transport: name.to_owned(),
            channels: ch,
            samples: s,
            write: h.summary(),
        });
    }
    Ok(points)
}

fn msps(v: f64) -> String {
    format!("{:.2}", v / 1e6)
}

impl Config {
    /// Refuse what the command line's options would refuse, saying what is allowed.
    pub fn validate(&self) -> Result<(), BenchError> {
        use crate::check;
        check::positive("seconds", self.seconds)?;
        if self.transports.is_empty() {
            return Err(BenchError::config(
                "transports",
                "[]",
                "one or more of tcp, unix, inproc",
            ));
        }
        for t in &self.transports {
            check::one_of("transports", t, &["tcp", "unix", "inproc"])?;
        }
        check::range("latency_channels", self.latency_channels, 1, 4096)?;
        check::range("rounds", self.rounds, 10, 1_000_000)?;
        self.poll
            .parse::<Polling>()
            .map_err(|e| BenchError::config("poll", format!("{:?}", self.poll), e.to_string()))?;
        if let Some(o) = &self.other {
            parse_other(o)?;
            if !self.transports.iter().any(|t| t == "tcp") {
                return Err(BenchError::config(
                    "other",
                    format!("{o:?}"),
                    "the other server is measured beside rtloop over TCP; add tcp to transports",
                ));
            }
        }
        Ok(())
    }
}

/// `HOST:PORT` or `HOST:PORT@PID` of `--other`.
fn parse_other(o: &str) -> Result<(String, Option<u32>)> {
    let bad = || {
        BenchError::config(
            "other",
            format!("{o:?}"),
            "HOST:PORT of a FieldTrip server, or HOST:PORT@PID to count its process's CPU",
        )
    };
    let (addr, pid) = match o.split_once('@') {
        Some((a, p)) => (a, Some(p.parse::<u32>().map_err(|_| bad())?)),
        None => (o, None),
    };
    if addr
        .rsplit_once(':')
        .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
    {
        return Err(bad());
    }
    Ok((addr.to_owned(), pid))
}

/// Run the benchmark.
pub fn run(a: &Config, progress: &mut dyn Progress) -> Result<FieldTripReport> {
    a.validate()?;
    let turns = if a.quick {
        Turns::quick()
    } else {
        Turns::measured(a.seconds)
    };
    let secs = turns.secs;
    let rounds = if a.quick { a.rounds.min(100) } else { a.rounds };
    // (`validate` parsed `poll`)
    let stream = format!("ftbench-{}", std::process::id());
    let wants = |t: &str| a.transports.iter().any(|x| x == t);
    let server = if wants("tcp") || wants("unix") {
        Some(ServerProcess::start(&stream, &a.poll, false)?)
    } else {
        None
    };
    let reference = if wants("tcp") && !a.no_reference {
        Some(ServerProcess::start(&stream, &a.poll, true)?)
    } else {
        None
    };
    let other = match &a.other {
        Some(o) => Some(parse_other(o)?),
        None => None,
    };
    let mut targets: Vec<(&str, Target)> = Vec::new();
    if let Some(s) = &server {
        let pid = Some(s.child.id());
        if wants("tcp") {
            if let Some(r) = &reference {
                targets.push((
                    "reference tcp",
                    Target::Socket(r.field("reference")?, Some(r.child.id())),
                ));
            }
            if let Some((addr, opid)) = &other {
                targets.push(("other tcp", Target::Socket(addr.clone(), *opid)));
            }
            targets.push(("limit tcp", Target::Socket(s.field("limit_tcp")?, pid)));
            targets.push(("tcp", Target::Socket(s.field("tcp")?, pid)));
        }
        if wants("unix") {
            targets.push(("limit unix", Target::Socket(s.field("limit_unix")?, pid)));
            targets.push((
                "unix",
                Target::Socket(format!("unix:{}", s.field("unix")?), pid),
            ));
        }
    }
    let inproc_stream = format!("ftbench-inproc-{}", std::process::id());
    if wants("inproc") {
        let mut cfg = BufferConfig::new(&inproc_stream);
        cfg.remove_on_drop = true;
        targets.push(("inproc", Target::InProcess(Arc::new(Buffer::new(cfg)))));
    }
    let cells = (targets.len() * (FAQ_BLOCKS.len() + 2)) as u64;
    let mut done = 0u64;
    let mut faq = Vec::new();
    for (ch, s) in FAQ_BLOCKS {
        progress.step(&format!("cells, now {ch}x{s}"), done, cells);
        faq.extend(faq_block(&targets, ch, s, turns, a.stateless)?);
        done += targets.len() as u64;
    }
    let mut latency = Vec::new();
    for (name, target) in &targets {
        progress.step(&format!("cells, now {name} latency per write"), done, cells);
        latency.extend(latency_curve(
            target,
            name,
            a.latency_channels,
            rounds,
            secs,
            a.quick,
        )?);
        done += 1;
    }
    let mut paced_rows = Vec::new();
    for (name, target) in &targets {
        progress.step(&format!("cells, now {name} read every 200 µs"), done, cells);
        if let Target::Socket(..) = target {
            std::thread::sleep(turns.pause);
            paced_rows.push(paced(target, name, secs)?);
        }
        done += 1;
    }
    drop(targets);
    drop(server);
    drop(reference);
    let versus_reference = FAQ_BLOCKS
        .iter()
        .filter_map(|&(ch, s)| {
            let at = |t: &str| {
                faq.iter()
                    .find(|r| r.transport == t && r.channels == ch && r.samples == s)
            };
            let read = |a: &str, b: &str| Some(at(a)?.read_values_per_s / at(b)?.read_values_per_s);
            let (ours, theirs) = (at("tcp")?, at("reference tcp")?);
            let write_ratio = ours.write_values_per_s / theirs.write_values_per_s;
            let read_ratio = ours.read_values_per_s / theirs.read_values_per_s;
            Some(RatioRow {
                channels: ch,
                samples: s,
                write_ratio,
                read_ratio,
                goal: GOAL_RATIO,
                met: write_ratio >= GOAL_RATIO && read_ratio >= GOAL_RATIO,
                read_vs_limit_tcp: read("tcp", "limit tcp"),
                read_vs_limit_unix: read("unix", "limit unix"),
                limit_goal: LIMIT_GOAL,
                read_vs_other: read("tcp", "other tcp"),
                write_vs_other: at("other tcp")
                    .map(|o| ours.write_values_per_s / o.write_values_per_s),
            })
        })
        .collect();
    let report = FieldTripReport {
        seconds_per_cell: secs,
        poll: a.poll.clone(),
        versus_reference,
        faq_best_dma_values_per_s: FAQ_BEST_DMA,
        faq,
        latency,
        paced: paced_rows,
        stateless: a.stateless,
        out: a.out.clone(),
    };
    if let Some(dir) = &a.out {
        write_outputs(dir, &report)?;
    }
    Ok(report)
}

impl FieldTripReport {
    /// The tables the command prints.
    #[must_use]
    pub fn table(&self) -> String {
        let (r, stateless) = (self, self.stateless);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "FieldTrip FAQ table: float32 values (channels x samples) per second, in millions"
        );
        let mut head = vec![
            "transport",
            "chans x samples",
            "values/block",
            "write M/s",
            "read M/s",
        ];
        if stateless {
            head.push("write, new conn. each M/s");
        }
        head.push("write / FAQ best dma");
        head.push("server CPU per write / read");
        let mut t = Table::new(&head);
        for row in &r.faq {
            let mut cells = vec![
                row.transport.clone(),
                format!("{}x{}", row.channels, row.samples),
                (row.channels * row.samples).to_string(),
                msps(row.write_values_per_s),
                msps(row.read_values_per_s),
            ];
            if stateless {
                cells.push(row.stateless_write_values_per_s.map_or("-".into(), msps));
            }
            cells.push(format!(
                "{:.1}x",
                row.write_values_per_s / r.faq_best_dma_values_per_s
            ));
            let cpu = |x: Option<f64>| x.map_or("-".to_owned(), |ns| fmt_ns(ns as u64));
            cells.push(format!(
                "{} / {}",
                cpu(row.write_cpu_ns_per_request),
                cpu(row.read_cpu_ns_per_request)
            ));
            t.row(&cells);
        }
        out += &t.render();
        out.push('\n');
        let _ = writeln!(
            out,
            "(FAQ best in-process \"dma\": {:.2} M/s)\n",
            r.faq_best_dma_values_per_s / 1e6
        );
        if !r.versus_reference.is_empty() {
            let _ = writeln!(
 out,
            "rtloop serve over TCP (--poll {}) against the reference (a server doing what FieldTrip's C server does per request, TCP_NODELAY), against the limit (a bare server moving the same bytes, waiting as rtloop's does), and against --other if given; same client, same run",
            r.poll
        );
            let mut t = Table::new(&[
                "chans x samples",
                "write ratio",
                "read ratio",
                "goal",
                "met",
                "read / limit tcp",
                "read / limit unix",
                "limit goal",
                "write / other",
                "read / other",
            ]);
            let ratio = |x: Option<f64>| x.map_or("-".to_owned(), |v| format!("{v:.2}x"));
            for x in &r.versus_reference {
                t.row(&[
                    format!("{}x{}", x.channels, x.samples),
                    format!("{:.2}x", x.write_ratio),
                    format!("{:.2}x", x.read_ratio),
                    format!(">= {:.1}x both", x.goal),
                    if x.met { "yes" } else { "no" }.into(),
                    ratio(x.read_vs_limit_tcp),
                    ratio(x.read_vs_limit_unix),
                    format!(">= {:.1}x", x.limit_goal),
                    ratio(x.write_vs_other),
                    ratio(x.read_vs_other),
                ]);
            }
            out += &t.render();
            out += "\n\n";
        }
        if let Some(first) = r.latency.first() {
            let _ = writeln!(
                out,
                "Time per PUT_DAT (round trip, PUT_OK received), {} channels float32",
                first.channels
            );
        }
        let mut t = Table::new(&[
            "transport",
            "samples",
            "p50",
            "p99",
            "p99.9",
            "max",
            "values/s at p50",
        ]);
        for p in &r.latency {
            t.row(&[
                p.transport.clone(),
                p.samples.to_string(),
                fmt_ns(p.write.p50_ns),
                fmt_ns(p.write.p99_ns),
                fmt_ns(p.write.p999_ns),
                fmt_ns(p.write.max_ns),
                format!(
                    "{:.3e}",
                    f64::from(p.channels * p.samples) / (p.write.p50_ns.max(1) as f64 * 1e-9)
                ),
            ]);
        }
        out += &t.render();
        out.push('\n');
        if !r.paced.is_empty() {
            let _ = writeln!(
                out,
                "\nA client reading the newest 32x16 block every {} µs: the server's CPU",
                PACED_PERIOD.as_micros()
            );
            let mut t = Table::new(&[
                "transport",
                "reads",
                "read p50",
                "read p99",
                "server CPU, share of a core",
                "server CPU per read",
            ]);
            for p in &r.paced {
                t.row(&[
                    p.transport.clone(),
                    p.requests.to_string(),
                    fmt_ns(p.read.p50_ns),
                    fmt_ns(p.read.p99_ns),
                    p.cpu_share
                        .map_or("-".into(), |x| format!("{:.0} %", x * 100.0)),
                    p.cpu_ns_per_request
                        .map_or("-".into(), |x| fmt_ns(x as u64)),
                ]);
            }
            out += &t.render();
            out.push('\n');
        }
        if let Some(dir) = &self.out {
            let _ = writeln!(
                out,
                "\nwrote {}/results.json, faq_throughput.png, write_latency.png",
                dir.display()
            );
        }
        out
    }
}

fn write_outputs(dir: &std::path::Path, r: &FieldTripReport) -> Result<()> {
    crate::write_results(dir, r)?;
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    // each transport once, in the order measured (the rows interleave them)
    let mut transports: Vec<&str> = Vec::new();
    for x in &r.faq {
        if !transports.contains(&x.transport.as_str()) {
            transports.push(&x.transport);
        }
    }
    for t in &transports {
        let rows: Vec<&FaqRow> = r.faq.iter().filter(|x| x.transport == *t).collect();
        series.push((
            format!("{t} write"),
            rows.iter()
                .map(|x| (f64::from(x.channels * x.samples), x.write_values_per_s))
                .collect(),
        ));
        series.push((
            format!("{t} read"),
            rows.iter()
                .map(|x| (f64::from(x.channels * x.samples), x.read_values_per_s))
                .collect(),
        ));
    }
    loglog(
        &dir.join("faq_throughput.png"),
        "FieldTrip buffer throughput (FAQ blocks, float32)",
        "values per block (channels x samples)",
        "values per second",
        &series,
    )?;
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for t in &transports {
        series.push((
            format!("{t} p50"),
            r.latency
                .iter()
                .filter(|p| p.transport == *t)
                .map(|p| (f64::from(p.samples), p.write.p50_ns as f64 / 1e3))
                .collect(),
        ));
    }
    loglog(
        &dir.join("write_latency.png"),
        "Time per PUT_DAT",
        "samples per block",
        "microseconds (p50)",
        &series,
    )
}

/// A log-log chart of named series.
fn loglog(
    path: &std::path::Path,
    title: &str,
    x: &str,
    y: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<()> {
    let refs: Vec<(&str, &[(f64, f64)])> = series
        .iter()
        .map(|(n, p)| (n.as_str(), p.as_slice()))
        .collect();
    rtloop_metrics::charts::loglog_png(path, title, x, y, &refs, &[])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_takes_host_port_and_an_optional_pid_and_says_what_is_wrong() {
        assert_eq!(
            parse_other("127.0.0.1:1972").unwrap(),
            ("127.0.0.1:1972".to_owned(), None)
        );
        assert_eq!(
            parse_other("localhost:1972@42").unwrap(),
            ("localhost:1972".to_owned(), Some(42))
        );
        for bad in ["1972", ":1972", "host:port", "127.0.0.1:1972@me"] {
            let e = parse_other(bad).unwrap_err().to_string();
            assert!(e.contains("HOST:PORT"), "{bad}: {e}");
        }
        let c = Config {
            other: Some("127.0.0.1:1972".into()),
            transports: vec!["unix".into()],
            ..Config::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("add tcp"), "{e}");
    }

    /// The CPU a process used is read from its threads, and grows as it works.
    #[test]
    fn cpu_of_a_process_is_counted_over_its_threads() {
        let me = std::process::id();
        let before = cpu_ns(me).unwrap();
        let (spun, wait_spun) = std::sync::mpsc::channel();
        let (end, wait_end) = std::sync::mpsc::channel::<()>();
        let mut acc = None;
        // the thread stays alive until measured: an ended thread's time drops out
        let t = with_cpu(Some(me), &mut acc, || {
            let t = std::thread::spawn(move || {
                let until = Instant::now() + Duration::from_millis(30);
                let mut x = 0u64;
                while Instant::now() < until {
                    x = x.wrapping_add(1);
                }
                spun.send(x).unwrap();
                let _ = wait_end.recv();
            });
            assert!(wait_spun.recv().unwrap() > 0);
            t
        });
        assert!(cpu_ns(me).unwrap() > before);
        assert!(acc.unwrap() > 0, "a thread that ran 30 ms is counted");
        drop(end);
        t.join().unwrap();
        assert!(cpu_ns(u32::MAX).is_none(), "no such process");
    }
}
