//! One read being configured: Lance's dataset scanner (snapshot tier) or its `LsmScanner`
//! (fresh tier) behind one builder. The first configures in place, the second by value.

use arrow_array::{Array, RecordBatch};
use lance::dataset::scanner::Scanner;
use lance_index::scalar::FullTextSearchQuery;
use tributary_memwal_adapter::LsmScanner;

pub(crate) enum Plan {
    Snapshot(Box<Scanner>),
    Fresh(Box<LsmScanner>),
}

type Step = lance::Result<Plan>;

impl Plan {
    pub fn project(self, columns: &[String]) -> Step {
        Ok(match self {
            Plan::Snapshot(mut scanner) => {
                scanner.project(columns)?;
                Plan::Snapshot(scanner)
            }
            Plan::Fresh(scanner) => Plan::Fresh(Box::new(scanner.project(columns)?)),
        })
    }

    pub fn filter(self, filter: &str) -> Step {
        Ok(match self {
            Plan::Snapshot(mut scanner) => {
                scanner.filter(filter)?;
                Plan::Snapshot(scanner)
            }
            Plan::Fresh(scanner) => Plan::Fresh(Box::new(scanner.filter(filter)?)),
        })
    }

    pub fn limit(self, limit: usize) -> Step {
        let limit = Some(limit as i64);
        Ok(match self {
            Plan::Snapshot(mut scanner) => {
                scanner.limit(limit, None)?;
                Plan::Snapshot(scanner)
            }
            Plan::Fresh(scanner) => Plan::Fresh(Box::new(scanner.limit(limit, None)?)),
        })
    }

    pub fn full_text_search(self, query: FullTextSearchQuery) -> Step {
        Ok(match self {
            Plan::Snapshot(mut scanner) => {
                scanner.full_text_search(query)?;
                Plan::Snapshot(scanner)
            }
            Plan::Fresh(scanner) => Plan::Fresh(Box::new(scanner.full_text_search(query)?)),
        })
    }

    pub fn nearest(self, column: &str, vector: &dyn Array, k: usize) -> Step {
        Ok(match self {
            Plan::Snapshot(mut scanner) => {
                scanner.nearest(column, vector, k)?;
                Plan::Snapshot(scanner)
            }
            Plan::Fresh(scanner) => Plan::Fresh(Box::new(scanner.nearest(column, vector, k)?)),
        })
    }

    /// Fresh searches fetch `factor` × k candidates per tier (no effect at a snapshot).
    pub fn overfetch(self, factor: f64) -> Plan {
        match self {
            Plan::Fresh(scanner) => Plan::Fresh(Box::new(scanner.with_overfetch_factor(factor))),
            snapshot => snapshot,
        }
    }

    pub async fn run(&self) -> lance::Result<RecordBatch> {
        match self {
            Plan::Snapshot(scanner) => scanner.try_into_batch().await,
            Plan::Fresh(scanner) => scanner.try_into_batch().await,
        }
    }
}
