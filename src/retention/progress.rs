//! A long retention command's progress on stderr, for an operator at a terminal: a bar where
//! stderr is a terminal, a line every few seconds where it is not (a file, a CI log). Off in
//! Lambda, where the report and the log lines say what a run did. Stdout keeps the report alone.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often a phase writes its line where stderr is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(10);

/// Where a command's progress goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Progress {
    /// Nowhere: a Lambda invocation.
    #[default]
    Off,
    /// A bar redrawn in place on stderr.
    Bar,
    /// A line on stderr every [`LINE_EVERY`], and one when the phase ends.
    Lines,
}

impl Progress {
    /// A bar if stderr is a terminal, lines otherwise.
    pub fn on_stderr() -> Self {
        if std::io::stderr().is_terminal() {
            Progress::Bar
        } else {
            Progress::Lines
        }
    }

    /// Whether anything is shown: a phase's total is worth counting first only then.
    pub fn is_on(self) -> bool {
        self != Progress::Off
    }

    /// Starts showing phase `name`, of `total` items when known.
    pub(crate) fn phase(self, name: &'static str, total: Option<u64>) -> Phase {
        let bar = (self == Progress::Bar).then(|| {
            let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
            let template = if total.is_some() {
                "{prefix}: [{bar:30}] {human_pos}/{human_len} {per_sec}, {eta} left"
            } else {
                "{prefix}: {human_pos} done, {per_sec}"
            };
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_prefix(name);
            bar
        });
        let now = Instant::now();
        Phase {
            name,
            lines: self == Progress::Lines,
            bar,
            total,
            done: 0,
            started: now,
            last_line: now,
        }
    }
}

/// One phase's progress (reclaim, purge, a bulk replay). Ends with a last line when dropped.
pub(crate) struct Phase {
    name: &'static str,
    lines: bool,
    bar: Option<ProgressBar>,
    total: Option<u64>,
    done: u64,
    started: Instant,
    last_line: Instant,
}

impl Phase {
    /// Counts `n` more items done.
    pub(crate) fn advance(&mut self, n: u64) {
        self.done += n;
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
        if self.lines && self.last_line.elapsed() >= LINE_EVERY {
            self.last_line = Instant::now();
            eprintln!("{}", self.line());
        }
    }

    /// `reclaim: 1200 of 100000 done, 512/s, 3m13s left`.
    fn line(&self) -> String {
        let secs = self.started.elapsed().as_secs_f64();
        let rate = if secs > 0.0 {
            self.done as f64 / secs
        } else {
            0.0
        };
        match self.total {
            Some(total) => {
                let left = total.saturating_sub(self.done);
                let eta = match left {
                    0 => "0s".into(),
                    _ if rate > 0.0 => format_duration(left as f64 / rate),
                    _ => "unknown time".into(),
                };
                format!(
                    "{}: {} of {total} done, {rate:.0}/s, {eta} left",
                    self.name, self.done
                )
            }
            None => format!("{}: {} done, {rate:.0}/s", self.name, self.done),
        }
    }
}

impl Drop for Phase {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.abandon();
        }
        if self.lines {
            eprintln!("{}", self.line());
        }
    }
}

/// `3h02m`, `3m13s`, `42s`.
fn format_duration(secs: f64) -> String {
    let secs = secs.round() as u64;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_done_remaining_rate_and_time_left() {
        let mut phase = Progress::Off.phase("reclaim", Some(1000));
        phase.started = Instant::now() - Duration::from_secs(10);
        phase.done = 100;
        assert_eq!(phase.line(), "reclaim: 100 of 1000 done, 10/s, 1m30s left");
        phase.done = 1000;
        assert_eq!(phase.line(), "reclaim: 1000 of 1000 done, 100/s, 0s left");
        phase.done = 100;
        phase.total = None;
        assert_eq!(phase.line(), "reclaim: 100 done, 10/s");
    }

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(format_duration(42.4), "42s");
        assert_eq!(format_duration(193.0), "3m13s");
        assert_eq!(format_duration(10_920.0), "3h02m");
    }
}
