//! A progress bar on stderr while a phase runs: elapsed time against the phase's length and
//! the current rate. Hidden when stderr is not a terminal, so logs and pipes stay clean.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

const TICK: Duration = Duration::from_millis(250);

/// What the bar measures a phase in.
#[derive(Debug, Clone, Copy)]
pub enum Length {
    /// A timed phase: the bar follows the clock.
    Time(Duration),
    /// A counted phase (prefill): the bar follows the operations done.
    Ops(u64),
}

/// A running bar; [`Ticker::finish`] removes it.
pub struct Ticker {
    bar: ProgressBar,
    task: JoinHandle<()>,
}

impl Ticker {
    /// Shows `label` for a phase of `length`, reading the rate from `completed`.
    pub fn start(label: String, length: Length, completed: Arc<AtomicU64>) -> Ticker {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let (len, template) = match length {
            Length::Time(d) => (
                d.as_secs().max(1),
                "{prefix:>20} [{bar:30}] {pos:>3}/{len} s  {msg}",
            ),
            Length::Ops(n) => (n.max(1), "{prefix:>20} [{bar:30}] {pos}/{len}  {msg}"),
        };
        let bar = ProgressBar::with_draw_target(Some(len), target);
        bar.set_style(
            ProgressStyle::with_template(template)
                .expect("static template is valid")
                .progress_chars("=> "),
        );
        bar.set_prefix(label);
        let task = tokio::spawn(tick(bar.clone(), length, completed));
        Ticker { bar, task }
    }

    pub fn finish(self) {
        self.task.abort();
        self.bar.finish_and_clear();
    }
}

async fn tick(bar: ProgressBar, length: Length, completed: Arc<AtomicU64>) {
    let start = Instant::now();
    let mut last = (start, completed.load(Ordering::Relaxed));
    loop {
        tokio::time::sleep(TICK).await;
        let now = Instant::now();
        let done = completed.load(Ordering::Relaxed);
        let rate = (done - last.1) as f64 / (now - last.0).as_secs_f64();
        last = (now, done);
        bar.set_position(match length {
            Length::Time(_) => (now - start).as_secs(),
            Length::Ops(_) => done,
        });
        bar.set_message(format!("{} ops/s", crate::report::table::thousands(rate)));
    }
}
