//! EventBridge `PutEvents`: one entry per delivery, its `Detail` the payload with a `hookclaim`
//! member naming the delivery. EventBridge does not deduplicate: consumers deduplicate on
//! `detail.hookclaim.idempotency_key`.

use aws_sdk_eventbridge::types::PutEventsRequestEntry;

use super::{json_message, sdk_failure, DestinationError};
use crate::processor::Delivery;

/// One event bus.
pub(super) struct EventBridge {
    bus: String,
    source: String,
    detail_type: Option<String>,
}

impl EventBridge {
    pub(super) fn new(bus: &str, source: &str, detail_type: Option<String>) -> Self {
        EventBridge {
            bus: bus.to_owned(),
            source: source.to_owned(),
            detail_type,
        }
    }

    /// The entry's `DetailType`: the configured one, else the event type, else the source name.
    fn detail_type(&self, d: &Delivery) -> String {
        self.detail_type
            .clone()
            .or_else(|| d.event_type.clone())
            .unwrap_or_else(|| d.source.clone())
    }

    /// Puts `d` as one event; its event id. A failed entry (`FailedEntryCount` above 0) is
    /// retried: it may be throttling or an internal failure, and a repeat is harmless since
    /// nothing was put.
    pub(super) async fn send(
        &self,
        client: &aws_sdk_eventbridge::Client,
        d: &Delivery,
        max_bytes: Option<usize>,
    ) -> Result<Option<String>, DestinationError> {
        let detail_type = self.detail_type(d);
        // EventBridge counts Source and DetailType in the entry's size with Detail.
        let (detail, _) = json_message(d, max_bytes, self.source.len() + detail_type.len());
        let entry = PutEventsRequestEntry::builder()
            .event_bus_name(&self.bus)
            .source(&self.source)
            .detail_type(detail_type)
            .detail(detail)
            .build();
        let out = client
            .put_events()
            .entries(entry)
            .send()
            .await
            .map_err(|e| sdk_failure("PutEvents", &e))?;
        let first = out.entries().first();
        if out.failed_entry_count() > 0 || first.is_some_and(|e| e.error_code().is_some()) {
            let (code, message) = first
                .map(|e| (e.error_code().unwrap_or("?"), e.error_message().unwrap_or("")))
                .unwrap_or(("?", ""));
            return Err(DestinationError::Retry(format!(
                "PutEvents: the entry failed: {code}: {message}"
            )));
        }
        Ok(first.and_then(|e| e.event_id()).map(str::to_owned))
    }
}
