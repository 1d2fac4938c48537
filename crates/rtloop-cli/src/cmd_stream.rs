//! `rtloop stream create | list | info | monitor | remove`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use rtloop_metrics::Table;
use rtloop_stream::{DType, Liveness, Stream, StreamConfig, StreamState, StreamStats};
use serde_json::json;

use crate::Global;

/// Stream commands.
#[derive(Debug, clap::Subcommand)]
pub enum StreamCommand {
    /// Create a stream (owner-only shared memory in /dev/shm, or $RTLOOP_SHM_DIR).
    Create(CreateArgs),
    /// List streams with their occupancy (PercentUsed), readers, losses and state: live and
    /// waiting streams; `--all` adds ended ones. Streams whose writer died are reclaimed.
    List(ListArgs),
    /// Give back the memory of ended streams nobody keeps (a dead writer's, a half-made
    /// file) and say what was freed.
    Gc,
    /// Everything about one stream: shape, channels, counters, readers.
    Info {
        /// Stream name.
        name: String,
    },
    /// Watch streams live: rate, occupancy, high-water mark, losses, writer liveness.
    Monitor(MonitorArgs),
    /// Remove streams (processes that have them open keep their mapping until they close).
    Remove {
        /// Stream names.
        #[arg(required = true)]
        names: Vec<String>,
    },
}

/// Options of `rtloop stream create`.
#[derive(Debug, Clone, clap::Args)]
pub struct CreateArgs {
    /// Stream name: 1 to 64 of A-Z a-z 0-9 _ - . (not starting with '.').
    pub name: String,
    /// Value type of every channel: int8..int64, uint8..uint64, float32, float64.
    #[arg(long, default_value = "float32", value_parser = parse_dtype)]
    pub dtype: DType,
    /// Channels per sample.
    #[arg(long)]
    pub channels: usize,
    /// Nominal sample rate in Hz (0 = irregular).
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Samples kept (rounded up to whole pages of shared memory); the same default as
    /// Python's `Stream.create`.
    #[arg(long, default_value_t = 65_536)]
    pub capacity: u64,
    /// Events kept.
    #[arg(long, default_value_t = 1024)]
    pub event_capacity: u64,
    /// Replace a stream of that name that nobody writes any more (its writer closed or
    /// died, as a crashed run leaves it); a stream with a live writer is never replaced.
    #[arg(long)]
    pub replace: bool,
    /// Keep the name after the writer closes (by default a clean close removes it; see
    /// `rtloop stream gc`).
    #[arg(long)]
    pub keep: bool,
    /// Channel names, comma-separated (one per channel).
    #[arg(long, value_delimiter = ',')]
    pub ch_names: Vec<String>,
    /// Channel units, comma-separated (one per channel).
    #[arg(long, value_delimiter = ',')]
    pub units: Vec<String>,
    /// Channel types, comma-separated: one per channel, or one for every channel
    /// (eeg, ecog, seeg, stim, misc, ...).
    #[arg(long, value_delimiter = ',')]
    pub ch_types: Vec<String>,
    /// What the stream carries, as LSL's stream type (EEG, Markers, ...).
    #[arg(long = "type", value_name = "TYPE", default_value = "")]
    pub content_type: String,
    /// Who produces it: a serial number or rig name that stays the same across restarts.
    #[arg(long, default_value = "")]
    pub source_id: String,
    /// Free-form description (a JSON object for Python's `Stream.desc`).
    #[arg(long, default_value = "")]
    pub desc: String,
}

/// Options of `rtloop stream list`.
#[derive(Debug, Clone, clap::Args)]
pub struct ListArgs {
    /// Also show ended streams: closed (kept), dead and damaged ones.
    #[arg(long)]
    pub all: bool,
    /// Also show streams used inside rtloop's tools (the lab's transport, ...).
    #[arg(long)]
    pub internal: bool,
    /// Only streams of this content type (LSL's stream type: EEG, Markers, ...).
    #[arg(long = "type", value_name = "TYPE")]
    pub content_type: Option<String>,
}

/// Options of `rtloop stream monitor`.
#[derive(Debug, Clone, clap::Args)]
pub struct MonitorArgs {
    /// Stream names.
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Milliseconds between samples of the counters.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub interval_ms: u64,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Write occupancy (PercentUsed) over time to this PNG at the end.
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    s.parse::<DType>().map_err(|e| e.to_string())
}

/// Run a stream command.
pub fn run(c: StreamCommand, g: &Global) -> anyhow::Result<()> {
    match c {
        StreamCommand::Create(a) => create(&a, g),
        StreamCommand::List(a) => list(&a, g),
        StreamCommand::Gc => gc(g),
        StreamCommand::Info { name } => info(&name, g),
        StreamCommand::Monitor(a) => monitor(&a, g),
        StreamCommand::Remove { names } => {
            // every name is tried: one that cannot go does not keep the others
            let (mut removed, mut failed) = (Vec::new(), Vec::new());
            for n in &names {
                match Stream::remove(n) {
                    Ok(()) => {
                        if !g.json {
                            println!("removed {n}");
                        }
                        removed.push(n.clone());
                    }
                    Err(e) => {
                        eprintln!("rtloop: cannot remove {n:?}: {e}");
                        failed.push(json!({ "name": n, "error": e.to_string() }));
                    }
                }
            }
            if g.json {
                println!("{}", json!({ "removed": removed, "failed": failed }));
            }
            if failed.is_empty() {
                Ok(())
            } else {
                anyhow::bail!(
                    "{} of {} streams not removed (each one's reason is above)",
                    failed.len(),
                    names.len()
                )
            }
        }
    }
}

fn create(a: &CreateArgs, g: &Global) -> anyhow::Result<()> {
    let mut cfg = StreamConfig::new(a.dtype, a.channels, a.rate, a.capacity);
    cfg.event_capacity = a.event_capacity;
    cfg.ch_names.clone_from(&a.ch_names);
    cfg.ch_units.clone_from(&a.units);
    cfg.ch_types = if a.ch_types.len() == 1 && a.channels > 1 {
        vec![a.ch_types[0].clone(); a.channels]
    } else {
        a.ch_types.clone()
    };
    cfg.content_type.clone_from(&a.content_type);
    cfg.source_id.clone_from(&a.source_id);
    cfg.description.clone_from(&a.desc);
    cfg.keep = a.keep;
    let s = if a.replace {
        Stream::create_replacing(&a.name, &cfg)?
    } else {
        Stream::create(&a.name, &cfg)?
    };
    if g.json {
        println!("{}", info_json(&s));
    } else {
        let i = s.info();
        println!(
            "created {} ({} x {}, {} Hz, capacity {} samples = {}, {})",
            i.name,
            i.n_channels,
            i.dtype,
            i.nominal_rate,
            i.capacity,
            human_bytes(i.file_bytes),
            i.path.display()
        );
    }
    Ok(())
}

/// `pid 123 (alive, 3 ms since commit)`, `dead (pid 5)`, ...
#[must_use]
pub fn liveness_text(l: Liveness) -> String {
    match l {
        Liveness::NoWriter => "none yet".into(),
        Liveness::Closed => "closed".into(),
        Liveness::Dead { pid } => format!("DEAD (pid {pid})"),
        Liveness::Active {
            pid,
            since_heartbeat_ns,
        } => {
            format!(
                "pid {pid}, {} since commit",
                rtloop_metrics::fmt_ns(since_heartbeat_ns)
            )
        }
    }
}

fn liveness_json(l: Liveness) -> serde_json::Value {
    match l {
        Liveness::NoWriter => json!({ "state": "none" }),
        Liveness::Closed => json!({ "state": "closed" }),
        Liveness::Dead { pid } => json!({ "state": "dead", "pid": pid }),
        Liveness::Active {
            pid,
            since_heartbeat_ns,
        } => {
            json!({ "state": "active", "pid": pid, "since_heartbeat_ns": since_heartbeat_ns })
        }
    }
}

fn stats_json(st: &StreamStats) -> serde_json::Value {
    json!({
        "written": st.written,
        "capacity": st.capacity,
        "occupancy": st.occupancy,
        "percent_used": st.percent_used,
        "high_water": st.high_water,
        "high_water_percent": st.high_water as f64 * 100.0 / st.capacity as f64,
        "overruns": st.overruns,
        "lost_samples": st.lost_samples,
        "events_written": st.events_written,
        "commits": st.commits,
        "writer": liveness_json(st.writer),
        "readers": st.readers.iter().map(|r| json!({
            "slot": r.slot, "pid": r.pid, "mode": format!("{:?}", r.mode).to_lowercase(),
            "cursor": r.cursor, "lag": r.lag, "lost": r.lost, "overruns": r.overruns, "alive": r.alive,
        })).collect::<Vec<_>>(),
    })
}

fn info_json(s: &Stream) -> serde_json::Value {
    let i = s.info();
    json!({
        "name": i.name,
        "dtype": i.dtype.name(),
        "n_channels": i.n_channels,
        "nominal_rate": i.nominal_rate,
        "capacity": i.capacity,
        "event_capacity": i.event_capacity,
        "sample_bytes": i.sample_bytes,
        "file_bytes": i.file_bytes,
        "path": i.path,
        "created_unix_ns": i.created_unix_ns,
        "ch_names": i.ch_names,
        "ch_units": i.ch_units,
        "ch_types": i.ch_types,
        "content_type": i.content_type,
        "source_id": i.source_id,
        "description": i.description,
        "creator_pid": i.creator_pid,
        "stats": stats_json(&s.stats()),
    })
}

/// `1.5 MiB`.
#[must_use]
pub fn human_bytes(b: u64) -> String {
    let f = b as f64;
    if b < 1 << 10 {
        format!("{b} B")
    } else if b < 1 << 20 {
        format!("{:.1} KiB", f / 1024.0)
    } else if b < 1 << 30 {
        format!("{:.1} MiB", f / 1048576.0)
    } else {
        format!("{:.2} GiB", f / 1073741824.0)
    }
}

fn list(a: &ListArgs, g: &Global) -> anyhow::Result<()> {
    let (found, freed) = Stream::survey(true);
    report_freed(&freed);
    let mut rows = Vec::new();
    let mut table = Table::new(&[
        "name", "type", "dtype", "ch", "rate", "capacity", "written", "used %", "high %",
        "readers", "lost", "state", "writer",
    ]);
    let (mut hidden_ended, mut hidden_internal) = (0, 0);
    for e in &found {
        if e.internal() && !a.internal {
            hidden_internal += 1;
            continue;
        }
        if e.state.ended() && !a.all {
            hidden_ended += 1;
            continue;
        }
        if let Some(t) = &a.content_type {
            if e.stream
                .as_ref()
                .is_none_or(|s| &s.info().content_type != t)
            {
                continue;
            }
        }
        match &e.stream {
            // a stream whose counters cannot be right shows none of them
            Some(s) if !matches!(e.state, StreamState::Damaged { .. }) => {
                let (i, st) = (s.info(), s.stats());
                table.row(&[
                    i.name.clone(),
                    i.content_type.clone(),
                    i.dtype.to_string(),
                    i.n_channels.to_string(),
                    format!("{}", i.nominal_rate),
                    i.capacity.to_string(),
                    st.written.to_string(),
                    format!("{:.1}", st.percent_used),
                    format!("{:.1}", st.high_water as f64 * 100.0 / st.capacity as f64),
                    st.readers.len().to_string(),
                    st.lost_samples.to_string(),
                    e.state.word().to_owned(),
                    liveness_text(st.writer),
                ]);
                let mut row = info_json(s);
                row["state"] = json!(e.state.word());
                row["internal"] = json!(i.internal);
                row["keep"] = json!(i.keep);
                rows.push(row);
            }
            _ => {
                let why = e.state.to_string();
                let (ctype, dtype, ch, rate) = e.stream.as_ref().map_or_else(
                    || (String::new(), "?".to_owned(), String::new(), String::new()),
                    |s| {
                        let i = s.info();
                        let (t, d) = (i.content_type.clone(), i.dtype.to_string());
                        (
                            t,
                            d,
                            i.n_channels.to_string(),
                            format!("{}", i.nominal_rate),
                        )
                    },
                );
                let mut cells: Vec<&str> = vec![e.name.as_str(), &ctype, &dtype, &ch, &rate];
                cells.extend([""; 6]); // capacity .. lost: counters that cannot be right
                cells.extend(["damaged", &why]);
                table.row(&cells);
                rows.push(json!({ "name": e.name, "state": "damaged", "error": why }));
            }
        }
    }
    if g.json {
        println!("{}", serde_json::Value::Array(rows));
        return Ok(());
    }
    if rows.is_empty() {
        println!("no streams to show in {}", rtloop_sys::shm_dir().display());
    } else {
        print!("{}", table.render());
    }
    let mut notes = Vec::new();
    if hidden_ended > 0 {
        notes.push(format!(
            "{hidden_ended} ended (closed, dead or damaged) not shown: --all shows them"
        ));
    }
    if hidden_internal > 0 {
        notes.push(format!(
            "{hidden_internal} internal to rtloop's tools not shown: --internal shows them"
        ));
    }
    if !notes.is_empty() {
        println!("({})", notes.join("; "));
    }
    Ok(())
}

/// Say on stderr which ended streams a listing gave back (a JSON document stays on stdout).
fn report_freed(freed: &[rtloop_stream::Reclaimed]) {
    for r in freed {
        eprintln!("reclaimed {} ({}): {}", r.name, human_bytes(r.bytes), r.why);
    }
}

fn gc(g: &Global) -> anyhow::Result<()> {
    let freed = Stream::collect_ended();
    if g.json {
        println!(
            "{}",
            json!({
                "freed": freed.iter().map(|r| json!({"name": r.name, "bytes": r.bytes, "why": r.why})).collect::<Vec<_>>(),
                "bytes": freed.iter().map(|r| r.bytes).sum::<u64>(),
            })
        );
        return Ok(());
    }
    if freed.is_empty() {
        println!("nothing to free: no stream has ended without being removed");
    }
    for r in &freed {
        println!("freed {} ({}): {}", r.name, human_bytes(r.bytes), r.why);
    }
    if freed.len() > 1 {
        println!(
            "freed {} streams, {} in all",
            freed.len(),
            human_bytes(freed.iter().map(|r| r.bytes).sum())
        );
    }
    Ok(())
}

fn info(name: &str, g: &Global) -> anyhow::Result<()> {
    let s = Stream::open(name)?;
    if g.json {
        println!("{}", info_json(&s));
        return Ok(());
    }
    let (i, st) = (s.info(), s.stats());
    println!("stream      {}", i.name);
    let or_none = |v: &str| {
        if v.is_empty() {
            "-".to_owned()
        } else {
            v.to_owned()
        }
    };
    println!("type        {}", or_none(&i.content_type));
    println!("source id   {}", or_none(&i.source_id));
    if !i.description.is_empty() {
        println!("description {}", i.description);
    }
    println!(
        "file        {} ({})",
        i.path.display(),
        human_bytes(i.file_bytes)
    );
    println!(
        "shape       {} channels x {} ({} B per sample)",
        i.n_channels, i.dtype, i.sample_bytes
    );
    println!(
        "rate        {} Hz{}",
        i.nominal_rate,
        if i.nominal_rate == 0.0 {
            " (irregular)"
        } else {
            ""
        }
    );
    println!(
        "capacity    {} samples, {} events",
        i.capacity, i.event_capacity
    );
    println!(
        "written     {} samples in {} commits, {} events",
        st.written, st.commits, st.events_written
    );
    println!(
        "occupancy   {:.1} % (high-water {:.1} %), {} overruns, {} samples lost",
        st.percent_used,
        st.high_water as f64 * 100.0 / st.capacity as f64,
        st.overruns,
        st.lost_samples
    );
    println!("writer      {}", liveness_text(st.writer));
    let mut ch = Table::new(&["#", "name", "unit", "type"]);
    for (k, (n, u)) in i.ch_names.iter().zip(&i.ch_units).enumerate().take(64) {
        let t = i.ch_types.get(k).cloned().unwrap_or_default();
        ch.row(&[k.to_string(), n.clone(), u.clone(), t]);
    }
    print!("{}", ch.render());
    if i.n_channels > 64 {
        println!("... {} more channels (--json lists all)", i.n_channels - 64);
    }
    if st.readers.is_empty() {
        println!("readers     none");
    } else {
        let mut t = Table::new(&[
            "slot", "pid", "mode", "cursor", "lag", "lost", "overruns", "alive",
        ]);
        for r in &st.readers {
            t.row(&[
                r.slot.to_string(),
                r.pid.to_string(),
                format!("{:?}", r.mode).to_lowercase(),
                r.cursor.to_string(),
                r.lag.to_string(),
                r.lost.to_string(),
                r.overruns.to_string(),
                r.alive.to_string(),
            ]);
        }
        print!("{}", t.render());
    }
    Ok(())
}

fn monitor(a: &MonitorArgs, g: &Global) -> anyhow::Result<()> {
    let streams: Vec<Stream> = a
        .names
        .iter()
        .map(|n| Stream::open(n).with_context(|| format!("cannot monitor {n}")))
        .collect::<anyhow::Result<_>>()?;
    let interval = Duration::from_millis(a.interval_ms);
    let started = Instant::now();
    let mut last: Vec<(u64, Instant)> = streams
        .iter()
        .map(|s| (s.written(), Instant::now()))
        .collect();
    let mut series: Vec<Vec<(f64, f64)>> = vec![Vec::new(); streams.len()];
    let mut peak = vec![0f64; streams.len()];
    if !g.json {
        println!(
            "{:<16} {:>12} {:>12} {:>10} {:>7} {:>7} {:>10}  writer",
            "stream", "written", "samples/s", "MB/s", "used %", "high %", "lost"
        );
    }
    loop {
        std::thread::sleep(interval);
        let t = started.elapsed().as_secs_f64();
        for (k, s) in streams.iter().enumerate() {
            let st = s.stats();
            let now = Instant::now();
            let dt = now.duration_since(last[k].1).as_secs_f64().max(1e-9);
            let rate = st.written.saturating_sub(last[k].0) as f64 / dt;
            last[k] = (st.written, now);
            let mbs = rate * s.info().sample_bytes as f64 / 1e6;
            let high = st.high_water as f64 * 100.0 / st.capacity as f64;
            series[k].push((t, st.percent_used));
            peak[k] = peak[k].max(st.percent_used);
            if g.json {
                let mut v = stats_json(&st);
                v["name"] = json!(s.name());
                v["t"] = json!(t);
                v["samples_per_s"] = json!(rate);
                v["mb_per_s"] = json!(mbs);
                println!("{v}");
            } else {
                println!(
                    "{:<16} {:>12} {:>12.0} {:>10.2} {:>7.1} {:>7.1} {:>10}  {}",
                    s.name(),
                    st.written,
                    rate,
                    mbs,
                    st.percent_used,
                    high,
                    st.lost_samples,
                    liveness_text(st.writer)
                );
            }
        }
        if a.seconds.is_some_and(|s| t >= s) {
            break;
        }
    }
    if let Some(p) = &a.plot {
        let named: Vec<(&str, &[(f64, f64)])> = streams
            .iter()
            .zip(&series)
            .map(|(s, v)| (s.name(), v.as_slice()))
            .collect();
        rtloop_metrics::charts::time_series_png(
            p,
            "stream occupancy (PercentUsed)",
            "time (s)",
            "% of capacity",
            &named,
        )?;
        if !g.json {
            println!("occupancy plot: {}", p.display());
        }
    }
    if !g.json {
        for (s, pk) in streams.iter().zip(&peak) {
            println!("{}: peak occupancy seen {:.1} %", s.name(), pk);
        }
    }
    Ok(())
}
