//! Human progress on stderr: a byte-count bar, shown only when stderr is a
//! terminal and `--quiet` was not given. Never mixed with the JSON.
//!
//! Held back until the command has run for [`HOLD`] (as cargo and uv do):
//! most runs end before and draw nothing. One bar per phase, with the
//! phase's total fixed when it starts: its count only grows (but for a
//! request sent again, which starts over), and a phase with nothing to
//! count draws no bar.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a command runs before its bar is drawn.
pub const HOLD: Duration = Duration::from_millis(500);

/// Overrides [`HOLD`] (milliseconds), for a terminal that wants the bar
/// at once (`0`) and for tests.
pub const HOLD_ENV: &str = "PILLBOX_PROGRESS_AFTER_MS";

/// A progress bar, or nothing.
#[derive(Clone)]
pub struct Progress(Option<Arc<Bar>>);

struct Bar {
    /// The bar of the phase counted now.
    bar: Mutex<ProgressBar>,
    style: ProgressStyle,
    started: Instant,
    hold: Duration,
    shown: AtomicBool,
    /// The phase counted now, and whether it has anything to count.
    phase: Mutex<(&'static str, bool)>,
}

impl Bar {
    /// Draws the bar once the hold is over and the phase counts something.
    fn reveal(&self) {
        if self.shown.load(Ordering::Relaxed) || self.started.elapsed() < self.hold {
            return;
        }
        let counting = self.phase.lock().map(|p| p.1).unwrap_or(false);
        if counting && !self.shown.swap(true, Ordering::Relaxed) {
            let bar = self.bar();
            bar.set_draw_target(ProgressDrawTarget::stderr());
            bar.tick();
        }
    }

    fn bar(&self) -> ProgressBar {
        match self.bar.lock() {
            Ok(b) => b.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl Progress {
    /// A bar when stderr is a terminal and `quiet` is false.
    pub fn new(quiet: bool) -> Progress {
        use std::io::IsTerminal;
        if quiet || !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let hold = std::env::var(HOLD_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(HOLD, Duration::from_millis);
        let style = ProgressStyle::with_template(
            "{msg:>10} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} {eta}",
        )
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
        Progress(Some(Arc::new(Bar {
            bar: Mutex::new(bar),
            style,
            started: Instant::now(),
            hold,
            shown: AtomicBool::new(false),
            phase: Mutex::new(("", false)),
        })))
    }

    /// Whether a bar may be shown (work done only for the bar can be skipped).
    pub fn is_shown(&self) -> bool {
        self.0.is_some()
    }

    /// Starts a phase of `total` bytes: the bar starts over, empty, with
    /// this total, which does not change.
    pub fn phase(&self, message: &'static str, total: u64) {
        let Some(b) = &self.0 else { return };
        if let Ok(mut p) = b.phase.lock() {
            *p = (message, total > 0);
        }
        // A bar of its own, so that no frame shows the old count against
        // the new total or under the new name.
        let target = if b.shown.load(Ordering::Relaxed) {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(total), target)
            .with_style(b.style.clone())
            .with_message(message);
        if let Ok(mut old) = b.bar.lock() {
            old.finish_and_clear();
            *old = bar;
        }
        b.reveal();
    }

    /// Adds `n` bytes done.
    pub fn inc(&self, n: u64) {
        if let Some(b) = &self.0 {
            b.bar().inc(n);
            b.reveal();
        }
    }

    /// Bytes done so far (0 without a bar).
    pub fn position(&self) -> u64 {
        self.0.as_ref().map_or(0, |b| b.bar().position())
    }

    /// Sets the bytes done (a retried request starts over from `n`).
    pub fn set_position(&self, n: u64) {
        if let Some(b) = &self.0 {
            b.bar().set_position(n);
            b.reveal();
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.0 {
            b.bar().finish_and_clear();
        }
    }
}
