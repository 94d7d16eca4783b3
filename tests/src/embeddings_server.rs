//! A local server speaking the OpenAI embeddings API, for tests and benchmarks: it
//! answers with the built-in embedder's vectors (so results are checkable), counts
//! requests and texts, and fails, stalls or slows down on demand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use tributary::Embedder;

/// What the next requests meet.
#[derive(Debug, Clone, Default)]
pub struct Behaviour {
    /// This many requests are answered with `fail_status` first.
    pub failures: u32,
    pub fail_status: u16,
    /// Every request is answered with this status (after `failures` run out).
    pub always: Option<u16>,
    /// Every request waits this long before it is answered.
    pub delay: Duration,
}

#[derive(Default)]
struct Counts {
    requests: AtomicU64,
    texts: AtomicU64,
    behaviour: Mutex<Behaviour>,
    batches: Mutex<Vec<usize>>,
    seen: Mutex<Vec<String>>,
}

/// The running server; it stops when the test's runtime does.
#[derive(Clone)]
pub struct EmbeddingsServer {
    /// The base URL, e.g. `http://127.0.0.1:PORT/v1`.
    pub url: String,
    counts: Arc<Counts>,
}

impl EmbeddingsServer {
    pub async fn start() -> EmbeddingsServer {
        let counts = Arc::new(Counts::default());
        let app = axum::Router::new()
            .route("/v1/embeddings", axum::routing::post(embeddings))
            .with_state(counts.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        EmbeddingsServer {
            url: format!("http://{address}/v1"),
            counts,
        }
    }

    pub fn behave(&self, behaviour: Behaviour) {
        *self.counts.behaviour.lock().expect("lock") = behaviour;
    }

    /// Requests received, answered or not.
    pub fn requests(&self) -> u64 {
        self.counts.requests.load(Ordering::SeqCst)
    }

    /// Texts embedded (in answered requests).
    pub fn texts(&self) -> u64 {
        self.counts.texts.load(Ordering::SeqCst)
    }

    /// Texts per answered request, in order.
    pub fn batches(&self) -> Vec<usize> {
        self.counts.batches.lock().expect("lock").clone()
    }

    /// Every text embedded, in order.
    pub fn seen(&self) -> Vec<String> {
        self.counts.seen.lock().expect("lock").clone()
    }
}

#[derive(serde::Deserialize)]
struct Request {
    model: String,
    input: Vec<String>,
}

async fn embeddings(State(counts): State<Arc<Counts>>, Json(request): Json<Request>) -> Response {
    counts.requests.fetch_add(1, Ordering::SeqCst);
    let behaviour = {
        let mut behaviour = counts.behaviour.lock().expect("lock");
        let now = behaviour.clone();
        behaviour.failures = behaviour.failures.saturating_sub(1);
        now
    };
    tokio::time::sleep(behaviour.delay).await;
    let status = if behaviour.failures > 0 {
        Some(behaviour.fail_status)
    } else {
        behaviour.always
    };
    if let Some(status) = status {
        let status = StatusCode::from_u16(status).expect("status");
        let body =
            serde_json::json!({"error": {"message": format!("the test server says {status}")}});
        return (status, Json(body)).into_response();
    }
    assert_eq!(request.model, "test-model");
    let vectors = tributary::Lexical
        .embed(
            &request.input.iter().map(String::as_str).collect::<Vec<_>>(),
            8,
        )
        .await
        .expect("lexical");
    counts
        .texts
        .fetch_add(request.input.len() as u64, Ordering::SeqCst);
    counts
        .batches
        .lock()
        .expect("lock")
        .push(request.input.len());
    counts.seen.lock().expect("lock").extend(request.input);
    let data: Vec<_> = vectors
        .into_iter()
        .enumerate()
        .map(|(index, embedding)| serde_json::json!({"object": "embedding", "index": index, "embedding": embedding}))
        .collect();
    Json(serde_json::json!({"object": "list", "data": data, "model": "test-model"})).into_response()
}
