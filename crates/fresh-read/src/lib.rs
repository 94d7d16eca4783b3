//! Reads of one table: at a snapshot, or fresh — the snapshot's table plus what its MemWAL
//! holds beyond it (flushed generations not yet folded, and in the writing process the live
//! memtables), newest write per key winning. Planning is Lance's: its dataset scanner for
//! the snapshot tier, its `LsmScanner` (point lookups, merged scans, full-text and vector
//! search over every tier) for the fresh one.

mod error;
mod filter;
mod plan;
mod search;

use arrow_array::RecordBatch;
use lance::Dataset;
use snafu::ResultExt;
use tributary_memwal_adapter::{fresh_scanner, TableWriter};
use tributary_storage::{lance_text, quote};

pub use error::{Error, Result};
pub use search::Search;

use error::{ArrowSnafu, MemWalSnafu};
use plan::Plan;

/// What a user reads when Lance refuses `what` (a filter, a projection, a search) on
/// `table`: the unknown field and Lance's suggestion, or Lance's reason without its source
/// location.
fn describe_invalid(table: &str, what: &str, source: &lance::Error) -> String {
    match lance_text::unknown_field(source) {
        Some(unknown) => {
            let hint = match unknown.suggestion {
                Some(meant) => format!(" (did you mean `{meant}`?)"),
                // `name = bob`: a bare word is a column to SQL; a text value is quoted.
                None if what == "filter" => format!(
                    " (if `{}` is a value, quote it: '{}')",
                    unknown.field, unknown.field
                ),
                None => String::new(),
            };
            format!("unknown field `{}` of {table}{hint}", unknown.field)
        }
        None => format!(
            "invalid {what} on {table}: {}",
            lance_text::user_message(source)
        ),
    }
}

/// What a scan asks for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Query<'a> {
    /// A SQL predicate (Lance's scanner filter).
    pub filter: Option<&'a str>,
    /// Columns to return, in order; all when `None`.
    pub select: Option<&'a [String]>,
    pub limit: Option<usize>,
}

/// Which data a read sees.
#[derive(Clone, Copy)]
pub enum Tier<'a> {
    /// Only what the snapshot's commit made visible.
    Snapshot,
    /// The snapshot + flushed, unfolded generations + `writer`'s memtables (this process).
    Fresh { writer: Option<&'a TableWriter> },
}

/// One table, read at a snapshot version (`base`) through a tier.
pub struct TableReader<'a> {
    base: Dataset,
    tier: Tier<'a>,
    /// The commit the read is at, named when reading the table's files fails.
    commit: Option<String>,
}

impl<'a> TableReader<'a> {
    pub fn new(base: Dataset, tier: Tier<'a>) -> TableReader<'a> {
        TableReader {
            base,
            tier,
            commit: None,
        }
    }

    /// The reader, naming `commit` in its failures to read the table's files.
    pub fn at_commit(mut self, commit: &str) -> TableReader<'a> {
        self.commit = Some(commit.to_owned());
        self
    }

    /// The table's name as users know it (`Person` for `…/nodes/Person.lance`): messages
    /// never carry the store's URI.
    fn table(&self) -> String {
        let uri = self.base.uri().trim_end_matches('/');
        let last = uri.rsplit('/').next().unwrap_or(uri);
        last.strip_suffix(".lance").unwrap_or(last).to_owned()
    }

    pub(crate) fn invalid(&self, what: &str) -> impl Fn(lance::Error) -> Error + '_ {
        let what = what.to_owned();
        move |source| Error::InvalidQuery {
            message: describe_invalid(&self.table(), &what, &source),
        }
    }

    /// A failure while running a planned read: the filter's fault when there is one (Lance
    /// checks some predicates only at execution), unless the table's files failed (one
    /// missing or damaged, the store unreachable): then the store's, naming the commit.
    pub(crate) fn execution(&self, filter: Option<&str>) -> impl Fn(lance::Error) -> Error + '_ {
        let blame_filter = filter.is_some();
        move |source| {
            let files = tributary_storage::lance_text::is_file_failure(&source);
            if blame_filter && !files {
                return (self.invalid("filter"))(source);
            }
            let action = match (&self.commit, files) {
                (Some(commit), true) => format!(
                    "reading the files of commit {commit} (`tributary check` lists every \
                     missing or damaged file)"
                ),
                (Some(commit), false) => format!("scan at commit {commit}"),
                (None, _) => "scan".to_owned(),
            };
            Error::Lance {
                action,
                table: self.table(),
                source,
            }
        }
    }

    /// Rows matching `query`. A filter of the form `id = 'k'` or `id IN (…)` takes Lance's
    /// point-lookup path in both tiers (the key's BTree at the snapshot; when fresh, the
    /// memtables, then each generation newest first through its own key index, then the
    /// base).
    pub async fn scan(&self, query: &Query<'_>) -> Result<RecordBatch> {
        let mut plan = self.plan().await?;
        if let Some(columns) = query.select {
            plan = plan.project(columns).map_err(self.invalid("select"))?;
        }
        if let Some(filter) = query.filter {
            if let Some(rest) = filter::trailing_input(filter) {
                return Err(Error::InvalidQuery {
                    message: format!(
                        "invalid filter on {}: unexpected `{rest}` after a complete expression",
                        self.table()
                    ),
                });
            }
            plan = plan.filter(filter).map_err(self.invalid("filter"))?;
        }
        if let Some(limit) = query.limit {
            plan = plan.limit(limit).map_err(self.invalid("limit"))?;
        }
        let batch = plan.run().await.map_err(self.execution(query.filter))?;
        match query.select {
            // Lance's LSM scanner keeps the key it deduplicates on beside the columns
            // asked for: a fresh read returns exactly what a snapshot read does.
            Some(columns) => {
                let schema = batch.schema();
                let indices = columns
                    .iter()
                    .map(|c| {
                        schema.index_of(c).map_err(|_| Error::InvalidQuery {
                            message: format!("unknown field `{c}` of {}", self.table()),
                        })
                    })
                    .collect::<Result<Vec<usize>>>()?;
                batch.project(&indices).context(ArrowSnafu {
                    action: "project the selected columns",
                    table: self.table(),
                })
            }
            _ => Ok(batch),
        }
    }

    /// A read of this table through its tier, to configure.
    pub(crate) async fn plan(&self) -> Result<Plan> {
        Ok(match self.tier {
            Tier::Snapshot => Plan::Snapshot(Box::new(self.base.scan())),
            Tier::Fresh { writer } => Plan::Fresh(Box::new(
                fresh_scanner(self.base.clone(), writer)
                    .await
                    .context(MemWalSnafu)?,
            )),
        })
    }

    /// Rows whose `column` is one of `keys`, in chunks of one `IN (…)` filter each.
    pub async fn rows_where_in(
        &self,
        column: &str,
        keys: &[String],
        select: Option<&[String]>,
    ) -> Result<RecordBatch> {
        const KEYS_PER_SCAN: usize = 512;
        let mut batches = Vec::new();
        for chunk in keys.chunks(KEYS_PER_SCAN) {
            let list: Vec<String> = chunk.iter().map(|k| quote(k)).collect();
            let filter = format!("{column} IN ({})", list.join(", "));
            let query = Query {
                filter: Some(&filter),
                select,
                limit: None,
            };
            batches.push(self.scan(&query).await?);
        }
        match batches.first() {
            None => {
                let query = Query {
                    filter: Some("false"),
                    select,
                    limit: Some(0),
                };
                self.scan(&query).await
            }
            Some(first) => arrow_select::concat::concat_batches(&first.schema(), &batches).context(
                ArrowSnafu {
                    action: "concatenate rows",
                    table: self.table(),
                },
            ),
        }
    }
}
