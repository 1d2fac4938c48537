//! `python/rtloop/reports.py` is generated from the Rust report types: each class's fields
//! (names, types, order, comments) come from the type's `schemars::JsonSchema`, which reads
//! the same serde attributes the report's JSON and Python objects are made with. Nobody
//! writes the fields by hand, so the two cannot drift: this test fails when the committed
//! file differs from what the types generate, and says how to regenerate it.

use std::fmt::Write as _;

use schemars::schema::{InstanceType, RootSchema, Schema, SchemaObject, SingleOrVec};
use schemars::JsonSchema;

/// Set this to write the file instead of comparing it.
const REGENERATE: &str = "RTLOOP_WRITE_REPORTS";
const FILE: &str = "python/rtloop/reports.py";

/// One report the Python package returns: its class name there, what returns it, the type.
struct Top {
    /// A `# ---- ... ----` heading before it, if it starts a group.
    section: Option<&'static str>,
    python: &'static str,
    returned_by: &'static str,
    root: RootSchema,
}

fn top<T: JsonSchema>(
    section: Option<&'static str>,
    python: &'static str,
    returned_by: &'static str,
) -> Top {
    let root = schemars::gen::SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<T>();
    Top {
        section,
        python,
        returned_by,
        root,
    }
}

/// Every report the package returns, in the file's order.
fn tops() -> Vec<Top> {
    use rtloop_bench as b;
    vec![
        top::<rtloop_lab::loadtest::LoadtestReport>(
            Some("the latency lab: rtloop.lab"),
            "LoadtestReport",
            "`rtloop.lab.loadtest` (``rtloop lab loadtest --json``)",
        ),
        top::<rtloop_lab::tune::Tuning>(
            None,
            "TuneReport",
            "`rtloop.lab.tune` (``rtloop lab tune --json``)",
        ),
        top::<rtloop_runtime::run::RunReport>(
            Some("the runtime: rtloop.runtime.run"),
            "RunReport",
            "`rtloop.runtime.run` (``rtloop run --json``)",
        ),
        top::<rtloop_record::RecordReport>(
            Some("the recorder and replay: rtloop.record, rtloop.replay"),
            "RecordReport",
            "`rtloop.record(...).stop()`, one per stream (``rtloop record`` prints it)",
        ),
        top::<rtloop_record::ReplayReport>(
            None,
            "ReplayReport",
            "`rtloop.replay.play(...).stop()`, one per series (``rtloop replay --json``)",
        ),
        top::<rtloop_lsl::bridge::Report>(
            Some("the bridges: rtloop.bridge"),
            "LslBridgeReport",
            "`rtloop.bridge.lsl_in(...).stop()` and `lsl_out` (``rtloop bridge lsl-in --json``)",
        ),
        top::<rtloop_brainflow::bridge::Report>(
            None,
            "BrainFlowBridgeReport",
            "`rtloop.bridge.brainflow_in(...).stop()` (``rtloop bridge brainflow-in --json``)",
        ),
        top::<b::stream::StreamReport>(
            Some("the benchmarks: rtloop.bench (rows and nested tables stay dicts)"),
            "StreamBenchReport",
            "`rtloop.bench.stream` (``rtloop bench stream --json``)",
        ),
        top::<b::fieldtrip::FieldTripReport>(
            None,
            "FieldTripBenchReport",
            "`rtloop.bench.fieldtrip` (``rtloop bench fieldtrip --json``)",
        ),
        top::<b::pipeline::PipelineReport>(
            None,
            "PipelineBenchReport",
            "`rtloop.bench.pipeline` (``rtloop bench pipeline --json``)",
        ),
        top::<b::runtime::RuntimeReport>(
            None,
            "RuntimeBenchReport",
            "`rtloop.bench.runtime` (``rtloop bench runtime --json``)",
        ),
        top::<b::peers::PeersReport>(
            None,
            "PeersBenchReport",
            "`rtloop.bench.peers` (``rtloop bench peers --json``)",
        ),
        top::<b::verify::VerifyReport>(
            None,
            "VerifyReport",
            "`rtloop.bench.verify` (``rtloop verify --json``)",
        ),
    ]
}

/// The nested types that are classes of their own (by the Rust name): any other nested
/// struct stays a `Dict[str, Any]`, a string enum a `str`.
const NESTED: &[(&str, &str)] = &[
    ("Summary", "Summary"),
    ("LoadTester", "LoadTester"),
    ("HostReport", "HostReport"),
    ("DeviceReport", "DeviceReport"),
    ("Realtime", "Realtime"),
    ("MinimumTick", "MinimumTick"),
    ("Delay", "Delay"),
    ("ProcessTiming", "ProcessTiming"),
    ("Machine", "BenchMachine"),
];

/// Names a field cannot take as an annotation without mypy taking it for a method of
/// `Report` or `dict`: such a field is read as `report["name"]`.
const METHODS: &[&str] = &[
    "check",
    "of",
    "clear",
    "copy",
    "fromkeys",
    "get",
    "items",
    "keys",
    "pop",
    "popitem",
    "setdefault",
    "update",
    "values",
];

struct Gen<'a> {
    root: &'a RootSchema,
    /// Classes written so far, with their text (a nested type met twice must be the same).
    done: Vec<(String, String)>,
}

fn object(s: &Schema) -> &SchemaObject {
    match s {
        Schema::Object(o) => o,
        Schema::Bool(_) => panic!("a report field's schema is `true`/`false`: {s:?}"),
    }
}

fn description(o: &SchemaObject) -> Option<&str> {
    o.metadata.as_ref().and_then(|m| m.description.as_deref())
}

fn ref_name(o: &SchemaObject) -> Option<&str> {
    o.reference
        .as_deref()
        .map(|r| r.strip_prefix("#/definitions/").unwrap_or(r))
}

/// Whether `o` is a Rust enum serde writes as a string (unit variants): `enum`, or `oneOf`
/// such schemas when its variants are documented.
fn string_enum(o: &SchemaObject) -> bool {
    let strings = |o: &SchemaObject| {
        (o.enum_values.is_some() || o.const_value.is_some())
            && o.instance_type == Some(InstanceType::String.into())
    };
    strings(o)
        || o.subschemas
            .as_ref()
            .and_then(|s| s.one_of.as_ref())
            .is_some_and(|alts| {
                alts.iter()
                    .all(|a| matches!(a, Schema::Object(a) if string_enum(a)))
            })
}

fn primitive(t: InstanceType) -> &'static str {
    match t {
        InstanceType::Integer => "int",
        InstanceType::Number => "float",
        InstanceType::String => "str",
        InstanceType::Boolean => "bool",
        InstanceType::Null => "None",
        InstanceType::Array => "List[Any]",
        InstanceType::Object => "Dict[str, Any]",
    }
}

impl Gen<'_> {
    /// The Python annotation of `s`, writing the classes of nested reports first.
    fn annotation(&mut self, s: &Schema) -> String {
        let Schema::Object(o) = s else {
            return "Any".into();
        };
        if let Some(name) = ref_name(o) {
            if let Some(&(_, py)) = NESTED.iter().find(|(r, _)| *r == name) {
                let def = self.root.definitions[name].clone();
                self.class(py, object(&def), None);
                return py.into();
            }
            let def = self.root.definitions[name].clone();
            let d = object(&def);
            if string_enum(d) {
                return "str".into();
            }
            if d.object.is_some() || d.subschemas.is_some() {
                return "Dict[str, Any]".into();
            }
            return self.annotation(&def);
        }
        if let Some(sub) = &o.subschemas {
            let all = sub.all_of.as_ref().or(sub.any_of.as_ref());
            if let Some(all) = all {
                let not_null: Vec<&Schema> = all
                    .iter()
                    .filter(|s| {
                        !matches!(s, Schema::Object(o) if o.instance_type == Some(InstanceType::Null.into()))
                    })
                    .collect();
                if not_null.len() == 1 {
                    let inner = self.annotation(not_null[0]);
                    return if not_null.len() < all.len() {
                        format!("Optional[{inner}]")
                    } else {
                        inner
                    };
                }
            }
            return "Any".into();
        }
        if o.enum_values.is_some() {
            return "str".into();
        }
        match &o.instance_type {
            Some(SingleOrVec::Single(t)) => self.of_type(**t, o),
            Some(SingleOrVec::Vec(ts)) => {
                let not_null: Vec<InstanceType> = ts
                    .iter()
                    .copied()
                    .filter(|t| *t != InstanceType::Null)
                    .collect();
                if not_null.len() == 1 {
                    let inner = self.of_type(not_null[0], o);
                    if not_null.len() < ts.len() {
                        format!("Optional[{inner}]")
                    } else {
                        inner
                    }
                } else {
                    "Any".into()
                }
            }
            None => "Any".into(),
        }
    }

    fn of_type(&mut self, t: InstanceType, o: &SchemaObject) -> String {
        match t {
            InstanceType::Array => match o.array.as_ref().and_then(|a| a.items.as_ref()) {
                Some(SingleOrVec::Single(item)) => format!("List[{}]", self.annotation(item)),
                Some(SingleOrVec::Vec(items)) => {
                    let parts: Vec<String> = items.iter().map(|i| self.annotation(i)).collect();
                    format!("Tuple[{}]", parts.join(", "))
                }
                None => "List[Any]".into(),
            },
            InstanceType::Object => match o
                .object
                .as_ref()
                .and_then(|ob| ob.additional_properties.as_deref())
            {
                Some(v @ Schema::Object(_)) => format!("Dict[str, {}]", self.annotation(v)),
                _ => "Dict[str, Any]".into(),
            },
            other => primitive(other).into(),
        }
    }

    /// Write class `py` for the struct schema `o` (once), its nested classes before it.
    fn class(&mut self, py: &str, o: &SchemaObject, returned_by: Option<&str>) {
        if self.done.iter().any(|(n, _)| n == py) {
            return;
        }
        let fields = &o
            .object
            .as_ref()
            .unwrap_or_else(|| panic!("{py} is not a struct"))
            .properties;
        let mut body = String::new();
        let mut doc = description(o).unwrap_or("").trim().to_owned();
        if let Some(r) = returned_by {
            if !doc.is_empty() {
                doc.push_str("\n\n");
            }
            let _ = write!(doc, "Returned by {r}.");
        }
        let doc = doc.replace('\\', "\\\\").replace("\"\"\"", "\\\"\\\"\\\"");
        let doc = doc.replace('\n', "\n    ");
        let _ = writeln!(body, "\n\nclass {py}(Report):\n    \"\"\"{doc}\"\"\"\n");
        for (name, schema) in fields {
            let ann = self.annotation(schema);
            if let Some(d) = description(object(schema)) {
                for line in wrap(d, 92) {
                    let _ = writeln!(body, "    # {line}");
                }
            }
            let ignore = if METHODS.contains(&name.as_str()) {
                format!("  # type: ignore[assignment]  # read it as report[\"{name}\"]")
            } else {
                String::new()
            };
            let _ = writeln!(body, "    {name}: {ann}{ignore}");
        }
        self.done.push((py.to_owned(), body));
    }
}

/// `text` (a doc comment, lines joined) in lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for para in text.split("\n\n") {
        let mut line = String::new();
        for word in para.split_whitespace() {
            if !line.is_empty() && line.len() + 1 + word.len() > width {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        if !line.is_empty() {
            lines.push(line);
        }
    }
    lines
}

const HEADER: &str = r#""""The reports rtloop's libraries return, as typed objects.

A report is what the Rust library made (the same value the command line prints with
``--json``), handed to Python by the binding as dicts and lists and read into a class
declared here: ``report.host.latency.p99_ns`` reads a field as an attribute, and a report is
still the ``dict`` it was (``report["host"]``, ``json.dumps(report)``), so code written
against the dictionaries keeps working.

The classes are generated from the Rust report types (their fields, types, order and
comments); `Report.check` says whether a value names the fields its class declares.
"""

# Generated by crates/rtloop-cli/tests/python_reports.rs from the Rust report types: do not
# edit. After changing a report type, regenerate with
#     RTLOOP_WRITE_REPORTS=1 cargo test -p rtloop-cli --test python_reports

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ._report import Report
"#;

/// The text of `python/rtloop/reports.py`.
fn generate() -> String {
    let mut out = String::from(HEADER);
    let mut names = vec!["Report".to_owned()];
    for t in tops() {
        if let Some(s) = t.section {
            let _ = write!(out, "\n\n# ---- {s} {}", "-".repeat(86 - s.len()));
        }
        let mut g = Gen {
            root: &t.root,
            done: Vec::new(),
        };
        g.class(t.python, &t.root.schema, Some(t.returned_by));
        for (name, body) in g.done {
            if names.contains(&name) {
                // a nested class met before: the same type, so the same text
                assert!(
                    out.contains(&body),
                    "two different Rust types are both Python's {name}"
                );
                continue;
            }
            out.push_str(&body);
            names.push(name);
        }
    }
    out.push_str("\n\n__all__ = [\n");
    for n in &names {
        let _ = writeln!(out, "    \"{n}\",");
    }
    out.push_str("]\n");
    out
}

#[test]
fn reports_py_is_what_the_rust_report_types_generate() {
    let path = format!("{}/../../{FILE}", env!("CARGO_MANIFEST_DIR"));
    let want = generate();
    if std::env::var_os(REGENERATE).is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        let first = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| have.lines().count().min(want.lines().count()));
        panic!(
            "{FILE} is not what the Rust report types generate (first difference at line {}: \
             {:?} here, {:?} generated). A report type changed: regenerate the file with\n    \
             {REGENERATE}=1 cargo test -p rtloop-cli --test python_reports\nand commit it.",
            first + 1,
            have.lines().nth(first).unwrap_or("<end of file>"),
            want.lines().nth(first).unwrap_or("<end of file>"),
        );
    }
}
