//! Human progress on stderr: a byte-count bar, shown only when stderr is a
//! terminal and `--quiet` was not given. Never mixed with the JSON.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar, or nothing.
#[derive(Clone)]
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar when stderr is a terminal and `quiet` is false.
    pub fn new(quiet: bool) -> Progress {
        if quiet || !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{msg:>10} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} {eta}",
        )
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Progress(Some(bar))
    }

    /// Whether a bar is shown (work done only for the bar can be skipped).
    pub fn is_shown(&self) -> bool {
        self.0.is_some()
    }

    /// Starts a phase of `total` bytes.
    pub fn phase(&self, message: &'static str, total: u64) {
        if let Some(bar) = &self.0 {
            bar.set_message(message);
            bar.set_length(total);
            bar.set_position(0);
        }
    }

    /// Adds `n` bytes done.
    pub fn inc(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(n);
        }
    }

    /// Bytes done so far (0 without a bar).
    pub fn position(&self) -> u64 {
        self.0.as_ref().map_or(0, ProgressBar::position)
    }

    /// Sets the bytes done (a retried request starts over).
    pub fn set_position(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.set_position(n);
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
