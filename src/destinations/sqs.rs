//! SQS `SendMessage`: the payload as the message body, the delivery's names as message
//! attributes. On a FIFO queue the deduplication id is the idempotency key, so SQS drops a
//! repeat sent within its five-minute deduplication window.

use aws_sdk_sqs::types::MessageAttributeValue;

use super::{claim_check, sdk_failure, DestinationError, Stand};
use crate::processor::Delivery;

/// One queue.
pub(super) struct Sqs {
    queue_url: String,
    fifo: bool,
    group_pointer: Option<String>,
}

/// The attributes' data type, counted in the message's size as SQS counts it.
const STRING: &str = "String";

impl Sqs {
    pub(super) fn new(queue_url: &str, fifo: bool, group_pointer: Option<String>) -> Self {
        Sqs {
            queue_url: queue_url.to_owned(),
            fifo,
            group_pointer,
        }
    }

    /// Sends `d` as one message; its message id.
    pub(super) async fn send(
        &self,
        client: &aws_sdk_sqs::Client,
        d: &Delivery,
        max_bytes: Option<usize>,
    ) -> Result<Option<String>, DestinationError> {
        let (body, attributes) = message(d, max_bytes);
        let mut req = client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body);
        for (name, value) in attributes {
            let value = MessageAttributeValue::builder()
                .data_type(STRING)
                .string_value(value)
                .build()
                .map_err(|e| DestinationError::Permanent(format!("message attribute {name}: {e}")))?;
            req = req.message_attributes(name, value);
        }
        if self.fifo {
            req = req
                .message_deduplication_id(d.idempotency_key())
                .message_group_id(group_id(d, self.group_pointer.as_deref()));
        }
        let out = req
            .send()
            .await
            .map_err(|e| sdk_failure("SendMessage", &e))?;
        Ok(out.message_id().map(str::to_owned))
    }
}

/// The message body and its attributes: the payload when it is text SQS accepts and the whole
/// message fits in `max_bytes` (SQS counts attribute names, types and values too), else a claim
/// check, flagged in a `claim_check` attribute.
fn message(d: &Delivery, max_bytes: Option<usize>) -> (String, Vec<(&'static str, String)>) {
    let mut attributes = vec![
        ("idempotency_key", d.idempotency_key()),
        ("source", d.source.clone()),
        ("delivery_id", d.delivery_id.clone()),
    ];
    if let Some(t) = &d.event_type {
        attributes.push(("event_type", t.clone()));
    }
    let size = |body: &str, attributes: &[(&str, String)]| {
        body.len()
            + attributes
                .iter()
                .map(|(n, v)| n.len() + STRING.len() + v.len())
                .sum::<usize>()
    };
    let stand = match std::str::from_utf8(&d.payload) {
        Ok(text) if !text.chars().all(sqs_char) => Some(Stand::NotText),
        Ok(text) if max_bytes.is_some_and(|most| size(text, &attributes) > most) => {
            Some(Stand::TooLarge)
        }
        Ok(_) => None,
        Err(_) => Some(Stand::NotText),
    };
    match stand {
        None => (String::from_utf8_lossy(&d.payload).into_owned(), attributes),
        Some(why) => {
            attributes.push(("claim_check", why.as_str().to_owned()));
            (claim_check(d, why), attributes)
        }
    }
}

/// The characters SQS accepts in a message body.
fn sqs_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | ' '..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// The FIFO message group: the payload's value at `pointer` when it is a string or number SQS
/// accepts as a group id (1-128 visible ASCII characters), otherwise the source name.
fn group_id(d: &Delivery, pointer: Option<&str>) -> String {
    let value = pointer.and_then(|p| {
        let json: serde_json::Value = d.json().ok()?;
        match json.pointer(p)? {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    });
    value
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .unwrap_or_else(|| d.source.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::destinations::tests::delivery;

    #[test]
    fn the_group_comes_from_the_pointer_or_the_source() {
        let d = delivery(br#"{"data":{"object":{"customer":"cus_1","n":7,"o":{}}}}"#);
        assert_eq!(group_id(&d, Some("/data/object/customer")), "cus_1");
        assert_eq!(group_id(&d, Some("/data/object/n")), "7");
        assert_eq!(group_id(&d, Some("/data/object/o")), "stripe");
        assert_eq!(group_id(&d, Some("/missing")), "stripe");
        assert_eq!(group_id(&d, None), "stripe");
        assert_eq!(group_id(&delivery(b"not json"), Some("/a")), "stripe");
    }

    #[test]
    fn text_within_the_limit_is_sent_as_is_and_anything_else_as_a_claim_check() {
        let (body, attributes) = message(&delivery(b"{\"a\":1}"), Some(1000));
        assert_eq!(body, "{\"a\":1}");
        assert!(attributes.iter().all(|(n, _)| *n != "claim_check"));
        let key = delivery(b"").idempotency_key();
        assert!(attributes.contains(&("idempotency_key", key)));

        let (body, attributes) = message(&delivery(&[b'x'; 900]), Some(1000));
        assert!(body.contains("\"claim_check\":\"too_large\""), "{body}");
        assert!(attributes.contains(&("claim_check", "too_large".into())));

        let (body, _) = message(&delivery(&[0xff, 0xfe]), None);
        assert!(body.contains("\"claim_check\":\"not_text\""), "{body}");
        let (body, _) = message(&delivery(b"a\x00b"), None);
        assert!(body.contains("not_text"), "{body}");
    }
}
