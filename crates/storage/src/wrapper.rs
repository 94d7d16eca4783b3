use std::sync::Arc;

use lance::io::WrappingObjectStore;
use object_store::list::PaginatedListStore;
use object_store::local::LocalFileSystem;
use object_store::ObjectStore;

use crate::counting::{CountingStore, OpCounter};

/// The store every Lance dataset of a local graph is opened through: object_store's local
/// filesystem with fsync on (files and their parent directories), optionally counted.
///
/// Lance hands us its own unsynced local store; we replace it rather than wrap it, since
/// its writes cannot be made durable from outside.
#[derive(Debug)]
pub struct GraphStoreWrapper {
    counter: Option<OpCounter>,
}

impl GraphStoreWrapper {
    pub fn local(counter: Option<OpCounter>) -> Self {
        Self { counter }
    }

    /// The fsyncing (and counting, if asked) local store.
    pub fn store(&self) -> Arc<dyn ObjectStore> {
        let local: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new().with_fsync(true));
        match &self.counter {
            Some(counter) => Arc::new(CountingStore::new(local, counter.clone())),
            None => local,
        }
    }
}

impl WrappingObjectStore for GraphStoreWrapper {
    fn wrap(&self, _store_prefix: &str, _original: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
        self.store()
    }

    // Listings must reach the replacement store (and its counter), not Lance's original.
    fn wrap_paginated(
        &self,
        _store_prefix: &str,
        _original: Arc<dyn PaginatedListStore>,
    ) -> Option<Arc<dyn PaginatedListStore>> {
        None
    }
}
