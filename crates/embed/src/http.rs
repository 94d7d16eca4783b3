//! A provider speaking the OpenAI embeddings API (`POST {url}/embeddings` with a model
//! and a list of texts), which hosted APIs and local servers (Ollama, vLLM, TEI) all
//! answer: texts in batches, a few batches at once, each retried with back-off when the
//! provider is busy, down or slow.

use std::time::Duration;

use crate::{BadAnswerSnafu, EmbedError, Embedder, RefusedSnafu, SettingsSnafu};
use futures::{StreamExt, TryStreamExt};

/// Where the API key is read from when the settings name no other variable.
pub const DEFAULT_KEY_VARIABLE: &str = "TRIBUTARY_EMBEDDING_API_KEY";

/// How an OpenAI-compatible provider is reached.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpSettings {
    /// The API's base URL: `https://api.openai.com/v1`, `http://localhost:11434/v1`
    /// (Ollama), … `/embeddings` is added.
    pub url: String,
    /// The model to ask for, e.g. `text-embedding-3-small` or `nomic-embed-text`. Its
    /// vectors must have the dimension the `@embed` field declares.
    pub model: String,
    /// The environment variable that holds the API key, read by each process that
    /// embeds (the key itself is never stored). Unset: no key is sent (local servers).
    #[serde(default = "default_key_variable")]
    pub key_variable: String,
    /// Texts per request.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// Requests in flight at once.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// How long one request may take.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// How often a request that failed for a transient reason (429, 5xx, unreachable,
    /// timed out) is sent again.
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// The first pause before sending again; each later pause doubles it.
    #[serde(default = "default_backoff_ms")]
    pub backoff_ms: u64,
}

fn default_key_variable() -> String {
    DEFAULT_KEY_VARIABLE.to_owned()
}
fn default_batch_size() -> usize {
    64
}
fn default_concurrency() -> usize {
    4
}
fn default_timeout_ms() -> u64 {
    30_000
}
fn default_retries() -> u32 {
    4
}
fn default_backoff_ms() -> u64 {
    250
}

impl HttpSettings {
    /// Settings for `model` at `url`, everything else by default.
    pub fn new(url: impl Into<String>, model: impl Into<String>) -> HttpSettings {
        HttpSettings {
            url: url.into(),
            model: model.into(),
            key_variable: default_key_variable(),
            batch_size: default_batch_size(),
            concurrency: default_concurrency(),
            timeout_ms: default_timeout_ms(),
            retries: default_retries(),
            backoff_ms: default_backoff_ms(),
        }
    }
}

/// The longest pause before sending again, whatever the back-off or the provider's
/// `Retry-After` says.
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub struct OpenAiCompatible {
    settings: HttpSettings,
    endpoint: String,
    client: reqwest::Client,
}

impl OpenAiCompatible {
    pub fn new(settings: HttpSettings) -> Result<OpenAiCompatible, EmbedError> {
        let problem =
            if !(settings.url.starts_with("http://") || settings.url.starts_with("https://")) {
                Some(format!(
                    "`{}` is not an http:// or https:// URL",
                    settings.url
                ))
            } else if settings.model.trim().is_empty() {
                Some("the model is empty".to_owned())
            } else if settings.batch_size == 0 || settings.concurrency == 0 {
                Some("batch_size and concurrency must be at least 1".to_owned())
            } else if settings.timeout_ms == 0 {
                Some("timeout_ms must be at least 1".to_owned())
            } else {
                None
            };
        if let Some(problem) = problem {
            return SettingsSnafu { problem }.fail();
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(settings.timeout_ms))
            .build()
            .map_err(|e| EmbedError::Settings {
                problem: format!("cannot make an HTTP client: {e}"),
            })?;
        let endpoint = format!("{}/embeddings", settings.url.trim_end_matches('/'));
        Ok(OpenAiCompatible {
            settings,
            endpoint,
            client,
        })
    }

    /// One batch, sent again after a transient failure while attempts remain.
    async fn batch(&self, texts: &[&str], dimension: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.request(texts, dimension).await {
                Ok(vectors) => return Ok(vectors),
                Err((error, _)) if !error.is_transient() => return Err(error),
                Err((error, _)) if attempt > self.settings.retries => {
                    return Err(EmbedError::GaveUp {
                        attempts: attempt,
                        source: Box::new(error),
                    });
                }
                Err((error, retry_after)) => {
                    let backoff = Duration::from_millis(
                        self.settings
                            .backoff_ms
                            .saturating_mul(1 << (attempt - 1).min(16)),
                    );
                    let pause = retry_after.unwrap_or(backoff).min(LONGEST_PAUSE);
                    tracing::warn!(%error, attempt, pause_ms = pause.as_millis() as u64, "embedding request failed; sending it again");
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }

    /// One request; a failure carries the provider's `Retry-After`, if it gave one.
    async fn request(
        &self,
        texts: &[&str],
        dimension: usize,
    ) -> Result<Vec<Vec<f32>>, (EmbedError, Option<Duration>)> {
        let url = &self.endpoint;
        let mut request = self.client.post(url).json(&serde_json::json!({
            "model": self.settings.model,
            "input": texts,
            "encoding_format": "float",
        }));
        if let Ok(key) = std::env::var(&self.settings.key_variable) {
            request = request.bearer_auth(key);
        }
        let timed_out = |e: &reqwest::Error| {
            e.is_timeout().then(|| EmbedError::TimedOut {
                url: url.clone(),
                after_ms: self.settings.timeout_ms,
            })
        };
        let response = request.send().await.map_err(|e| {
            let error = timed_out(&e).unwrap_or_else(|| EmbedError::Unreachable {
                url: url.clone(),
                source: e,
            });
            (error, None)
        })?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = response.bytes().await.map_err(|e| {
            let error = timed_out(&e).unwrap_or_else(|| EmbedError::Unreachable {
                url: url.clone(),
                source: e,
            });
            (error, None)
        })?;
        if !status.is_success() {
            let error = RefusedSnafu {
                url: url.clone(),
                status: status.as_u16(),
                message: provider_message(&body),
            }
            .build();
            return Err((error, retry_after));
        }
        parse_answer(url, &body, texts.len(), dimension).map_err(|e| (e, None))
    }
}

#[async_trait::async_trait]
impl Embedder for OpenAiCompatible {
    async fn embed(&self, texts: &[&str], dimension: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let size = self.settings.batch_size;
        // Batches by their start, not by slice: a closure over borrowed slices does not
        // satisfy the `Send` the async trait asks of the future.
        let batches: Vec<Vec<Vec<f32>>> = futures::stream::iter((0..texts.len()).step_by(size))
            .map(|start| self.batch(&texts[start..(start + size).min(texts.len())], dimension))
            .buffered(self.settings.concurrency)
            .try_collect()
            .await?;
        Ok(batches.into_iter().flatten().collect())
    }

    fn describe(&self) -> String {
        format!(
            "model `{}` at {} (OpenAI-compatible)",
            self.settings.model, self.settings.url
        )
    }
}

/// What a provider said went wrong: its JSON error's message, or its text, shortened.
fn provider_message(body: &[u8]) -> String {
    let from_json = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            let error = v.get("error")?;
            error
                .get("message")
                .and_then(|m| m.as_str())
                .or_else(|| error.as_str())
                .map(str::to_owned)
        });
    let text = from_json.unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned());
    let mut short: String = text.chars().take(300).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    if short.is_empty() {
        "(no message)".to_owned()
    } else {
        short
    }
}

#[derive(serde::Deserialize)]
struct Answer {
    data: Vec<Item>,
}

#[derive(serde::Deserialize)]
struct Item {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

/// The vectors of an answer, in the order of the texts asked for.
fn parse_answer(
    url: &str,
    body: &[u8],
    texts: usize,
    dimension: usize,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let wrong = |problem: String| {
        BadAnswerSnafu {
            url: url.to_owned(),
            problem,
        }
        .build()
    };
    let answer: Answer = serde_json::from_slice(body)
        .map_err(|e| wrong(format!("not an embeddings answer ({e})")))?;
    if answer.data.len() != texts {
        return Err(wrong(format!(
            "{} vectors for {texts} texts",
            answer.data.len()
        )));
    }
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; texts];
    for (position, item) in answer.data.into_iter().enumerate() {
        let index = item.index.unwrap_or(position);
        if item.embedding.len() != dimension {
            return Err(wrong(format!(
                "vectors of {} dimensions where the field declares {dimension}; declare `Vector({})` or choose a model that gives {dimension}",
                item.embedding.len(),
                item.embedding.len()
            )));
        }
        match vectors.get_mut(index) {
            Some(slot @ None) => *slot = Some(item.embedding),
            _ => return Err(wrong(format!("index {index} is out of range or repeated"))),
        }
    }
    Ok(vectors.into_iter().flatten().collect())
}
