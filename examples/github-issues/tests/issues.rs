//! The example's processor through `hookclaim::testing`, against a real PostgreSQL and a chat
//! API on loopback: issues kept once, an audit row per delivery, the chat API called with the
//! delivery's idempotency key, a throttled call retried no sooner than its `Retry-After` and a
//! refused one dead. `DATABASE_URL` names a database the tests may create a schema in
//! (`scripts/test` starts a throwaway one).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookclaim::testing::{Happened, Harness, Status};
use hookclaim::{Delivery, KeyedHttp};
use hookclaim_example_github_issues::Issues;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A chat API on loopback: answers each call with the next scripted answer (then 200), and
/// keeps each call's idempotency key.
struct Chat {
    url: String,
    keys: Arc<Mutex<Vec<String>>>,
}

impl Chat {
    async fn start(answers: &[&'static str]) -> Chat {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/messages", listener.local_addr().unwrap());
        let answers = Arc::new(Mutex::new(answers.iter().copied().collect::<VecDeque<_>>()));
        let keys = Arc::new(Mutex::new(Vec::new()));
        let seen = keys.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // One small request per connection: its head and its body, read to the end.
                while !complete(&request) {
                    match sock.read(&mut buf).await {
                        Ok(n) if n > 0 => request.extend_from_slice(&buf[..n]),
                        _ => break,
                    }
                }
                let head = String::from_utf8_lossy(&request).to_lowercase();
                if let Some(key) = head
                    .lines()
                    .find_map(|l| l.strip_prefix("idempotency-key:"))
                {
                    seen.lock().unwrap().push(key.trim().to_owned());
                }
                let status = answers.lock().unwrap().pop_front().unwrap_or("200 OK");
                let reply =
                    format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                let _ = sock.write_all(reply.as_bytes()).await;
            }
        });
        Chat { url, keys }
    }

    fn keys(&self) -> Vec<String> {
        self.keys.lock().unwrap().clone()
    }
}

/// Whether `request` holds its whole head and `content-length` body.
fn complete(request: &[u8]) -> bool {
    let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&request[..end]).to_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    request.len() >= end + 4 + length
}

/// A harness for the example's processor with the function's GitHub source, posting to `chat`.
async fn harness(chat: &Chat) -> Harness<Issues> {
    let url = std::env::var("DATABASE_URL").expect(
        "DATABASE_URL must name a PostgreSQL database these tests may write to \
         (scripts/test starts one)",
    );
    Harness::builder(Issues::new(KeyedHttp::new().unwrap(), &chat.url))
        .sources(r#"{"github":{"kind":"github"}}"#)
        .secrets(r#"{"github":"it's a secret"}"#)
        .connect(&url)
        .await
        .expect("harness")
}

/// GitHub's `issues` event `id`: issue 7 of octo/app, `action` (opened, closed…).
fn issue(id: &str, action: &str) -> Delivery {
    let body = serde_json::json!({
        "action": action,
        "issue": {"number": 7, "title": "Crash on start"},
        "repository": {"full_name": "octo/app"},
    });
    Delivery::new("github", id, body.to_string()).with_event_type("issues")
}

/// The issue's state, and the audit rows' delivery ids.
async fn recorded(h: &Harness<Issues>) -> (Option<String>, Vec<String>) {
    let state = h
        .client()
        .query_opt("SELECT state FROM example_issues WHERE number = 7", &[])
        .await
        .unwrap()
        .map(|r| r.get(0));
    let audit = h
        .client()
        .query(
            "SELECT delivery_id FROM example_issue_audit ORDER BY recorded_at",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    (state, audit)
}

#[tokio::test]
async fn an_issue_opened_then_closed_is_kept_once_audited_and_announced_once_per_delivery() {
    let chat = Chat::start(&[]).await;
    let h = harness(&chat).await;
    let opened = issue("d-1", "opened");
    // Through the webhook, as GitHub signs it.
    let request = h
        .request("github")
        .id("d-1")
        .event_type("issues")
        .body(opened.payload.clone())
        .build()
        .unwrap();
    assert_eq!(h.webhook().handle(request).await.status(), 200);
    assert_eq!(
        h.deliver(&opened).await.unwrap().outcome.happened,
        Happened::Duplicate
    );
    let closed = issue("d-2", "closed");
    assert_eq!(
        h.deliver(&closed).await.unwrap().outcome.happened,
        Happened::Done
    );

    assert_eq!(
        recorded(&h).await,
        (Some("closed".into()), vec!["d-1".into(), "d-2".into()])
    );
    assert_eq!(
        chat.keys(),
        [opened.idempotency_key(), closed.idempotency_key()]
    );
}

#[tokio::test]
async fn a_throttled_announcement_is_refused_before_its_retry_after_and_redriven_after() {
    let chat = Chat::start(&["429 Too Many Requests\r\nretry-after: 30"]).await;
    let h = harness(&chat).await;
    let opened = issue("d-1", "opened");

    let first = h.deliver(&opened).await.unwrap();
    assert_eq!(
        first.outcome.happened,
        Happened::Deferred(Duration::from_secs(30))
    );
    // Not due yet: the redelivery and the retention run leave it, and the chat API is not called.
    h.advance(Duration::from_secs(29)).await.unwrap();
    let early = h.deliver(&opened).await.unwrap();
    assert!(
        matches!(early.outcome.happened, Happened::RetryLater(_)),
        "{early:?}"
    );
    assert_eq!(h.retention_pass().await.unwrap().reclaimed, 0);
    assert_eq!(chat.keys().len(), 1);
    h.advance(Duration::from_secs(1)).await.unwrap();
    let report = h.retention_pass().await.unwrap();

    assert_eq!(report.redriven.ok, 1);
    let row = h.row("github", "d-1").await.unwrap().unwrap();
    // The deferral spent no attempt: the second attempt is the first counted.
    assert_eq!((row.status, row.attempt), (Status::Done, 2));
    assert_eq!(
        recorded(&h).await,
        (Some("opened".into()), vec!["d-1".into()])
    );
    assert_eq!(
        chat.keys(),
        [opened.idempotency_key(), opened.idempotency_key()]
    );
}

#[tokio::test]
async fn a_refused_announcement_makes_the_delivery_dead_and_writes_nothing() {
    let chat = Chat::start(&["400 Bad Request"]).await;
    let h = harness(&chat).await;

    let dead = h.deliver(&issue("d-1", "opened")).await.unwrap();

    assert_eq!(dead.outcome.happened, Happened::Dead);
    let row = dead.row.unwrap();
    assert_eq!(row.status, Status::Dead);
    assert_eq!(
        row.last_error.as_deref(),
        Some("endpoint answered 400 Bad Request")
    );
    assert_eq!(recorded(&h).await, (None, vec![]));
}
