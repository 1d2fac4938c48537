//! Block modules: one signal in, one out, and the block's options, checked against those
//! signals and the tick (their sample rate) by the block itself (`crate::blocks::check`).

#[allow(clippy::wildcard_imports)] // the validator's own helpers and types
use super::*;

impl Cx<'_> {
    /// The line of option `key` of `p`, else of its `block:`.
    fn option_line(&self, p: &ProcDecl, key: &str) -> usize {
        p.option_lines
            .iter()
            .find(|(k, _)| k == key)
            .map_or(p.block_line, |(_, l)| *l)
    }

    /// Check each block module whose signals are known and complete.
    pub(super) fn blocks(
        &mut self,
        by_name: &HashMap<&str, &SigDecl>,
        procs: &[ProcDecl],
        resolved: &[bool],
    ) {
        for (pi, p) in procs.iter().enumerate() {
            let Some(Body::Block { block, options }) = &p.body else {
                continue;
            };
            let what = p.what();
            let mut ok = true;
            for (ports, key, verb) in [(&p.inputs, "in", "reads"), (&p.outputs, "out", "writes")] {
                if ports.len() != 1 {
                    self.err(
                        ports.get(1).map_or(p.line, |x| x.line),
                        format!(
                            "{what}: {key}: block '{block}' {verb} exactly one signal, got {}",
                            ports.len()
                        ),
                    );
                    ok = false;
                }
            }
            let Some(tick) = self.tick else { continue };
            if !ok || !resolved[pi] {
                continue;
            }
            let sig = |port: &Port| by_name.get(port.signal.as_str()).and_then(|s| s.resolved());
            let (Some(input), Some(output)) = (sig(&p.inputs[0]), sig(&p.outputs[0])) else {
                continue;
            };
            let ports = crate::blocks::Ports {
                input: &input,
                output: &output,
                tick,
            };
            for e in crate::blocks::check(block, options, &ports)
                .err()
                .unwrap_or_default()
            {
                let at = match e.at {
                    crate::blocks::At::Block => p.block_line,
                    crate::blocks::At::Input => p.inputs[0].line,
                    crate::blocks::At::Output => p.outputs[0].line,
                    crate::blocks::At::Option(key) => self.option_line(p, key),
                    crate::blocks::At::Unknown(key) => self.option_line(p, &key),
                };
                self.err(at, format!("{what}: block '{block}': {}", e.message));
            }
        }
    }
}
