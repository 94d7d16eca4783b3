//! Full-text and vector search, at a snapshot or fresh. Results carry Lance's score
//! columns: `_score` (BM25, highest first) for text, `_distance` (the squared Euclidean distance, Lance's
//! `l2`; lowest first) for vectors.

use arrow_array::{Float32Array, RecordBatch};
use lance_index::scalar::FullTextSearchQuery;

use crate::error::Result;
use crate::TableReader;

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
        let plan = self.plan().await?.overfetch(FRESH_OVERFETCH);
        let plan = match *search {
            Search::Text { columns, text } => plan
                .full_text_search(self.text_query(columns, text)?)
                .map_err(self.invalid("text search"))?
                .limit(k)
                .map_err(self.invalid("limit"))?,
            Search::Nearest { column, vector } => plan
                .nearest(column, &Float32Array::from(vector.to_vec()), k)
                .map_err(self.invalid("nearest"))?,
        };
        plan.run().await.map_err(self.invalid("search"))
    }

    fn text_query(&self, columns: &[String], text: &str) -> Result<FullTextSearchQuery> {
        FullTextSearchQuery::new(text.to_owned())
            .with_columns(columns)
            .map_err(self.invalid("text search"))
    }
}
