//! Full-text and vector search, at a snapshot or fresh. Results carry Lance's score
//! columns: `_score` (BM25, highest first) for text, `_distance` (lowest first) for vectors.

use arrow_array::{Float32Array, RecordBatch};
use lance_index::scalar::FullTextSearchQuery;
use snafu::ResultExt;
use tributary_memwal_adapter::fresh_scanner;

use crate::error::{MemWalSnafu, Result};
use crate::{TableReader, Tier};

/// Fresh searches fetch this many times `k` candidates per tier, so rows shadowed by a
/// newer write of their key do not leave fewer than `k` results.
const FRESH_OVERFETCH: f64 = 2.0;

/// A search over one table.
#[derive(Debug, Clone, Copy)]
pub enum Search<'a> {
    /// BM25 full-text search of `text` over `columns` (their inverted indexes where built;
    /// a flat search of what they do not cover).
    Text {
        columns: &'a [String],
        text: &'a str,
    },
    /// The nearest rows to `vector` in `column`, by L2 distance.
    Nearest { column: &'a str, vector: &'a [f32] },
}

impl TableReader<'_> {
    /// The best `k` rows for `search`, best first.
    pub async fn search(&self, search: &Search<'_>, k: usize) -> Result<RecordBatch> {
        match self.tier {
            Tier::Snapshot => {
                let mut scanner = self.base.scan();
                match *search {
                    Search::Text { columns, text } => {
                        scanner
                            .full_text_search(self.text_query(columns, text)?)
                            .map_err(self.invalid("text search"))?
                            .limit(Some(k as i64), None)
                            .map_err(self.invalid("limit"))?;
                    }
                    Search::Nearest { column, vector } => {
                        scanner
                            .nearest(column, &Float32Array::from(vector.to_vec()), k)
                            .map_err(self.invalid("nearest"))?;
                    }
                }
                scanner
                    .try_into_batch()
                    .await
                    .map_err(self.invalid("search"))
            }
            Tier::Fresh { writer } => {
                let scanner = fresh_scanner(self.base.clone(), writer)
                    .await
                    .context(MemWalSnafu)?
                    .with_overfetch_factor(FRESH_OVERFETCH);
                let scanner = match *search {
                    Search::Text { columns, text } => scanner
                        .full_text_search(self.text_query(columns, text)?)
                        .map_err(self.invalid("text search"))?
                        .limit(Some(k as i64), None)
                        .map_err(self.invalid("limit"))?,
                    Search::Nearest { column, vector } => scanner
                        .nearest(column, &Float32Array::from(vector.to_vec()), k)
                        .map_err(self.invalid("nearest"))?,
                };
                scanner
                    .try_into_batch()
                    .await
                    .map_err(self.invalid("search"))
            }
        }
    }

    fn text_query(&self, columns: &[String], text: &str) -> Result<FullTextSearchQuery> {
        FullTextSearchQuery::new(text.to_owned())
            .with_columns(columns)
            .map_err(self.invalid("text search"))
    }
}
