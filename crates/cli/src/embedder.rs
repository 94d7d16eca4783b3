//! `tributary embedder`: show or set the provider that fills a graph's `@embed` fields.

use std::io::Write;

use clap::{Args, ValueEnum};
use tributary::{EmbedderConfig, HttpSettings};

use crate::backend::{self, ServerArgs};
use crate::output::{self, Format};
use crate::Failure;

#[derive(Debug, Args)]
pub struct EmbedderArgs {
    /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
    graph: String,
    /// Set the provider: `builtin` (offline: hashing of words, lexical, not semantic) or
    /// `openai` (any service speaking the OpenAI embeddings API: hosted, Ollama, vLLM,
    /// TEI). Without it, the current settings are shown.
    #[arg(long, value_enum)]
    provider: Option<ProviderArg>,
    /// The API's base URL (`/embeddings` is added), e.g. https://api.openai.com/v1 or
    /// http://localhost:11434/v1.
    #[arg(long, required_if_eq("provider", "openai"))]
    url: Option<String>,
    /// The model, e.g. text-embedding-3-small. Its vectors must have the dimension the
    /// `@embed` field declares.
    #[arg(long, required_if_eq("provider", "openai"))]
    model: Option<String>,
    /// The environment variable holding the API key, read by every process that embeds
    /// (the key is never stored). Unset there: no key is sent.
    #[arg(long, default_value = tributary_embed_key_variable())]
    key_variable: String,
    /// Texts per request.
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// How long one request may take, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    timeout_ms: u64,
    /// How often a request that failed for a transient reason (429, 5xx, unreachable,
    /// timed out) is sent again, after 250 ms, then twice as long each time.
    #[arg(long, default_value_t = 4)]
    retries: u32,
}

fn tributary_embed_key_variable() -> &'static str {
    tributary::DEFAULT_KEY_VARIABLE
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProviderArg {
    Builtin,
    Openai,
}

pub async fn run(
    args: EmbedderArgs,
    server: &ServerArgs,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let graph = backend::open(&args.graph, server).await?;
    let settings = match args.provider {
        None => graph.embedder_settings().await?,
        Some(ProviderArg::Builtin) => {
            graph.set_embedder(&EmbedderConfig::Builtin).await?;
            EmbedderConfig::Builtin
        }
        Some(ProviderArg::Openai) => {
            let (Some(url), Some(model)) = (args.url, args.model) else {
                return Err(Failure::usage("--provider openai needs --url and --model"));
            };
            let settings = EmbedderConfig::Openai(HttpSettings {
                key_variable: args.key_variable,
                batch_size: args.batch_size,
                concurrency: args.concurrency,
                timeout_ms: args.timeout_ms,
                retries: args.retries,
                ..HttpSettings::new(url, model)
            });
            graph.set_embedder(&settings).await?;
            settings
        }
    };
    let mut summary = output::Summary::new()
        .with("graph", args.graph)
        .with("embedder", settings.describe());
    if let EmbedderConfig::Openai(http) = &settings {
        summary = summary
            .with("key_variable", http.key_variable.clone())
            .with("batch_size", http.batch_size)
            .with("concurrency", http.concurrency)
            .with("timeout_ms", http.timeout_ms)
            .with("retries", http.retries);
    }
    summary.write(out, format).map_err(Failure::io)
}
