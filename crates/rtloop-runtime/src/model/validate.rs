//! The model file's parser and validator: YAML (saphyr, with positions) to [`Model`],
//! collecting every problem with its line instead of stopping at the first.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use rtloop_stream::DType;
use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, YamlData};

use super::{Body, Config, Kind, MissPolicy, Model, ModelError, Process, Signal};

/// Largest model file accepted (a model is a few kilobytes).
const TEXT_MAX: usize = 16 << 20;
/// Deepest indentation accepted, in columns of leading blanks and block indicators. It
/// bounds block nesting (the YAML loader and the tree's drop recurse once per level).
const INDENT_MAX: usize = 100;
/// Largest memory one signal may take: `history × rows × row bytes`.
const SIGNAL_BYTES_MAX: u128 = 1 << 30;
/// Signal names listed in an "unknown signal" message.
const NAMES_LISTED: usize = 30;

const TOP_KEYS: &[&str] = &["config", "signals", "sources", "modules", "sinks"];
const CONFIG_KEYS: &[&str] = &[
    "name",
    "tick_us",
    "num_ticks",
    "busy_wait_us",
    "phase_us",
    "spin_us",
    "realtime",
    "priority",
    "mlockall",
    "pm_qos",
    "cores",
    "timer_core",
    "on_miss",
    "python",
];
const SIGNAL_KEYS: &[&str] = &["shape", "dtype", "history", "variable", "channels"];
const SOURCE_KEYS: &[&str] = &["driver", "out", "options", "core"];
const MODULE_KEYS: &[&str] = &[
    "language", "code", "numba", "options", "every", "in", "out", "core",
];
/// Longest channel name (bytes), as FieldTrip's and LSL's labels are short.
const CHANNEL_NAME_MAX: usize = 64;
const SINK_KEYS: &[&str] = &["driver", "in", "options", "core"];
const PORT_KEYS: &[&str] = &["signal", "shape", "dtype"];

/// Validates a driver's options against its signals (`crate::drivers::check`).
pub(super) type DriverCheck<'c> =
    &'c dyn Fn(&str, Kind, &serde_json::Value, &[&Signal]) -> Result<(), String>;

/// Parse and validate; the errors are unsorted.
pub(super) fn parse(
    text: &str,
    path: &Path,
    check: DriverCheck<'_>,
) -> Result<Model, Vec<ModelError>> {
    let mut cx = Cx {
        errors: Vec::new(),
        cpus: rtloop_sys::online_cpus(),
        check,
    };
    if text.len() > TEXT_MAX {
        cx.err(
            0,
            format!(
                "the file is {} bytes; a model file may be at most {TEXT_MAX} bytes",
                text.len()
            ),
        );
        return Err(cx.errors);
    }
    if let Some(line) = too_deep(text) {
        cx.err(
            line,
            format!("indented more than {INDENT_MAX} columns; a model file nests less deeply"),
        );
        return Err(cx.errors);
    }
    let docs = match MarkedYaml::load_from_str(text) {
        Ok(d) => d,
        Err(e) => {
            let info = e.info();
            let message = if info.contains("duplicated key") {
                "duplicate key: each key (signal, process, option) may appear only once in its \
                 mapping"
                    .to_owned()
            } else if info.contains("alias expansion") {
                "YAML aliases expand to too many nodes (refused: a model file does not need an \
                 alias bomb)"
                    .to_owned()
            } else {
                format!(
                    "YAML syntax error: {info} (column {})",
                    e.marker().col() + 1
                )
            };
            cx.err(e.marker().line(), message);
            return Err(cx.errors);
        }
    };
    let Some(doc) = docs.first() else {
        cx.err(0, "the file is empty; a model needs at least 'signals:'");
        return Err(cx.errors);
    };
    if let Some(second) = docs.get(1) {
        cx.err(
            second.span.start.line(),
            "a second YAML document ('---'); a model file holds one document",
        );
    }
    let model = cx.model(doc, path);
    if cx.errors.is_empty() {
        model.ok_or(cx.errors)
    } else {
        Err(cx.errors)
    }
}

/// The first line indented more than [`INDENT_MAX`] columns, counting blanks, block
/// indicators (`- `, `? `, `: `) and node properties (`&anchor`, `!tag`) before the content.
fn too_deep(text: &str) -> Option<usize> {
    for (i, line) in text.lines().enumerate() {
        let mut cols = 0;
        let mut in_prop = false;
        for c in line.chars() {
            if in_prop {
                in_prop = c != ' ' && c != '\t';
            } else if c == '&' || c == '!' {
                in_prop = true;
            } else if !matches!(c, ' ' | '\t' | '-' | '?' | ':') {
                break;
            }
            cols += 1;
            if cols > INDENT_MAX {
                return Some(i + 1);
            }
        }
    }
    None
}

/// A YAML node, seen through its tags.
enum Val<'a, 'i> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a str),
    Seq(&'a [MarkedYaml<'i>]),
    Map,
    Bad,
}

fn val<'a, 'i>(mut n: &'a MarkedYaml<'i>) -> Val<'a, 'i> {
    while let YamlData::Tagged(_, inner) = &n.data {
        n = inner;
    }
    match &n.data {
        YamlData::Value(Scalar::Null) => Val::Null,
        YamlData::Value(Scalar::Boolean(b)) => Val::Bool(*b),
        YamlData::Value(Scalar::Integer(i)) => Val::Int(*i),
        YamlData::Value(Scalar::FloatingPoint(f)) => Val::Float(f.into_inner()),
        YamlData::Value(Scalar::String(s)) | YamlData::Representation(s, _, _) => Val::Str(s),
        YamlData::Sequence(s) => Val::Seq(s),
        YamlData::Mapping(_) => Val::Map,
        YamlData::Tagged(..) | YamlData::Alias(_) | YamlData::BadValue => Val::Bad,
    }
}

/// The entries of a mapping node, in file order.
fn entries<'a, 'i>(
    n: &'a MarkedYaml<'i>,
) -> impl Iterator<Item = (&'a MarkedYaml<'i>, &'a MarkedYaml<'i>)> {
    let mut n = n;
    while let YamlData::Tagged(_, inner) = &n.data {
        n = inner;
    }
    n.data.as_mapping().into_iter().flat_map(|m| m.iter())
}

fn line(n: &MarkedYaml<'_>) -> usize {
    n.span.start.line()
}

/// How a value reads in a message.
fn describe(n: &MarkedYaml<'_>) -> String {
    match val(n) {
        Val::Null => "nothing".to_owned(),
        Val::Bool(b) => b.to_string(),
        Val::Int(i) => i.to_string(),
        Val::Float(f) => format!("{f:?}"),
        Val::Str(s) => format!("'{}'", clip(s)),
        Val::Seq(_) => "a list".to_owned(),
        Val::Map => "a mapping".to_owned(),
        Val::Bad => "an unreadable value".to_owned(),
    }
}

/// A mapping key as a name (scalars only).
fn key_name(n: &MarkedYaml<'_>) -> Option<String> {
    match val(n) {
        Val::Str(s) => Some(s.to_owned()),
        Val::Int(i) => Some(i.to_string()),
        Val::Bool(b) => Some(b.to_string()),
        Val::Float(f) => Some(format!("{f:?}")),
        Val::Null => Some("null".to_owned()),
        Val::Seq(_) | Val::Map | Val::Bad => None,
    }
}

/// A user string shortened for a message.
fn clip(s: &str) -> String {
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s.to_owned()
    }
}

fn kind_word(k: Kind) -> &'static str {
    match k {
        Kind::Source => "source",
        Kind::Module => "module",
        Kind::Sink => "sink",
    }
}

fn shape_str(shape: &[usize]) -> String {
    format!(
        "[{}]",
        shape
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The keys of one mapping, checked against what is allowed.
struct Fields<'a, 'i> {
    /// The mapping's own line (its owner's name for a process or signal).
    line: usize,
    entries: Vec<(String, usize, &'a MarkedYaml<'i>)>,
}

impl<'a, 'i> Fields<'a, 'i> {
    fn get(&self, key: &str) -> Option<(usize, &'a MarkedYaml<'i>)> {
        self.entries
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, l, v)| (*l, *v))
    }
}

/// Where a port (`in:`/`out:` entry) appears and what it expects.
struct Port {
    signal: String,
    line: usize,
    shape: Option<Vec<usize>>,
    dtype: Option<DType>,
}

/// A signal as declared, with whatever parts were valid.
struct SigDecl {
    name: String,
    line: usize,
    shape: Option<Vec<usize>>,
    dtype: Option<DType>,
    history: Option<u64>,
    variable: bool,
    channels: Vec<String>,
}

/// A process as declared, with whatever parts were valid.
struct ProcDecl {
    name: String,
    kind: Kind,
    line: usize,
    inputs: Vec<Port>,
    outputs: Vec<Port>,
    body: Option<Body>,
    /// Line of `driver:` (sources and sinks).
    driver_line: usize,
    core: Option<usize>,
    /// A module's `options:` (an object).
    options: serde_json::Value,
    /// A module's `every:`.
    every: u64,
}

impl ProcDecl {
    fn what(&self) -> String {
        format!("{} '{}'", kind_word(self.kind), self.name)
    }
}

struct Cx<'c> {
    errors: Vec<ModelError>,
    /// Online CPUs (`core`, `cores`, `timer_core` must be below).
    cpus: usize,
    check: DriverCheck<'c>,
}

impl Cx<'_> {
    fn err(&mut self, line: usize, message: impl Into<String>) {
        self.errors.push(ModelError {
            line,
            message: message.into(),
        });
    }

    /// Check a mapping's keys: unknown keys are reported with the allowed list. `None` (and
    /// an error) if the node is not a mapping; `null` reads as an empty mapping.
    fn fields<'a, 'i>(
        &mut self,
        n: &'a MarkedYaml<'i>,
        owner_line: usize,
        what: &str,
        allowed: &[&str],
        refused: &[(&str, &str)],
    ) -> Option<Fields<'a, 'i>> {
        match val(n) {
            Val::Map => {}
            Val::Null => {
                return Some(Fields {
                    line: owner_line,
                    entries: Vec::new(),
                })
            }
            _ => {
                self.err(
                    line(n),
                    format!(
                        "{what}: expected a mapping with keys {}, got {}",
                        allowed.join(", "),
                        describe(n)
                    ),
                );
                return None;
            }
        }
        let mut out = Fields {
            line: owner_line,
            entries: Vec::new(),
        };
        for (k, v) in entries(n) {
            let Some(name) = key_name(k) else {
                self.err(
                    line(k),
                    format!("{what}: a key must be a name, got {}", describe(k)),
                );
                continue;
            };
            if let Some((_, why)) = refused.iter().find(|(r, _)| *r == name) {
                self.err(
                    line(k),
                    format!("{what}: {why}; allowed: {}", allowed.join(", ")),
                );
            } else if !allowed.contains(&name.as_str()) {
                self.err(
                    line(k),
                    format!(
                        "{what}: unknown key '{}'; allowed: {}",
                        clip(&name),
                        allowed.join(", ")
                    ),
                );
            } else {
                out.entries.push((name, line(k), v));
            }
        }
        Some(out)
    }

    fn missing(&mut self, f: &Fields<'_, '_>, what: &str, key: &str, hint: &str) {
        self.err(
            f.line,
            format!("{what}: missing required key '{key}'{hint}"),
        );
    }

    /// An integer satisfying `ok`, else an error "expected {expected}".
    fn int(
        &mut self,
        n: &MarkedYaml<'_>,
        what: &str,
        key: &str,
        expected: &str,
        ok: impl Fn(i64) -> bool,
    ) -> Option<i64> {
        match val(n) {
            Val::Int(i) if ok(i) => Some(i),
            _ => {
                self.err(
                    line(n),
                    format!("{what}: {key}: expected {expected}, got {}", describe(n)),
                );
                None
            }
        }
    }

    fn boolean(&mut self, n: &MarkedYaml<'_>, what: &str, key: &str) -> Option<bool> {
        if let Val::Bool(b) = val(n) {
            Some(b)
        } else {
            self.err(
                line(n),
                format!("{what}: {key}: expected true or false, got {}", describe(n)),
            );
            None
        }
    }

    fn string(&mut self, n: &MarkedYaml<'_>, what: &str, key: &str) -> Option<String> {
        match val(n) {
            Val::Str(s) if !s.is_empty() => Some(s.to_owned()),
            _ => {
                self.err(
                    line(n),
                    format!(
                        "{what}: {key}: expected a non-empty string, got {}",
                        describe(n)
                    ),
                );
                None
            }
        }
    }

    /// A CPU number below the count of online CPUs.
    fn cpu(&mut self, n: &MarkedYaml<'_>, what: &str, key: &str) -> Option<usize> {
        let cpus = self.cpus;
        let i = self.int(
            n,
            what,
            key,
            &format!("a CPU number 0..={}", cpus.saturating_sub(1)),
            |_| true,
        )?;
        match usize::try_from(i) {
            Ok(c) if c < cpus => Some(c),
            _ => {
                self.err(
                    line(n),
                    format!(
                        "{what}: {key}: CPU {i} does not exist; this machine has {cpus} online \
                         CPUs (0..={})",
                        cpus.saturating_sub(1)
                    ),
                );
                None
            }
        }
    }

    /// `shape:` an integer or a list of 1 or 2 positive integers.
    fn shape(&mut self, n: &MarkedYaml<'_>, what: &str) -> Option<Vec<usize>> {
        const EXPECTED: &str =
            "a positive integer or a list of 1 or 2 positive integers ([channels] or [samples, channels])";
        let dim = |v: &MarkedYaml<'_>| match val(v) {
            Val::Int(i) if i > 0 => usize::try_from(i).ok(),
            _ => None,
        };
        let shape = match val(n) {
            Val::Int(_) => dim(n).map(|d| vec![d]),
            Val::Seq(items) if (1..=2).contains(&items.len()) => {
                items.iter().map(dim).collect::<Option<Vec<_>>>()
            }
            _ => None,
        };
        if shape.is_none() {
            self.err(
                line(n),
                format!(
                    "{what}: shape: expected {EXPECTED}, got {}",
                    describe_shape(n)
                ),
            );
        }
        shape
    }

    fn dtype(&mut self, n: &MarkedYaml<'_>, what: &str) -> Option<DType> {
        match val(n) {
            Val::Str(s) => match DType::from_str(s) {
                Ok(d) => Some(d),
                Err(e) => {
                    self.err(line(n), format!("{what}: dtype: {e}"));
                    None
                }
            },
            _ => {
                self.err(
                    line(n),
                    format!(
                        "{what}: dtype: expected one of {}, got {}",
                        rtloop_stream::DTYPE_NAMES,
                        describe(n)
                    ),
                );
                None
            }
        }
    }

    fn model(&mut self, doc: &MarkedYaml<'_>, path: &Path) -> Option<Model> {
        if matches!(val(doc), Val::Null | Val::Bad) {
            self.err(0, "the file is empty; a model needs at least 'signals:'");
            return None;
        }
        let refused_top: &[(&str, &str)] = &[];
        let top = self.fields(doc, 0, "model file", TOP_KEYS, refused_top)?;

        let (config, name_given) = match top.get("config") {
            Some((l, n)) => self.config(n, l),
            None => (Some(default_config()), None),
        };
        let name = self.model_name(name_given, path);

        let sigs = match top.get("signals") {
            Some((_, n)) => self.signals(n),
            None => {
                self.missing(
                    &top,
                    "model file",
                    "signals",
                    " (the signals the model carries)",
                );
                Vec::new()
            }
        };
        if let Some(name) = &name {
            for s in &sigs {
                let stream = format!("{name}.{}", s.name);
                if let Err(e) = rtloop_stream::validate_name(&stream) {
                    self.err(
                        s.line,
                        format!(
                            "signal '{}': stream name '{}' is not allowed: {}",
                            clip(&s.name),
                            clip(&stream),
                            e.reason
                        ),
                    );
                }
            }
        }

        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut procs = Vec::new();
        for (key, kind) in [
            ("sources", Kind::Source),
            ("modules", Kind::Module),
            ("sinks", Kind::Sink),
        ] {
            if let Some((l, n)) = top.get(key) {
                self.processes(n, l, key, kind, &dir, config.as_ref(), &mut procs);
            }
        }

        let signals = self.graph(&sigs, &mut procs);

        let (config, name, signals) = (config?, name?, signals?);
        let processes = procs
            .into_iter()
            .map(|p| {
                Some(Process {
                    name: p.name,
                    kind: p.kind,
                    inputs: p.inputs.into_iter().map(|x| x.signal).collect(),
                    outputs: p.outputs.into_iter().map(|x| x.signal).collect(),
                    body: p.body?,
                    core: p.core,
                    options: p.options,
                    every: p.every,
                    line: p.line,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Model {
            path: path.to_path_buf(),
            name,
            config,
            signals,
            processes,
        })
    }

    fn model_name(&mut self, given: Option<(String, usize)>, path: &Path) -> Option<String> {
        let (name, line, from) = match given {
            Some((n, l)) => (n, l, "config: name"),
            None => match path.file_stem().and_then(|s| s.to_str()) {
                Some(s) => (
                    s.to_owned(),
                    0,
                    "model name (the file name; set config.name)",
                ),
                None => {
                    self.err(
                        0,
                        format!(
                            "cannot take a model name from the path '{}'; set config.name",
                            path.display()
                        ),
                    );
                    return None;
                }
            },
        };
        match rtloop_stream::validate_name(&name) {
            Ok(()) => Some(name),
            Err(e) => {
                self.err(
                    line,
                    format!(
                        "{from}: '{}' is not allowed: {} (letters, digits, '_', '-', '.')",
                        clip(&name),
                        e.reason
                    ),
                );
                None
            }
        }
    }

    /// The `config:` section; also returns `name` and its line if given.
    fn config(
        &mut self,
        n: &MarkedYaml<'_>,
        owner: usize,
    ) -> (Option<Config>, Option<(String, usize)>) {
        const W: &str = "config";
        let Some(f) = self.fields(n, owner, W, CONFIG_KEYS, &[]) else {
            return (None, None);
        };
        let mut c = default_config();
        let mut ok = true;
        let mut name = None;
        if let Some((l, v)) = f.get("name") {
            match self.string(v, W, "name") {
                Some(s) => name = Some((s, l)),
                None => ok = false,
            }
        }
        let mut tick_us = 1000;
        if let Some((_, v)) = f.get("tick_us") {
            match self.int(v, W, "tick_us", "a positive integer", |i| i > 0) {
                Some(t) => tick_us = t.unsigned_abs(),
                None => ok = false,
            }
        }
        c.tick = Duration::from_micros(tick_us);
        if let Some((_, v)) = f.get("num_ticks") {
            match self.int(
                v,
                W,
                "num_ticks",
                "-1 (until stopped) or a positive integer",
                |i| i == -1 || i >= 1,
            ) {
                Some(-1) => c.num_ticks = None,
                Some(t) => c.num_ticks = Some(t.unsigned_abs()),
                None => ok = false,
            }
        }
        c.busy_wait = Duration::from_micros(if 50 < tick_us { 50 } else { tick_us / 2 });
        if let Some((_, v)) = f.get("busy_wait_us") {
            match self.int(
                v,
                W,
                "busy_wait_us",
                &format!("an integer 0..{tick_us} (less than tick_us)"),
                |i| i >= 0 && i.unsigned_abs() < tick_us,
            ) {
                Some(b) => c.busy_wait = Duration::from_micros(b.unsigned_abs()),
                None => ok = false,
            }
        }
        c.phase = Duration::from_micros(if 500 < tick_us { 500 } else { 0 });
        if let Some((_, v)) = f.get("phase_us") {
            match self.int(
                v,
                W,
                "phase_us",
                &format!("an integer 0..{tick_us} (less than tick_us)"),
                |i| i >= 0 && i.unsigned_abs() < tick_us,
            ) {
                Some(b) => c.phase = Duration::from_micros(b.unsigned_abs()),
                None => ok = false,
            }
        }
        if let Some((_, v)) = f.get("spin_us") {
            match self.int(v, W, "spin_us", "an integer >= 0", |i| i >= 0) {
                Some(s) => c.spin = Duration::from_micros(s.unsigned_abs()),
                None => ok = false,
            }
        }
        for (key, slot) in [
            ("realtime", &mut c.realtime),
            ("mlockall", &mut c.mlockall),
            ("pm_qos", &mut c.pm_qos),
        ] {
            if let Some((_, v)) = f.get(key) {
                match self.boolean(v, W, key) {
                    Some(b) => *slot = b,
                    None => ok = false,
                }
            }
        }
        if let Some((_, v)) = f.get("priority") {
            match self.int(v, W, "priority", "an integer 1..=98", |i| {
                (1..=98).contains(&i)
            }) {
                Some(p) => c.priority = i32::try_from(p).unwrap_or(80),
                None => ok = false,
            }
        }
        if let Some((_, v)) = f.get("cores") {
            match self.cores(v) {
                Some(cores) => c.cores = Some(cores),
                None => ok = false,
            }
        }
        if let Some((_, v)) = f.get("timer_core") {
            match self.cpu(v, W, "timer_core") {
                Some(t) => {
                    if let Some(cores) = &c.cores {
                        if !cores.contains(&t) {
                            self.err(
                                line(v),
                                format!(
                                    "{W}: timer_core: CPU {t} is not one of cores {}",
                                    shape_str(cores)
                                ),
                            );
                            ok = false;
                        }
                    }
                    c.timer_core = Some(t);
                }
                None => ok = false,
            }
        }
        if let Some((_, v)) = f.get("on_miss") {
            match val(v) {
                Val::Str("continue") => c.on_miss = MissPolicy::Continue,
                Val::Str("stop") => c.on_miss = MissPolicy::Stop,
                _ => {
                    self.err(
                        line(v),
                        format!(
                            "{W}: on_miss: expected continue or stop, got {}",
                            describe(v)
                        ),
                    );
                    ok = false;
                }
            }
        }
        if let Some((_, v)) = f.get("python") {
            match self.string(v, W, "python") {
                Some(p) => c.python = Some(p),
                None => ok = false,
            }
        }
        (ok.then_some(c), name)
    }

    fn cores(&mut self, n: &MarkedYaml<'_>) -> Option<Vec<usize>> {
        let Val::Seq(items) = val(n) else {
            self.err(
                line(n),
                format!(
                    "config: cores: expected a list of CPU numbers, got {}",
                    describe(n)
                ),
            );
            return None;
        };
        if items.is_empty() {
            self.err(line(n), "config: cores: expected at least one CPU");
            return None;
        }
        let mut cores = Vec::new();
        let mut ok = true;
        for item in items {
            match self.cpu(item, "config", "cores") {
                Some(c) if cores.contains(&c) => {
                    self.err(
                        line(item),
                        format!("config: cores: CPU {c} is listed twice"),
                    );
                    ok = false;
                }
                Some(c) => cores.push(c),
                None => ok = false,
            }
        }
        ok.then_some(cores)
    }

    fn signals(&mut self, n: &MarkedYaml<'_>) -> Vec<SigDecl> {
        let mut out = Vec::new();
        if !matches!(val(n), Val::Map | Val::Null) {
            self.err(
                line(n),
                format!(
                    "signals: expected a mapping of signal name to {{shape, dtype, history, \
                     variable}}, got {}",
                    describe(n)
                ),
            );
            return out;
        }
        for (k, v) in entries(n) {
            let Some(name) = key_name(k) else {
                self.err(
                    line(k),
                    format!("signals: a signal name must be a name, got {}", describe(k)),
                );
                continue;
            };
            let l = line(k);
            let what = format!("signal '{}'", clip(&name));
            let mut s = SigDecl {
                name,
                line: l,
                shape: None,
                dtype: None,
                history: None,
                variable: false,
                channels: Vec::new(),
            };
            if let Some(f) = self.fields(v, l, &what, SIGNAL_KEYS, &[]) {
                match f.get("shape") {
                    Some((_, v)) => s.shape = self.shape(v, &what),
                    None => self.missing(&f, &what, "shape", " (e.g. shape: [channels])"),
                }
                match f.get("dtype") {
                    Some((_, v)) => s.dtype = self.dtype(v, &what),
                    None => self.missing(&f, &what, "dtype", " (e.g. dtype: float32)"),
                }
                s.history = match f.get("history") {
                    Some((_, v)) => self
                        .int(v, &what, "history", "an integer >= 1", |i| i >= 1)
                        .map(i64::unsigned_abs),
                    None => Some(1),
                };
                if let Some((l, v)) = f.get("variable") {
                    if let Some(b) = self.boolean(v, &what, "variable") {
                        s.variable = b;
                        if b && s.shape.as_ref().is_some_and(|sh| sh.len() != 2) {
                            self.err(
                                l,
                                format!(
                                    "{what}: variable: needs a 2-D shape [max_rows, channels], \
                                     got shape {}",
                                    shape_str(s.shape.as_deref().unwrap_or_default())
                                ),
                            );
                            s.shape = None;
                        }
                    }
                }
                if let (Some(shape), Some(dtype), Some(history)) = (&s.shape, s.dtype, s.history) {
                    let bytes = shape
                        .iter()
                        .fold(u128::from(history) * dtype.itemsize() as u128, |a, &d| {
                            a.saturating_mul(d as u128)
                        });
                    if bytes > SIGNAL_BYTES_MAX {
                        self.err(
                            l,
                            format!(
                                "{what}: takes {bytes} bytes (history {history} × shape {} × \
                                 {} bytes per value), more than the 1 GiB limit; lower \
                                 history or shape",
                                shape_str(shape),
                                dtype.itemsize()
                            ),
                        );
                        s.history = None;
                    }
                }
                if let Some((_, v)) = f.get("channels") {
                    self.channels(v, &what, &mut s);
                }
            }
            out.push(s);
        }
        out
    }

    /// `channels:` a list of distinct names, one per value of a row (the shape's last
    /// dimensions), kept in logs and shown to modules.
    fn channels(&mut self, n: &MarkedYaml<'_>, what: &str, s: &mut SigDecl) {
        let Val::Seq(items) = val(n) else {
            self.err(
                line(n),
                format!(
                    "{what}: channels: expected a list of channel names, got {}",
                    describe(n)
                ),
            );
            return;
        };
        let mut names = Vec::with_capacity(items.len());
        let mut seen = HashSet::new();
        let mut ok = true;
        for item in items {
            match val(item) {
                Val::Str(c)
                    if !c.is_empty() && c.len() <= CHANNEL_NAME_MAX && !c.contains('\0') =>
                {
                    if !seen.insert(c) {
                        self.err(
                            line(item),
                            format!("{what}: channels: '{}' is listed twice", clip(c)),
                        );
                        ok = false;
                    }
                    names.push(c.to_owned());
                }
                _ => {
                    self.err(
                        line(item),
                        format!(
                            "{what}: channels: expected a channel name (a non-empty string of \
                             at most {CHANNEL_NAME_MAX} bytes), got {}",
                            describe(item)
                        ),
                    );
                    ok = false;
                }
            }
        }
        if let Some(shape) = &s.shape {
            let per_row: usize = if shape.len() >= 2 {
                shape[1..].iter().product()
            } else {
                shape.iter().product()
            };
            if ok && names.len() != per_row {
                self.err(
                    line(n),
                    format!(
                        "{what}: channels: {} names for {per_row} values per row (shape {}: \
                         one name per channel{})",
                        names.len(),
                        shape_str(shape),
                        if shape.len() >= 2 {
                            ", the dimensions after the first"
                        } else {
                            ""
                        }
                    ),
                );
                ok = false;
            }
        }
        if ok {
            s.channels = names;
        } else {
            s.shape = None;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn processes(
        &mut self,
        n: &MarkedYaml<'_>,
        owner: usize,
        section: &str,
        kind: Kind,
        dir: &Path,
        config: Option<&Config>,
        out: &mut Vec<ProcDecl>,
    ) {
        if !matches!(val(n), Val::Map | Val::Null) {
            self.err(
                if line(n) == 0 { owner } else { line(n) },
                format!(
                    "{section}: expected a mapping of {} name to its keys, got {}",
                    kind_word(kind),
                    describe(n)
                ),
            );
            return;
        }
        for (k, v) in entries(n) {
            let Some(name) = key_name(k) else {
                self.err(
                    line(k),
                    format!(
                        "{section}: a {} name must be a name, got {}",
                        kind_word(kind),
                        describe(k)
                    ),
                );
                continue;
            };
            let l = line(k);
            let mut p = ProcDecl {
                name,
                kind,
                line: l,
                inputs: Vec::new(),
                outputs: Vec::new(),
                body: None,
                driver_line: l,
                core: None,
                options: serde_json::Value::Object(serde_json::Map::new()),
                every: 1,
            };
            let what = p.what();
            let (allowed, refused): (&[&str], &[(&str, &str)]) = match kind {
                Kind::Source => (
                    SOURCE_KEYS,
                    &[(
                        "in",
                        "a source has no 'in' (it brings signals in from outside)",
                    )],
                ),
                Kind::Module => (MODULE_KEYS, &[]),
                Kind::Sink => (
                    SINK_KEYS,
                    &[(
                        "out",
                        "a sink has no 'out' (it takes signals out of the model)",
                    )],
                ),
            };
            if let Some(f) = self.fields(v, l, &what, allowed, refused) {
                self.process(&f, &mut p, dir, config);
            }
            out.push(p);
        }
    }

    fn process(
        &mut self,
        f: &Fields<'_, '_>,
        p: &mut ProcDecl,
        dir: &Path,
        config: Option<&Config>,
    ) {
        let what = p.what();
        for (key, ports) in [("in", &mut p.inputs), ("out", &mut p.outputs)] {
            if let Some((_, v)) = f.get(key) {
                *ports = self.ports(v, &what, key);
            }
        }
        match p.kind {
            Kind::Source if f.get("out").is_none() => {
                self.missing(f, &what, "out", " (the signals it writes)");
            }
            Kind::Sink if f.get("in").is_none() => {
                self.missing(f, &what, "in", " (the signals it reads)");
            }
            _ => {}
        }
        for (key, ports, need) in [
            ("out", &p.outputs, p.kind == Kind::Source),
            ("in", &p.inputs, p.kind == Kind::Sink),
        ] {
            if let Some((l, _)) = f.get(key) {
                if need && ports.is_empty() {
                    self.err(
                        l,
                        format!(
                            "{what}: {key}: a {} {} at least one signal",
                            kind_word(p.kind),
                            if key == "out" { "writes" } else { "reads" }
                        ),
                    );
                }
            }
            let mut seen = HashSet::new();
            for port in ports {
                if !seen.insert(port.signal.as_str()) {
                    self.err(
                        port.line,
                        format!(
                            "{what}: {key}: signal '{}' is listed twice",
                            clip(&port.signal)
                        ),
                    );
                }
            }
        }
        if let Some((_, v)) = f.get("core") {
            if let Some(c) = self.cpu(v, &what, "core") {
                match config.and_then(|c| c.cores.as_ref()) {
                    Some(cores) if !cores.contains(&c) => self.err(
                        line(v),
                        format!(
                            "{what}: core: CPU {c} is not one of config.cores {}",
                            shape_str(cores)
                        ),
                    ),
                    _ => p.core = Some(c),
                }
            }
        }
        if p.kind == Kind::Module {
            p.body = self.module_body(f, &what, dir);
            if let Some((options_line, v)) = f.get("options") {
                match val(v) {
                    Val::Map | Val::Null => match self.json(v, &what, "options") {
                        Some(serde_json::Value::Null) | None => {}
                        Some(o) => p.options = o,
                    },
                    _ => self.err(
                        line(v),
                        format!(
                            "{what}: options: expected a mapping of option name to value \
                             (passed to the module's init), got {}",
                            describe(v)
                        ),
                    ),
                }
                if let (Some(Body::Rust { .. }), Some(o)) = (&p.body, p.options.as_object()) {
                    for (k, v) in o {
                        if !(v.is_number() || v.is_boolean()) {
                            self.err(
                                options_line,
                                format!(
                                    "{what}: options: '{}' is {v}; a rust module's options are \
                                     numbers or true/false (read with t.option(\"{}\"))",
                                    clip(k),
                                    clip(k)
                                ),
                            );
                        }
                    }
                }
            }
            if let Some((_, v)) = f.get("every") {
                if let Some(n) = self.int(v, &what, "every", "an integer >= 1 (ticks)", |i| {
                    (1..=1_000_000).contains(&i)
                }) {
                    p.every = n.unsigned_abs();
                }
            }
        } else {
            let driver = match f.get("driver") {
                Some((l, v)) => {
                    p.driver_line = l;
                    self.string(v, &what, "driver")
                }
                None => {
                    let names = crate::drivers::driver_names(p.kind);
                    self.missing(f, &what, "driver", &format!("; drivers: {names}"));
                    None
                }
            };
            let options = match f.get("options") {
                Some((_, v)) => match val(v) {
                    Val::Map | Val::Null => self.json(v, &what, "options"),
                    _ => {
                        self.err(
                            line(v),
                            format!(
                                "{what}: options: expected a mapping of driver options, got {}",
                                describe(v)
                            ),
                        );
                        None
                    }
                },
                None => Some(serde_json::Value::Object(serde_json::Map::new())),
            };
            if let (Some(driver), Some(mut options)) = (driver, options) {
                if options.is_null() {
                    options = serde_json::Value::Object(serde_json::Map::new());
                }
                p.body = Some(Body::Driver { driver, options });
            }
        }
    }

    fn module_body(&mut self, f: &Fields<'_, '_>, what: &str, dir: &Path) -> Option<Body> {
        let language = match f.get("language") {
            Some((_, v)) => match val(v) {
                Val::Str(s @ ("python" | "rust")) => Some(s),
                _ => {
                    self.err(
                        line(v),
                        format!(
                            "{what}: language: expected python or rust, got {}",
                            describe(v)
                        ),
                    );
                    None
                }
            },
            None => {
                self.missing(f, what, "language", " (python or rust)");
                None
            }
        };
        let mut numba = Some(false);
        if let Some((l, v)) = f.get("numba") {
            numba = self.boolean(v, what, "numba");
            if language == Some("rust") {
                self.err(
                    l,
                    format!("{what}: numba: applies only to python modules, this one is rust"),
                );
                numba = None;
            }
        }
        let code = match f.get("code") {
            Some((_, v)) => self.string(v, what, "code").map(|c| (c, line(v))),
            None => {
                self.missing(f, what, "code", " (the module's source file)");
                None
            }
        };
        let (code, code_line) = code?;
        let resolved = dir.join(&code);
        let shown = std::path::absolute(&resolved).unwrap_or_else(|_| resolved.clone());
        let ext = Path::new(&code).extension().and_then(|e| e.to_str());
        let want = match language {
            Some("python") => Some("py"),
            Some("rust") => Some("rs"),
            _ => None,
        };
        if let (Some(want), Some(lang)) = (want, language) {
            if ext != Some(want) {
                self.err(
                    code_line,
                    format!(
                        "{what}: code: '{}' is not a .{want} file, as a {lang} module needs",
                        clip(&code)
                    ),
                );
                return None;
            }
        }
        if !resolved.is_file() {
            self.err(
                code_line,
                format!("{what}: code: file not found: {}", shown.display()),
            );
            return None;
        }
        let code = std::fs::canonicalize(&resolved).unwrap_or(shown);
        match language? {
            "python" => Some(Body::Python {
                code,
                numba: numba?,
            }),
            _ => {
                numba?;
                Some(Body::Rust { code })
            }
        }
    }

    /// `in:`/`out:`: a signal name, or a list of names and `{signal, shape, dtype}`.
    fn ports(&mut self, n: &MarkedYaml<'_>, what: &str, key: &str) -> Vec<Port> {
        match val(n) {
            Val::Null => Vec::new(),
            Val::Str(_) | Val::Map => self.port(n, what, key).into_iter().collect(),
            Val::Seq(items) => items
                .iter()
                .filter_map(|i| self.port(i, what, key))
                .collect(),
            _ => {
                self.err(
                    line(n),
                    format!(
                        "{what}: {key}: expected a signal name or a list of them, got {}",
                        describe(n)
                    ),
                );
                Vec::new()
            }
        }
    }

    fn port(&mut self, n: &MarkedYaml<'_>, what: &str, key: &str) -> Option<Port> {
        match val(n) {
            Val::Str(s) => Some(Port {
                signal: s.to_owned(),
                line: line(n),
                shape: None,
                dtype: None,
            }),
            Val::Map => {
                let w = format!("{what}: {key}");
                let f = self.fields(n, line(n), &w, PORT_KEYS, &[])?;
                let (sl, sn) = match f.get("signal") {
                    Some(x) => x,
                    None => {
                        self.missing(&f, &w, "signal", " (the signal's name)");
                        return None;
                    }
                };
                let signal = self.string(sn, &w, "signal")?;
                let shape = f.get("shape").and_then(|(_, v)| self.shape(v, &w));
                let dtype = f.get("dtype").and_then(|(_, v)| self.dtype(v, &w));
                Some(Port {
                    signal,
                    line: sl,
                    shape,
                    dtype,
                })
            }
            _ => {
                self.err(
                    line(n),
                    format!(
                        "{what}: {key}: expected a signal name or {{signal, shape, dtype}}, got {}",
                        describe(n)
                    ),
                );
                None
            }
        }
    }

    /// A YAML value as JSON (driver options).
    fn json(&mut self, n: &MarkedYaml<'_>, what: &str, at: &str) -> Option<serde_json::Value> {
        use serde_json::Value as J;
        Some(match val(n) {
            Val::Null => J::Null,
            Val::Bool(b) => J::Bool(b),
            Val::Int(i) => J::from(i),
            Val::Float(f) => match serde_json::Number::from_f64(f) {
                Some(x) => J::Number(x),
                None => {
                    self.err(
                        line(n),
                        format!("{what}: {at}: {f:?} is not a finite number"),
                    );
                    return None;
                }
            },
            Val::Str(s) => J::String(s.to_owned()),
            Val::Seq(items) => {
                let mut out = Vec::with_capacity(items.len());
                let mut ok = true;
                for (i, item) in items.iter().enumerate() {
                    match self.json(item, what, &format!("{at}[{i}]")) {
                        Some(v) => out.push(v),
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                J::Array(out)
            }
            Val::Map => {
                let mut out = serde_json::Map::new();
                let mut ok = true;
                for (k, v) in entries(n) {
                    let Some(key) = key_name(k) else {
                        self.err(
                            line(k),
                            format!("{what}: {at}: a key must be a name, got {}", describe(k)),
                        );
                        ok = false;
                        continue;
                    };
                    match self.json(v, what, &format!("{at}.{key}")) {
                        Some(v) => {
                            out.insert(key, v);
                        }
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                J::Object(out)
            }
            Val::Bad => {
                self.err(line(n), format!("{what}: {at}: an unreadable value"));
                return None;
            }
        })
    }

    /// Whole-graph checks; the signals if every one of them is complete.
    fn graph(&mut self, sigs: &[SigDecl], procs: &mut [ProcDecl]) -> Option<Vec<Signal>> {
        let by_name: HashMap<&str, &SigDecl> = sigs.iter().map(|s| (s.name.as_str(), s)).collect();
        let listed = {
            let mut l = sigs
                .iter()
                .take(NAMES_LISTED)
                .map(|s| clip(&s.name))
                .collect::<Vec<_>>()
                .join(", ");
            if sigs.len() > NAMES_LISTED {
                l.push_str(", …");
            }
            if l.is_empty() {
                l.push_str("(none declared)");
            }
            l
        };

        // process names: valid and unique across sections
        let mut names: HashMap<&str, (Kind, usize)> = HashMap::new();
        for p in procs.iter() {
            if let Err(e) = rtloop_stream::validate_name(&p.name) {
                self.err(
                    p.line,
                    format!(
                        "{}: the name is not allowed: {} (letters, digits, '_', '-', '.')",
                        p.what(),
                        e.reason
                    ),
                );
            }
            if let Some((k, l)) = names.get(p.name.as_str()) {
                self.err(
                    p.line,
                    format!(
                        "duplicate process name '{}': {} '{}' (line {l}) and {}",
                        clip(&p.name),
                        kind_word(*k),
                        clip(&p.name),
                        p.what()
                    ),
                );
            } else {
                names.insert(&p.name, (p.kind, p.line));
            }
        }

        // ports: known signals, expectations met
        let mut writers: HashMap<&str, (String, usize)> = HashMap::new();
        let mut readers: HashMap<&str, Vec<(String, usize)>> = HashMap::new();
        let mut resolved = vec![true; procs.len()];
        for (pi, p) in procs.iter().enumerate() {
            let what = p.what();
            for (ports, verb) in [(&p.inputs, "reads"), (&p.outputs, "writes")] {
                for port in ports {
                    let Some(s) = by_name.get(port.signal.as_str()) else {
                        self.err(
                            port.line,
                            format!(
                                "{what} {verb} unknown signal '{}'; signals: {listed}",
                                clip(&port.signal)
                            ),
                        );
                        resolved[pi] = false;
                        continue;
                    };
                    if let (Some(want), Some(have)) = (&port.shape, &s.shape) {
                        if want != have {
                            self.err(
                                port.line,
                                format!(
                                    "shape/dtype mismatch: {what} expects '{}' with shape {} but \
                                     the signal (line {}) has shape {}",
                                    s.name,
                                    shape_str(want),
                                    s.line,
                                    shape_str(have)
                                ),
                            );
                        }
                    }
                    if let (Some(want), Some(have)) = (port.dtype, s.dtype) {
                        if want != have {
                            self.err(
                                port.line,
                                format!(
                                    "shape/dtype mismatch: {what} expects '{}' with dtype {want} \
                                     but the signal (line {}) has dtype {have}",
                                    s.name, s.line
                                ),
                            );
                        }
                    }
                    if verb == "writes" {
                        if let Some((w, wl)) = writers.get(s.name.as_str()) {
                            self.err(
                                port.line,
                                format!(
                                    "signal '{}' has two writers: {w} (line {wl}) and {what} \
                                     (line {})",
                                    s.name, port.line
                                ),
                            );
                        } else {
                            writers.insert(&s.name, (what.clone(), port.line));
                        }
                    } else {
                        readers
                            .entry(&s.name)
                            .or_default()
                            .push((what.clone(), port.line));
                    }
                }
            }
        }
        for s in sigs {
            if let (Some(rs), None) = (readers.get(s.name.as_str()), writers.get(s.name.as_str())) {
                let who = rs
                    .iter()
                    .map(|(w, l)| format!("{w} (line {l})"))
                    .collect::<Vec<_>>()
                    .join(", ");
                self.err(
                    s.line,
                    format!("signal '{}' is read by {who} but written by nobody", s.name),
                );
            }
        }

        self.cycles(procs);

        let signals: Option<Vec<Signal>> = sigs
            .iter()
            .map(|s| {
                Some(Signal {
                    name: s.name.clone(),
                    shape: s.shape.clone()?,
                    dtype: s.dtype?,
                    history: s.history?,
                    variable: s.variable,
                    channels: s.channels.clone(),
                    line: s.line,
                })
            })
            .collect();

        // driver options, against the process's resolved signals
        for (pi, p) in procs.iter().enumerate() {
            let Some(Body::Driver { driver, options }) = &p.body else {
                continue;
            };
            if !resolved[pi] {
                continue;
            }
            let ports = if p.kind == Kind::Source {
                &p.outputs
            } else {
                &p.inputs
            };
            let full: Option<Vec<Signal>> = ports
                .iter()
                .map(|port| {
                    let s = by_name.get(port.signal.as_str())?;
                    Some(Signal {
                        name: s.name.clone(),
                        shape: s.shape.clone()?,
                        dtype: s.dtype?,
                        history: s.history?,
                        variable: s.variable,
                        channels: s.channels.clone(),
                        line: s.line,
                    })
                })
                .collect();
            let Some(full) = full else { continue };
            let refs: Vec<&Signal> = full.iter().collect();
            if let Err(msg) = (self.check)(driver, p.kind, options, &refs) {
                self.err(
                    p.driver_line,
                    format!("{}: driver '{}': {msg}", p.what(), clip(driver)),
                );
            }
        }
        signals
    }

    /// Report each cycle among modules once ("cycle: a → b → a").
    fn cycles(&mut self, procs: &[ProcDecl]) {
        let modules: Vec<&ProcDecl> = procs.iter().filter(|p| p.kind == Kind::Module).collect();
        let mut readers: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, m) in modules.iter().enumerate() {
            for port in &m.inputs {
                readers.entry(port.signal.as_str()).or_default().push(i);
            }
        }
        let adj: Vec<Vec<usize>> = modules
            .iter()
            .map(|m| {
                let mut next = Vec::new();
                for port in &m.outputs {
                    for &r in readers.get(port.signal.as_str()).into_iter().flatten() {
                        if !next.contains(&r) {
                            next.push(r);
                        }
                    }
                }
                next
            })
            .collect();
        // iterative DFS; 0 white, 1 on the stack, 2 done
        let mut color = vec![0u8; modules.len()];
        let mut in_cycle = vec![false; modules.len()];
        for start in 0..modules.len() {
            if color[start] != 0 {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
            color[start] = 1;
            while let Some(top) = stack.last_mut() {
                let (u, i) = *top;
                if i < adj[u].len() {
                    top.1 += 1;
                    let v = adj[u][i];
                    if color[v] == 0 {
                        color[v] = 1;
                        stack.push((v, 0));
                    } else if color[v] == 1 {
                        let from = stack.iter().position(|(x, _)| *x == v).unwrap_or(0);
                        let mut cycle: Vec<usize> = stack[from..].iter().map(|(x, _)| *x).collect();
                        if cycle.iter().any(|&x| in_cycle[x]) {
                            continue;
                        }
                        for &x in &cycle {
                            in_cycle[x] = true;
                        }
                        let first = cycle
                            .iter()
                            .enumerate()
                            .min_by_key(|(_, &x)| x)
                            .map_or(0, |(i, _)| i);
                        cycle.rotate_left(first);
                        let mut names: Vec<String> =
                            cycle.iter().map(|&x| clip(&modules[x].name)).collect();
                        names.push(names[0].clone());
                        self.err(
                            modules[cycle[0]].line,
                            format!(
                                "cycle: {} (a module cannot depend on its own output in the \
                                 same tick)",
                                names.join(" → ")
                            ),
                        );
                    }
                } else {
                    color[u] = 2;
                    stack.pop();
                }
            }
        }
    }
}

fn describe_shape(n: &MarkedYaml<'_>) -> String {
    match val(n) {
        Val::Seq(items) => format!(
            "[{}]",
            items.iter().map(describe).collect::<Vec<_>>().join(", ")
        ),
        _ => describe(n),
    }
}

fn default_config() -> Config {
    Config {
        tick: Duration::from_micros(1000),
        num_ticks: None,
        busy_wait: Duration::from_micros(50),
        phase: Duration::from_micros(500),
        spin: Duration::from_micros(10),
        realtime: true,
        priority: 80,
        mlockall: true,
        pm_qos: true,
        cores: None,
        timer_core: None,
        on_miss: MissPolicy::Continue,
        python: None,
    }
}
