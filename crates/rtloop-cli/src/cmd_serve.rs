//! `rtloop serve`: a FieldTrip buffer server on an rtloop stream.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rtloop_fieldtrip::polling::Polling;
use rtloop_fieldtrip::{Buffer, BufferConfig, ConfigError, Server, ServerConfig};

use crate::Global;

/// Options of `rtloop serve` (its help text is on `Command::Serve`).
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// TCP address to listen on. Loopback only by default; --bind 0.0.0.0:1972 opens it to
    /// the network (the protocol has no authentication). Port 0 picks a free port.
    #[arg(
        long,
        visible_alias = "tcp",
        default_value = "127.0.0.1:1972",
        value_name = "HOST:PORT"
    )]
    pub bind: String,
    /// Do not listen on TCP (only on --unix).
    #[arg(long)]
    pub no_tcp: bool,
    /// Also listen on this UNIX-domain socket path.
    #[arg(long, value_name = "PATH")]
    pub unix: Option<PathBuf>,
    /// The stream to serve (shared memory /dev/shm/rtloop-NAME).
    #[arg(long, default_value = "fieldtrip", value_name = "NAME")]
    pub stream: String,
    /// Samples kept (the reference keeps 600000); rounded up so the data is a whole number
    /// of memory pages (for example 100 keeps 1024 samples of 4 bytes).
    #[arg(long, default_value_t = 600_000)]
    pub capacity: u64,
    /// Most bytes of samples kept; the capacity shrinks to fit (the reference: 512 MiB).
    #[arg(long, default_value_t = 512 << 20)]
    pub max_bytes: u64,
    /// Events kept (the reference keeps 100).
    #[arg(long, default_value_t = 1024)]
    pub events: u64,
    /// Largest request accepted, in bytes; a larger one gets the error reply of its kind
    /// and the connection is closed, before anything is allocated for it.
    #[arg(long, default_value_t = 1 << 30)]
    pub max_message: u64,
    /// Most clients connected at once. When all places are taken, a new client gets the
    /// place of the connection stalled longest mid-message, or else idle longest.
    #[arg(long, default_value_t = 256)]
    pub max_clients: u64,
    /// Seconds a whole message may take to arrive, from its first byte; a slower client
    /// (stalled, or sending a byte at a time) is disconnected. Between messages a client may
    /// stay idle (until its place is needed).
    #[arg(long, default_value_t = 10.0, value_parser = crate::cmd_demo::seconds)]
    pub message_timeout: f64,
    /// MiB that messages being received may hold, over all clients together; a message that
    /// would go beyond gets the error reply of its kind and its connection is closed, before
    /// anything is allocated for it.
    #[arg(long, default_value_t = 2048)]
    pub memory_mb: u64,
    /// How each connection waits for its next request. `adaptive` (default): a client that
    /// sends its next request soon after each reply (a request/response loop) is polled for
    /// instead of slept on, and while one is, the server holds /dev/cpu_dma_latency at 0 so
    /// the client's own wake-up is fast too; a client that pauses is slept on again, and an
    /// idle server holds nothing. `off`: sleep at once, as the reference server does. A
    /// number: poll this many microseconds after every reply, whatever the client does.
    #[arg(long, default_value = "adaptive", value_parser = parse_polling)]
    pub poll: Polling,
    /// With `--poll adaptive`, do not hold /dev/cpu_dma_latency (PM QoS) while a client loops.
    #[arg(long)]
    pub no_pm_qos: bool,
    /// Stop after this many seconds.
    #[arg(long, value_parser = crate::cmd_demo::seconds)]
    pub duration: Option<f64>,
    /// Keep the stream a PUT_HDR created when the server exits (it is removed by default).
    #[arg(long)]
    pub keep: bool,
}

/// Run the server.
pub fn run(a: &ServeArgs, g: &Global) -> Result<()> {
    rtloop_stream::validate_name(&a.stream).with_context(|| format!("--stream {:?}", a.stream))?;
    let mut bcfg = BufferConfig::new(&a.stream);
    bcfg.capacity = a.capacity;
    bcfg.max_bytes = a.max_bytes;
    bcfg.events = a.events;
    bcfg.remove_on_drop = !a.keep;
    let scfg = ServerConfig {
        tcp: (!a.no_tcp).then(|| a.bind.clone()),
        unix: a.unix.clone(),
        max_message: usize::try_from(a.max_message).unwrap_or(usize::MAX),
        max_clients: usize::try_from(a.max_clients).unwrap_or(usize::MAX),
        message_timeout: Duration::from_secs_f64(a.message_timeout),
        memory_budget: usize::try_from(a.memory_mb)
            .unwrap_or(usize::MAX)
            .saturating_mul(1 << 20),
        polling: match a.poll {
            Polling::Adaptive { .. } => Polling::Adaptive {
                pm_qos: !a.no_pm_qos,
            },
            p => p,
        },
    };
    // the library's limits, said with this command's option names
    bcfg.validate()
        .and_then(|()| scfg.validate())
        .map_err(|e| anyhow::Error::new(e.clone()).context(option_of(&e)))?;
    let buffer = Arc::new(Buffer::new(bcfg));
    let server = Server::start(buffer.clone(), scfg)?;
    // Ctrl-C and SIGTERM stop the server cleanly from the moment it says it listens
    let stop = stop_on_signal();
    let tcp = server
        .tcp_addr()
        .map_or_else(|| "-".to_owned(), |s| s.to_string());
    let unix = server
        .unix_path()
        .map_or_else(|| "-".to_owned(), |p| p.display().to_string());
    if g.json {
        println!(
            "{}",
            serde_json::json!({"event": "listening", "tcp": tcp, "unix": unix, "stream": a.stream})
        );
    } else {
        println!("listening tcp={tcp} unix={unix} stream={}", a.stream);
    }
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    wait_until(&stop, a.duration);
    tracing::info!("stopping: {} clients connected", server.clients());
    server.shutdown();
    buffer.close();
    Ok(())
}

/// The option of `rtloop serve` that sets what `e` says is wrong.
fn option_of(e: &ConfigError) -> String {
    match e.setting() {
        "tcp" => "--no-tcp needs --unix PATH".into(),
        "memory_budget" => "--memory-mb".into(),
        s => format!("--{}", s.replace('_', "-")),
    }
}

pub(crate) fn parse_polling(s: &str) -> Result<Polling, String> {
    s.parse()
}

/// A flag Ctrl-C and SIGTERM set from now on (install it before saying "listening", so a
/// signal sent on that line stops the command cleanly instead of killing it).
pub(crate) fn stop_on_signal() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    // Ordering: a flag with nothing published through it: Relaxed.
    let _ = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed));
    stop
}

/// Block until `stop` is set (Ctrl-C, SIGTERM) or `seconds` have passed: what a server
/// command does once it listens.
pub(crate) fn wait_until(stop: &AtomicBool, seconds: Option<f64>) {
    let started = Instant::now();
    // the option parsers bound the seconds; a caller that did not is waited on for ever
    let limit = seconds.and_then(|s| Duration::try_from_secs_f64(s).ok());
    while !stop.load(Ordering::Relaxed) && limit.is_none_or(|l| started.elapsed() < l) {
        std::thread::sleep(Duration::from_millis(50));
    }
}
