//! Tolerating known panics in the Lambda event crates, and only there.
//!
//! `lambda_http::request::from_str` (lambda_http 1.3, aws_lambda_events 1.2) panics on events
//! API Gateway never sends: `isBase64Encoded: true` with a body that is not base64
//! (`expect("failed to decode aws base64 encoded body")`), a method or URI that `http` refuses
//! (`expect("failed to build request")`), a `host`/`x-forwarded-proto` that makes the URL
//! unparsable (`Url::parse(..).unwrap()`). In the deployed function that conversion runs inside
//! lambda_runtime's panic-catching layer, so such an event fails its invocation instead of
//! reaching hookclaim. The request target is about hookclaim's code, so it treats those panics
//! as "no request" and goes on; a panic anywhere else is still a crash.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

/// Source files whose panics are tolerated: the event conversion crates.
const TOLERATED: &[&str] = &["/lambda_http-", "/aws_lambda_events-"];

thread_local! {
    /// Set while a tolerated call runs.
    static TOLERATING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, returning `None` if it panicked inside one of the [`TOLERATED`] crates. A panic
/// elsewhere goes to the hook that was installed before (libFuzzer's, which aborts: a crash).
pub fn tolerate_event_crate_panics<T>(f: impl FnOnce() -> T) -> Option<T> {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let tolerated = TOLERATING.get()
                && info
                    .location()
                    .is_some_and(|l| TOLERATED.iter().any(|c| l.file().contains(c)));
            if !tolerated {
                previous(info);
            }
        }));
    });
    TOLERATING.set(true);
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    TOLERATING.set(false);
    result.ok()
}
