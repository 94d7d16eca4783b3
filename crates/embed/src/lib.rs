//! Embedding providers for `@embed` fields. Embedding is slow and external, so it never
//! sits between a producer and its acknowledgement: the fold (and a load, before its
//! commit) asks an [`Embedder`] for the vectors of the rows it writes.
//!
//! A graph names its provider in its settings ([`EmbedderConfig`]): the built-in
//! [`Lexical`] embedder (no model, no network) by default, or an [`OpenAiCompatible`]
//! HTTP service (hosted APIs, Ollama, vLLM, TEI).

use std::fmt;
use std::sync::Arc;

mod http;
mod lexical;

pub use http::{HttpSettings, OpenAiCompatible, DEFAULT_KEY_VARIABLE};
pub use lexical::Lexical;
use snafu::Snafu;

/// Texts in, one vector of `dimension` per text out, in order.
#[async_trait::async_trait]
pub trait Embedder: Send + Sync + fmt::Debug {
    async fn embed(&self, texts: &[&str], dimension: usize) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// What the provider is, for `schema` output and errors.
    fn describe(&self) -> String;
}

/// Why a provider gave no vectors.
#[derive(Debug, Snafu)]
#[snafu(visibility(pub(crate)))]
pub enum EmbedError {
    /// The provider answered with an error status.
    #[snafu(display("the embedding provider at {url} answered {status}: {message}"))]
    Refused {
        url: String,
        status: u16,
        message: String,
    },
    #[snafu(display("the embedding provider at {url} could not be reached: {source}"))]
    Unreachable { url: String, source: reqwest::Error },
    #[snafu(display("the embedding provider at {url} did not answer within {after_ms} ms"))]
    TimedOut { url: String, after_ms: u64 },
    /// An answer that is not what was asked for (count, shape or dimension).
    #[snafu(display("the embedding provider at {url} answered wrongly: {problem}"))]
    BadAnswer { url: String, problem: String },
    #[snafu(display("{source} (gave up after {attempts} {})", if *attempts == 1 { "attempt" } else { "attempts" }))]
    GaveUp {
        attempts: u32,
        source: Box<EmbedError>,
    },
    /// The settings cannot make a provider.
    #[snafu(display("embedder settings: {problem}"))]
    Settings { problem: String },
    /// The graph's settings could not be read (the store failed): nothing about any text.
    #[snafu(display("the embedder settings could not be read: {problem}"))]
    SettingsUnreadable { problem: String },
}

impl EmbedError {
    /// Whether the failure is the graph's settings, not anything about the texts asked:
    /// a write then fails whole (no row is to blame, none is dead-lettered).
    pub fn is_settings(&self) -> bool {
        match self {
            EmbedError::Settings { .. } | EmbedError::SettingsUnreadable { .. } => true,
            EmbedError::GaveUp { source, .. } => source.is_settings(),
            _ => false,
        }
    }

    /// Whether asking again may succeed: the provider was busy, down or slow.
    pub fn is_transient(&self) -> bool {
        match self {
            EmbedError::Refused { status, .. } => *status == 429 || *status >= 500,
            EmbedError::Unreachable { .. }
            | EmbedError::TimedOut { .. }
            | EmbedError::SettingsUnreadable { .. } => true,
            EmbedError::BadAnswer { .. } | EmbedError::Settings { .. } => false,
            EmbedError::GaveUp { source, .. } => source.is_transient(),
        }
    }
}

/// A graph's embedding provider, as its settings name it (`__settings/embedder.json`).
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(tag = "provider", rename_all = "snake_case", deny_unknown_fields)]
pub enum EmbedderConfig {
    /// Feature hashing of the text's words: offline and deterministic, lexical (texts
    /// sharing words are near), not semantic.
    #[default]
    Builtin,
    /// A service speaking the OpenAI embeddings API (`POST {url}/embeddings`).
    Openai(HttpSettings),
}

impl EmbedderConfig {
    /// The provider these settings name.
    pub fn build(&self) -> Result<Arc<dyn Embedder>, EmbedError> {
        Ok(match self {
            EmbedderConfig::Builtin => Arc::new(Lexical),
            EmbedderConfig::Openai(settings) => Arc::new(OpenAiCompatible::new(settings.clone())?),
        })
    }

    /// One line for `schema` output: what the vectors of `@embed` fields are.
    pub fn describe(&self) -> String {
        match self {
            EmbedderConfig::Builtin => Lexical.describe(),
            EmbedderConfig::Openai(settings) => {
                format!(
                    "model `{}` at {} (OpenAI-compatible)",
                    settings.model, settings.url
                )
            }
        }
    }
}
