//! Facts about the current Lambda invocation that both functions need.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Assumed run time when the invocation carries no usable deadline (direct calls in tests and
/// tools).
pub const DEFAULT_INVOCATION_TIME: Duration = Duration::from_secs(60);

/// Deadlines before this (2001-01-01) are not epoch times: some local emulators send 0, and
/// cargo-lambda's sends the timeout itself (e.g. 600000 ms).
const EPOCH_MS_FLOOR: u64 = 978_307_200_000;

/// The longest relative timeout taken from an emulator: Lambda's own maximum.
const MAX_TIMEOUT: Duration = Duration::from_secs(900);

/// When the invocation must be finished. Lambda sends an epoch deadline in milliseconds; a
/// missing one means [`DEFAULT_INVOCATION_TIME`] from now, and a value too small to be an epoch
/// time is read as a timeout relative to now (capped at 15 minutes).
pub fn deadline(ctx: Option<&lambda_runtime::Context>) -> SystemTime {
    let now = SystemTime::now();
    match ctx.map(|c| c.deadline) {
        None | Some(0) => now + DEFAULT_INVOCATION_TIME,
        Some(ms) if ms < EPOCH_MS_FLOOR => now + Duration::from_millis(ms).min(MAX_TIMEOUT),
        Some(ms) => UNIX_EPOCH + Duration::from_millis(ms),
    }
}

tokio::task_local! {
    /// When the processing under way must end: set by the pipeline around a processor's run.
    static PROCESSING_DEADLINE: SystemTime;
}

/// Runs `f` (a processor's run) with `deadline` as its processing deadline, which the keyed
/// HTTP call bounds its calls by.
pub async fn processing_until<F: std::future::Future>(deadline: SystemTime, f: F) -> F::Output {
    PROCESSING_DEADLINE.scope(deadline, f).await
}

/// Time left for the processing under way, if a processor is running in this task.
#[cfg(feature = "forward")]
pub fn processing_time_left() -> Option<Duration> {
    PROCESSING_DEADLINE.try_with(|d| remaining(*d)).ok()
}

/// Time left until `deadline`, zero if it has passed.
pub fn remaining(deadline: SystemTime) -> Duration {
    deadline
        .duration_since(SystemTime::now())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(deadline: u64) -> lambda_runtime::Context {
        let mut c = lambda_runtime::Context::default();
        c.deadline = deadline;
        c
    }

    fn secs_from_now(t: SystemTime) -> u64 {
        remaining(t).as_secs_f64().round() as u64
    }

    #[test]
    fn real_epoch_deadlines_are_used_as_they_are() {
        let t = UNIX_EPOCH + Duration::from_millis(1_796_000_000_123);
        assert_eq!(deadline(Some(&ctx(1_796_000_000_123))), t);
    }

    #[test]
    fn missing_zero_and_relative_deadlines_count_from_now() {
        assert_eq!(secs_from_now(deadline(None)), 60);
        assert_eq!(secs_from_now(deadline(Some(&ctx(0)))), 60);
        assert_eq!(secs_from_now(deadline(Some(&ctx(600_000)))), 600);
        assert_eq!(secs_from_now(deadline(Some(&ctx(86_400_000)))), 900);
    }
}
