//! The graph's embedding provider: named in its settings (`__settings/embedder.json`),
//! the built-in lexical embedder when none is named. Read again by each fold, load and
//! search that needs it, so every process of the graph embeds alike after a change.

use std::sync::Arc;

use snafu::ResultExt;
use tributary_embed::{EmbedError, Embedder, EmbedderConfig};

use crate::error::{EmbedSnafu, EmbedderSettingsSnafu, Result, StorageSnafu};
use crate::graph::Graph;

/// Where a graph's embedder settings live, beside its tables.
pub const EMBEDDER_PATH: &str = tributary_storage::layout::EMBEDDER;

impl Graph {
    /// The graph's embedder settings (the built-in embedder when none are stored).
    pub async fn embedder_settings(&self) -> Result<EmbedderConfig> {
        settings_in(&self.store).await
    }

    /// Name the graph's embedding provider. Vectors already folded stay as they were:
    /// a new provider's vectors are only comparable with its own, so rows keep the old
    /// provider's until their text changes (or they are loaded again without a vector).
    pub async fn set_embedder(&self, settings: &EmbedderConfig) -> Result<()> {
        settings.build().context(EmbedSnafu)?;
        let bytes = serde_json::to_vec_pretty(settings).map_err(|e| {
            EmbedderSettingsSnafu {
                path: EMBEDDER_PATH,
                problem: e.to_string(),
            }
            .build()
        })?;
        self.store
            .put(EMBEDDER_PATH, bytes)
            .await
            .context(StorageSnafu)
    }

    /// The provider for a write: the settings are read when it first has texts to embed,
    /// so a write that embeds nothing reads nothing more.
    pub(crate) fn embedder_for_writes(&self) -> GraphEmbedder {
        GraphEmbedder {
            store: self.store.clone(),
            provider: tokio::sync::OnceCell::new(),
        }
    }

    /// The provider the settings name.
    pub(crate) async fn embedder(&self) -> Result<Arc<dyn Embedder>> {
        self.embedder_settings().await?.build().context(EmbedSnafu)
    }
}

/// The graph's provider, its settings read on first use.
#[derive(Debug)]
pub(crate) struct GraphEmbedder {
    store: tributary_storage::GraphStore,
    provider: tokio::sync::OnceCell<Arc<dyn Embedder>>,
}

#[async_trait::async_trait]
impl Embedder for GraphEmbedder {
    async fn embed(&self, texts: &[&str], dimension: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let provider =
            self.provider
                .get_or_try_init(|| async {
                    let settings = settings_in(&self.store).await.map_err(|e| {
                        EmbedError::SettingsUnreadable {
                            problem: e.to_string(),
                        }
                    })?;
                    settings.build()
                })
                .await?;
        provider.embed(texts, dimension).await
    }

    fn describe(&self) -> String {
        match self.provider.get() {
            Some(provider) => provider.describe(),
            None => "the graph's embedder".to_owned(),
        }
    }
}

async fn settings_in(store: &tributary_storage::GraphStore) -> Result<EmbedderConfig> {
    let Some(bytes) = store.get(EMBEDDER_PATH).await.context(StorageSnafu)? else {
        return Ok(EmbedderConfig::default());
    };
    serde_json::from_slice(&bytes).map_err(|e| {
        EmbedderSettingsSnafu {
            path: EMBEDDER_PATH,
            problem: e.to_string(),
        }
        .build()
    })
}
