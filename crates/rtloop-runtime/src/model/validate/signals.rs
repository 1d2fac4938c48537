//! The `signals:` section: each signal's shape, dtype, history and channel names.

#[allow(clippy::wildcard_imports)] // the validator's own helpers and types
use super::*;

impl Cx<'_> {
    pub(super) fn signals(&mut self, n: &MarkedYaml<'_>) -> Vec<SigDecl> {
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
                units: Vec::new(),
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
                if let Some((_, v)) = f.get("units") {
                    self.units(v, &what, &mut s);
                }
            }
            out.push(s);
        }
        out
    }

    /// `channels:` a list of distinct names, one per value of a row (the shape's last
    /// dimensions), kept in logs and shown to modules.
    pub(super) fn channels(&mut self, n: &MarkedYaml<'_>, what: &str, s: &mut SigDecl) {
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

    /// `units:` one unit for every value of a row (`units: uV`), or a list of one per value
    /// (`""` for a value without one): they reach the stream's header, the log and the viewer.
    pub(super) fn units(&mut self, n: &MarkedYaml<'_>, what: &str, s: &mut SigDecl) {
        let per_row = s.shape.as_ref().map(|shape| {
            if shape.len() >= 2 {
                shape[1..].iter().product::<usize>()
            } else {
                shape.iter().product()
            }
        });
        let ok_unit = |u: &str| u.len() <= CHANNEL_NAME_MAX && !u.contains('\0');
        let units: Vec<String> = match val(n) {
            Val::Str(u) if ok_unit(u) => vec![u.to_owned(); per_row.unwrap_or(0)],
            Val::Seq(items) => {
                let mut units = Vec::with_capacity(items.len());
                for item in items {
                    match val(item) {
                        Val::Str(u) if ok_unit(u) => units.push(u.to_owned()),
                        _ => {
                            self.err(
                                line(item),
                                format!(
                                    "{what}: units: expected a unit (a string of at most \
                                     {CHANNEL_NAME_MAX} bytes, \"\" for none), got {}",
                                    describe(item)
                                ),
                            );
                            s.shape = None;
                            return;
                        }
                    }
                }
                units
            }
            _ => {
                self.err(
                    line(n),
                    format!(
                        "{what}: units: expected a unit for every value (units: uV) or a list \
                         of one unit per value (units: [uV, uV, mV]), got {}",
                        describe(n)
                    ),
                );
                s.shape = None;
                return;
            }
        };
        if let Some(per_row) = per_row {
            if units.len() != per_row {
                self.err(
                    line(n),
                    format!(
                        "{what}: units: {} units for {per_row} values per row (one per channel, \
                         or one string for all)",
                        units.len()
                    ),
                );
                s.shape = None;
                return;
            }
        }
        s.units = units;
    }
}
