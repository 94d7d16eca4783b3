use std::sync::Arc;

use lance::io::WrappingObjectStore;
use object_store::list::PaginatedListStore;
use object_store::local::LocalFileSystem;
use object_store::ObjectStore;

use crate::counting::{CountingStore, OpCounter};
use crate::disk::DiskStore;
use crate::faults::{FaultStore, Faults};

/// The store every Lance dataset of a graph is opened through. On a local graph it is
/// object_store's local filesystem with fsync on (files and their parent directories):
/// Lance hands us its own unsynced local store, and we replace it rather than wrap it,
/// since its writes cannot be made durable from outside. On an object store Lance's own
/// client is kept (a PUT is durable when it returns). Either way the store is optionally
/// faulted (latency and injected failures, nearest the store) and counted (outermost, so
/// the counts are what Tributary and Lance asked for); a local disk's refusals (full,
/// read-only, permission) come back naming the file's role.
#[derive(Debug)]
pub struct GraphStoreWrapper {
    local: bool,
    counter: Option<OpCounter>,
    faults: Option<Faults>,
}

impl GraphStoreWrapper {
    pub fn new(local: bool, counter: Option<OpCounter>, faults: Option<Faults>) -> Self {
        Self {
            local,
            counter,
            faults,
        }
    }

    /// The local store (fsyncing) wrapped as this graph's stores are.
    pub fn local_store(&self) -> Arc<dyn ObjectStore> {
        self.layer(Arc::new(LocalFileSystem::new().with_fsync(true)), true)
    }

    fn layer(&self, store: Arc<dyn ObjectStore>, local: bool) -> Arc<dyn ObjectStore> {
        let store = match &self.faults {
            Some(faults) => Arc::new(FaultStore::new(store, faults.clone())),
            None => store,
        };
        let store: Arc<dyn ObjectStore> = if local {
            Arc::new(DiskStore::new(store))
        } else {
            store
        };
        match &self.counter {
            Some(counter) => Arc::new(CountingStore::new(store, counter.clone())),
            None => store,
        }
    }
}

impl WrappingObjectStore for GraphStoreWrapper {
    fn wrap(&self, _store_prefix: &str, original: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
        if self.local {
            self.local_store()
        } else {
            self.layer(original, false)
        }
    }

    // Listings must reach the wrapped store (its fsync, faults and counter), not Lance's
    // original.
    fn wrap_paginated(
        &self,
        _store_prefix: &str,
        _original: Arc<dyn PaginatedListStore>,
    ) -> Option<Arc<dyn PaginatedListStore>> {
        None
    }
}
