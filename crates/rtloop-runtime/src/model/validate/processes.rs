//! The `sources:`, `modules:` and `sinks:` sections: each process, its code, ports and options.

#[allow(clippy::wildcard_imports)] // the validator's own helpers and types
use super::*;

impl Cx<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn processes(
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
                block_line: l,
                option_lines: Vec::new(),
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

    pub(super) fn process(
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
            p.body = match f.get("block") {
                Some((l, v)) => {
                    p.block_line = l;
                    self.block_body(f, &what, v)
                }
                None => self.module_body(f, &what, dir),
            };
            if let Some((options_line, v)) = f.get("options") {
                p.option_lines = entries(v)
                    .filter_map(|(k, _)| Some((key_name(k)?, line(k))))
                    .collect();
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
                if f.get("block").is_some() && p.every != 1 {
                    self.err(
                        line(v),
                        format!(
                            "{what}: every: {}; a block runs every tick (its state follows the \
                             signal sample by sample): leave 'every' out or give 1",
                            describe(v)
                        ),
                    );
                }
            }
            if let (Some(Body::Block { options, .. }), Some(o)) =
                (&mut p.body, p.options.as_object())
            {
                *options = serde_json::Value::Object(o.clone());
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

    /// `block: NAME`: a built-in block; its options are checked with its signals.
    pub(super) fn block_body(
        &mut self,
        f: &Fields<'_, '_>,
        what: &str,
        v: &MarkedYaml<'_>,
    ) -> Option<Body> {
        for key in ["language", "code", "numba"] {
            if let Some((l, _)) = f.get(key) {
                self.err(
                    l,
                    format!(
                        "{what}: '{key}' is for python and rust modules; a block module has \
                         'block' and 'options' (remove '{key}' or 'block')"
                    ),
                );
            }
        }
        let block = self.string(v, what, "block")?;
        if crate::blocks::find(&block).is_none() {
            self.err(
                line(v),
                format!(
                    "{what}: block: unknown block '{}'; blocks: {}",
                    clip(&block),
                    crate::blocks::block_names()
                ),
            );
            return None;
        }
        Some(Body::Block {
            block,
            options: serde_json::Value::Object(serde_json::Map::new()),
        })
    }

    pub(super) fn module_body(
        &mut self,
        f: &Fields<'_, '_>,
        what: &str,
        dir: &Path,
    ) -> Option<Body> {
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
                self.missing(
                    f,
                    what,
                    "language",
                    &format!(
                        " (python or rust), or 'block' for a built-in block ({})",
                        crate::blocks::block_names()
                    ),
                );
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
    pub(super) fn ports(&mut self, n: &MarkedYaml<'_>, what: &str, key: &str) -> Vec<Port> {
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

    pub(super) fn port(&mut self, n: &MarkedYaml<'_>, what: &str, key: &str) -> Option<Port> {
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
    pub(super) fn json(
        &mut self,
        n: &MarkedYaml<'_>,
        what: &str,
        at: &str,
    ) -> Option<serde_json::Value> {
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
}
