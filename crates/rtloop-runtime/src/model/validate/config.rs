//! The `config:` section and its `cores` list.

#[allow(clippy::wildcard_imports)] // the validator's own helpers and types
use super::*;

impl Cx<'_> {
    /// The `config:` section; also returns `name` and its line if given.
    pub(super) fn config(
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

    pub(super) fn cores(&mut self, n: &MarkedYaml<'_>) -> Option<Vec<usize>> {
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
}
