//! Live progress of long work, always on stderr (stdout stays for tables and `--json`).
//!
//! On a terminal the line is redrawn in place a few times a second; anywhere else (a pipe, a
//! CI log, `| tee`) a plain line is printed every few seconds, so long work is never silent
//! and redirected output carries no escape codes. `RTLOOP_PROGRESS_SECONDS` sets the interval
//! of the plain lines (default 5; 0 turns them off).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Seconds between plain progress lines when stderr is not a terminal.
pub const DEFAULT_LINE_SECONDS: f64 = 5.0;
/// How often the in-place line on a terminal is redrawn.
const REDRAW: Duration = Duration::from_millis(200);

/// One piece of long work's progress line.
pub struct Progress {
    label: String,
    tty: bool,
    every: Option<Duration>,
    started: Instant,
    next: Instant,
    drawn: bool,
}

impl Progress {
    /// Progress of `label` (printed in front of every plain line, e.g. "verify").
    pub fn new(label: &str) -> Self {
        let tty = std::io::stderr().is_terminal();
        let every = if tty {
            Some(REDRAW)
        } else {
            line_interval(std::env::var("RTLOOP_PROGRESS_SECONDS").ok().as_deref())
        };
        let now = Instant::now();
        Self {
            label: label.to_owned(),
            tty,
            every,
            started: now,
            next: now + every.unwrap_or(Duration::ZERO),
            drawn: false,
        }
    }

    /// Time since the work started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Show the line `f` makes if one is due (cheap when not: `f` is not called).
    pub fn tick(&mut self, f: impl FnOnce() -> String) {
        let Some(every) = self.every else { return };
        let now = Instant::now();
        if now < self.next {
            return;
        }
        // no catching up after a stall: the next line is one interval from now
        self.next = now + every;
        self.show(&f());
    }

    fn show(&mut self, line: &str) {
        let mut err = std::io::stderr().lock();
        if self.tty {
            // carriage return, the line, erase to the end of the line
            let _ = write!(err, "\r{line}\x1b[K");
        } else {
            let _ = writeln!(
                err,
                "{} [{:.1} s] {line}",
                self.label,
                self.started.elapsed().as_secs_f64()
            );
        }
        let _ = err.flush();
        self.drawn = true;
    }

    /// End the progress: on a terminal, leave the last line and move to a new one.
    pub fn finish(&mut self) {
        if self.tty && self.drawn {
            eprintln!();
        }
        self.drawn = false;
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A benchmark's progress on stderr: its notes (unless `--json`), warnings, and its steps as
/// a progress line made by `line` (from what, done, total and the time since the start).
pub struct BenchProgress {
    bar: Option<Progress>,
    notes: bool,
    line: fn(&str, u64, u64, Duration) -> String,
}

impl BenchProgress {
    /// Notes on stderr unless `json`; no progress line.
    pub fn notes(json: bool) -> Self {
        Self {
            bar: None,
            notes: !json,
            line: |_, _, _, _| String::new(),
        }
    }

    /// A progress line labelled `label` (shown also with `--json`: it goes to stderr), made
    /// by `line`; notes on stderr unless `json`.
    pub fn with_line(
        label: &str,
        json: bool,
        line: fn(&str, u64, u64, Duration) -> String,
    ) -> Self {
        Self {
            bar: Some(Progress::new(label)),
            notes: !json,
            line,
        }
    }
}

impl rtloop_bench::Progress for BenchProgress {
    fn note(&mut self, what: &str) {
        if self.notes {
            eprintln!("{what}");
        }
    }

    fn step(&mut self, what: &str, done: u64, total: u64) {
        if let Some(b) = &mut self.bar {
            let elapsed = b.elapsed();
            let line = self.line;
            b.tick(|| line(what, done, total, elapsed));
        }
    }

    fn warn(&mut self, what: &str) {
        eprintln!("{what}");
    }
}

/// The plain-line interval from `RTLOOP_PROGRESS_SECONDS` (None: off).
fn line_interval(var: Option<&str>) -> Option<Duration> {
    let secs = match var.map(str::trim) {
        None | Some("") => DEFAULT_LINE_SECONDS,
        Some(v) => match v.parse::<f64>() {
            Ok(s) if s.is_finite() && s >= 0.0 => s,
            _ => {
                eprintln!(
                    "warning: RTLOOP_PROGRESS_SECONDS={v:?} is not a number of seconds >= 0; \
                     using {DEFAULT_LINE_SECONDS}"
                );
                DEFAULT_LINE_SECONDS
            }
        },
    };
    (secs > 0.0).then(|| Duration::from_secs_f64(secs))
}

/// A count with thousands separators ("1,234,567").
pub fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// "done/total (p %), rate/s, eta" for work of known size.
pub fn of_total(done: u64, total: u64, elapsed: Duration, unit: &str) -> String {
    let secs = elapsed.as_secs_f64().max(1e-9);
    let rate = done as f64 / secs;
    let pct = if total == 0 {
        100.0
    } else {
        done as f64 * 100.0 / total as f64
    };
    let eta = if rate > 0.0 && done < total {
        format!("eta {:.0} s", (total - done) as f64 / rate)
    } else {
        "eta -".to_owned()
    };
    format!(
        "{}/{} {unit} ({pct:.1} %), {}/s, {eta}",
        grouped(done),
        grouped(total),
        grouped(rate as u64)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_defaults_to_five_seconds_and_zero_turns_lines_off() {
        assert_eq!(line_interval(None), Some(Duration::from_secs(5)));
        assert_eq!(line_interval(Some("0.5")), Some(Duration::from_millis(500)));
        assert_eq!(line_interval(Some("0")), None);
        // a bad value warns and keeps the default rather than silencing progress
        assert_eq!(line_interval(Some("soon")), Some(Duration::from_secs(5)));
        assert_eq!(line_interval(Some("-1")), Some(Duration::from_secs(5)));
    }

    #[test]
    fn counts_are_grouped_and_totals_give_percent_and_eta() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(1_234_567_890), "1,234,567,890");
        let s = of_total(250, 1_000, Duration::from_secs(1), "packets");
        assert_eq!(s, "250/1,000 packets (25.0 %), 250/s, eta 3 s");
        assert!(of_total(1_000, 1_000, Duration::from_secs(2), "packets").ends_with("eta -"));
    }
}
