//! The model file's parser and validator: YAML (saphyr, with positions) to [`Model`],
//! collecting every problem with its line instead of stopping at the first.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use rtloop_stream::DType;
use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, YamlData};

use super::{Body, Config, Kind, MissPolicy, Model, ModelError, Process, Signal};

// One `impl Cx` per section of the file, each in its own module.
mod blocks;
mod config;
mod graph;
mod processes;
mod signals;

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
const SIGNAL_KEYS: &[&str] = &["shape", "dtype", "history", "variable", "channels", "units"];
const SOURCE_KEYS: &[&str] = &["driver", "out", "options", "core"];
const MODULE_KEYS: &[&str] = &[
    "language", "code", "numba", "block", "options", "every", "in", "out", "core",
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
        tick: None,
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
    units: Vec<String>,
}

impl SigDecl {
    /// The signal, when every part of it was valid.
    fn resolved(&self) -> Option<Signal> {
        Some(Signal {
            name: self.name.clone(),
            shape: self.shape.clone()?,
            dtype: self.dtype?,
            history: self.history?,
            variable: self.variable,
            channels: self.channels.clone(),
            units: self.units.clone(),
            line: self.line,
        })
    }
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
    /// Line of `block:` (block modules).
    block_line: usize,
    /// Line of each key of a module's `options:` mapping.
    option_lines: Vec<(String, usize)>,
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
    /// The tick, once `config:` is read (blocks take their sample rate from it).
    tick: Option<Duration>,
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
        self.tick = config.as_ref().map(|c| c.tick);

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
