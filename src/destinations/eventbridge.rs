//! EventBridge `PutEvents`: one entry per delivery, its `Detail` the payload with a `hookclaim`
//! member naming the delivery. EventBridge does not deduplicate: consumers deduplicate on
//! `detail.hookclaim.idempotency_key`.

use aws_sdk_eventbridge::types::PutEventsRequestEntry;

use super::{json_message, read_error, sdk_failure, DestinationError};
use crate::processor::Delivery;

/// The most characters EventBridge takes in an entry's `DetailType`; an entry with more fails
/// the whole `PutEvents` call, every time.
pub(super) const DETAIL_TYPE_MAX_CHARS: usize = 128;

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

    /// The entry's `DetailType`: the configured one, else the event type when EventBridge
    /// takes it (1 to [`DETAIL_TYPE_MAX_CHARS`] characters), else the source name. An event type
    /// too long for EventBridge is not cut: a cut-off type is a value the sender never sent,
    /// which a rule written for the real type would miss and one written for another type
    /// sharing the prefix would catch. The source name is what events without a type get, and
    /// the whole type is still in `detail.hookclaim.event_type`.
    fn detail_type(&self, d: &Delivery) -> String {
        if let Some(configured) = &self.detail_type {
            return configured.clone();
        }
        match &d.event_type {
            Some(t) if !t.is_empty() && t.chars().count() <= DETAIL_TYPE_MAX_CHARS => t.clone(),
            _ => d.source.clone(),
        }
    }

    /// Puts `d` as one event; its event id. A failed entry (`FailedEntryCount` above 0) is read
    /// by its error code as a failed call is: throttling or an internal failure is retried, a
    /// malformed detail is permanent, anything else is the bus's fault. A repeat is harmless
    /// since nothing was put.
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
            let text = format!("PutEvents: the entry failed: {code}: {message}");
            // The call itself succeeded: the answer's status says nothing about the entry.
            return Err(read_error(200, code, text));
        }
        Ok(first.and_then(|e| e.event_id()).map(str::to_owned))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::destinations::tests::delivery;

    fn with_type(event_type: Option<String>) -> Delivery {
        Delivery {
            event_type,
            ..delivery(b"{}")
        }
    }

    #[test]
    fn an_event_type_eventbridge_would_refuse_falls_back_to_the_source_name() {
        let bus = EventBridge::new("default", "hookclaim.stripe", None);
        let at_most = "t".repeat(DETAIL_TYPE_MAX_CHARS);
        let multibyte = "é".repeat(DETAIL_TYPE_MAX_CHARS);
        let cases = [
            (Some("invoice.paid".to_string()), "invoice.paid"),
            (Some(at_most.clone()), at_most.as_str()),
            // EventBridge counts characters, not bytes.
            (Some(multibyte.clone()), multibyte.as_str()),
            (Some("t".repeat(DETAIL_TYPE_MAX_CHARS + 1)), "stripe"),
            (Some("x".repeat(256)), "stripe"),
            (Some(String::new()), "stripe"),
            (None, "stripe"),
        ];
        for (event_type, expected) in cases {
            let got = bus.detail_type(&with_type(event_type.clone()));
            assert_eq!(got, expected, "{event_type:?}");
            assert!(got.chars().count() <= DETAIL_TYPE_MAX_CHARS);
        }
        // A configured detail type (1-128 characters, checked when read) always wins.
        let fixed = EventBridge::new("default", "s", Some("Webhook".into()));
        let long = with_type(Some("x".repeat(200)));
        assert_eq!(fixed.detail_type(&long), "Webhook");
    }
}
