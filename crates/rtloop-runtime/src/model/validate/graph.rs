//! Whole-graph checks: process names, ports naming known signals of the same shape and
//! dtype, one writer per signal, a writer for every signal read, each driver's options, no
//! cycles.

#[allow(clippy::wildcard_imports)] // the validator's own helpers and types
use super::*;

impl Cx<'_> {
    /// Whole-graph checks; the signals if every one of them is complete.
    pub(super) fn graph(
        &mut self,
        sigs: &[SigDecl],
        procs: &mut [ProcDecl],
    ) -> Option<Vec<Signal>> {
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

        let signals: Option<Vec<Signal>> = sigs.iter().map(SigDecl::resolved).collect();

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
                .map(|port| by_name.get(port.signal.as_str())?.resolved())
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
        self.blocks(&by_name, procs, &resolved);
        signals
    }

    /// Report each cycle among modules once ("cycle: a → b → a").
    pub(super) fn cycles(&mut self, procs: &[ProcDecl]) {
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
