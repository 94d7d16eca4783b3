//! The valid lines of one request (a load, or an ingest send), by kind.

use tributary_schema::{Decoded, TypeBatch, TypeDeletes, TypePatches};

#[derive(Debug, Default, Clone)]
pub struct Writes {
    /// Whole rows, one batch per type.
    pub batches: Vec<TypeBatch>,
    /// Keys to delete, per type.
    pub deletes: Vec<TypeDeletes>,
    /// Patches, per type.
    pub patches: Vec<TypePatches>,
}

impl Writes {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.batches.iter().all(|b| b.batch.num_rows() == 0)
            && self.deletes.is_empty()
            && self.patches.is_empty()
    }

    /// Every type the request writes.
    pub fn types(&self) -> impl Iterator<Item = &str> {
        self.batches
            .iter()
            .map(|b| b.type_name.as_str())
            .chain(self.deletes.iter().map(|d| d.type_name.as_str()))
            .chain(self.patches.iter().map(|p| p.rows.type_name.as_str()))
    }
}

impl From<Decoded> for Writes {
    fn from(decoded: Decoded) -> Self {
        Writes {
            batches: decoded.batches,
            deletes: decoded.deletes,
            patches: decoded.patches,
        }
    }
}
