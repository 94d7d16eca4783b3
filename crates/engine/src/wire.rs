//! The HTTP form of every [`GraphOps`] operation, defined once beside the trait. A client
//! that can send a [`WireRequest`] and hand back the answer (a [`Transport`]) offers every
//! operation; `tributary serve` answers each at the route named here. Rows travel as an
//! Arrow IPC stream and results as the engine's own types (JSON), so a remote run prints
//! exactly what an embedded one does.

use std::time::Duration;

use arrow_array::RecordBatch;
use serde::de::DeserializeOwned;

use crate::{
    At, ChangeRecord, ChangesQuery, CleanupReport, CommitRecord, Direction, EmbedderConfig, Error,
    ErrorKind, FoldOutcome, GraphOps, IngestStatus, Language, LoadMode, LoadOptions, LoadOutcome,
    MergeOutcome, Pin, Prefer, PublisherKind, QueryRequest, ReadOptions, RejectPolicy, Result,
    SchemaOutcome, SearchQuery, Snapshot, View,
};

/// Media type of an Arrow IPC stream: what a client asks for to get rows as Arrow.
pub const ARROW_STREAM: &str = "application/vnd.apache.arrow.stream";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireMethod {
    Get,
    Post,
    Delete,
}

/// One request to a graph on a server: a path below `/graphs/{id}`, its query, a body.
#[derive(Debug, Clone, PartialEq)]
pub struct WireRequest {
    pub method: WireMethod,
    /// Below `/graphs/{id}`, path segments already percent-encoded (`/types/Person`).
    pub path: String,
    pub query: Vec<(&'static str, String)>,
    pub body: Option<String>,
    /// The answer is rows: ask for them as an Arrow IPC stream.
    pub wants_rows: bool,
}

impl WireRequest {
    fn new(method: WireMethod, path: String) -> WireRequest {
        WireRequest {
            method,
            path,
            query: Vec::new(),
            body: None,
            wants_rows: false,
        }
    }

    fn get(path: impl Into<String>) -> WireRequest {
        WireRequest::new(WireMethod::Get, path.into())
    }

    fn post(path: impl Into<String>) -> WireRequest {
        WireRequest::new(WireMethod::Post, path.into())
    }

    fn query(mut self, name: &'static str, value: impl ToString) -> WireRequest {
        self.query.push((name, value.to_string()));
        self
    }

    fn query_opt(self, name: &'static str, value: Option<impl ToString>) -> WireRequest {
        match value {
            Some(value) => self.query(name, value),
            None => self,
        }
    }

    fn at(self, at: &At) -> WireRequest {
        match at {
            At::Branch(branch) => self.query("branch", branch),
            At::Commit(commit) => self.query("commit", commit),
        }
    }

    fn view(self, view: &View) -> WireRequest {
        let request = self.at(&view.at);
        if view.fresh {
            request.query("fresh", true)
        } else {
            request
        }
    }

    fn rows(mut self) -> WireRequest {
        self.wants_rows = true;
        self
    }
}

/// What sends a [`WireRequest`] to a graph on a server.
#[async_trait::async_trait]
pub trait Transport: Send + Sync {
    /// The body of a successful answer; an error answer becomes the error an embedded run
    /// would report, of the kind the server named.
    async fn send(&self, request: WireRequest) -> Result<Vec<u8>>;
}

fn unreadable(what: &str, error: impl std::fmt::Display) -> Error {
    Error::remote(
        ErrorKind::Internal,
        format!("unreadable {what} from the server: {error}"),
    )
}

fn json<T: DeserializeOwned>(body: Vec<u8>) -> Result<T> {
    serde_json::from_slice(&body).map_err(|e| unreadable("answer", e))
}

/// Rows sent as an Arrow IPC stream, as one batch.
fn rows(body: Vec<u8>) -> Result<RecordBatch> {
    let reader = arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(body), None)
        .map_err(|e| unreadable("rows", e))?;
    let schema = reader.schema();
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unreadable("rows", e))?;
    arrow_select::concat::concat_batches(&schema, &batches).map_err(|e| unreadable("rows", e))
}

/// Percent-encode one path segment.
fn encode(segment: &str) -> String {
    let mut out = String::new();
    for byte in segment.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[async_trait::async_trait]
impl<T: Transport> GraphOps for T {
    async fn load(&self, text: &str, options: &LoadOptions) -> Result<LoadOutcome> {
        let mode = match options.mode {
            LoadMode::Upsert => "upsert",
            LoadMode::Insert => "insert",
        };
        let mut request = WireRequest::post("/load")
            .query("branch", &options.branch)
            .query("mode", mode)
            .query_opt("idempotency_key", options.idempotency_key.as_ref());
        request.body = Some(text.to_owned());
        json(self.send(request).await?)
    }

    async fn read(&self, type_name: &str, options: &ReadOptions) -> Result<RecordBatch> {
        let view = View {
            at: options.at.clone(),
            fresh: options.fresh,
        };
        let request = WireRequest::get(format!("/types/{}", encode(type_name)))
            .view(&view)
            .query_opt("filter", options.filter.as_ref())
            .query_opt("select", options.select.as_ref().map(|s| s.join(",")))
            .query_opt("limit", options.limit)
            .query_opt("offset", options.offset)
            .rows();
        let request = match options.order_by.is_empty() {
            true => request,
            false => {
                let order: Vec<String> = options.order_by.iter().map(ToString::to_string).collect();
                request.query("order_by", order.join(","))
            }
        };
        rows(self.send(request).await?)
    }

    async fn count(&self, type_name: &str, options: &ReadOptions) -> Result<u64> {
        #[derive(serde::Deserialize)]
        struct Counted {
            count: u64,
        }
        let view = View {
            at: options.at.clone(),
            fresh: options.fresh,
        };
        let request = WireRequest::get(format!("/count/{}", encode(type_name)))
            .view(&view)
            .query_opt("filter", options.filter.as_ref());
        json::<Counted>(self.send(request).await?).map(|counted| counted.count)
    }

    async fn get(&self, type_name: &str, key: &str, view: &View) -> Result<Option<RecordBatch>> {
        let path = format!("/types/{}/{}", encode(type_name), encode(key));
        match self.send(WireRequest::get(path).view(view).rows()).await {
            Ok(body) => rows(body).map(Some),
            Err(error) if error.kind() == ErrorKind::NoRow => Ok(None),
            Err(error) => Err(error),
        }
    }

    async fn neighbors(
        &self,
        type_name: &str,
        key: &str,
        edge: &str,
        direction: Direction,
        view: &View,
        with_edges: bool,
    ) -> Result<RecordBatch> {
        let way = match direction {
            Direction::Out => "out",
            Direction::In => "in",
        };
        let path = format!("/neighbors/{}/{}", encode(type_name), encode(key));
        let request = WireRequest::get(path)
            .view(view)
            .query("edge", edge)
            .query("direction", way)
            .rows();
        let request = match with_edges {
            true => request.query("edges", true),
            false => request,
        };
        rows(self.send(request).await?)
    }

    async fn search(
        &self,
        type_name: &str,
        query: &SearchQuery,
        k: usize,
        view: &View,
    ) -> Result<RecordBatch> {
        let request = WireRequest::get(format!("/search/{}", encode(type_name))).view(view);
        let request = match query {
            SearchQuery::Text(text) => request.query("text", text),
            SearchQuery::Nearest(vector) => {
                let vector = serde_json::to_string(vector)
                    .map_err(|e| Error::remote(ErrorKind::InvalidInput, e.to_string()))?;
                request.query("nearest", vector)
            }
            SearchQuery::Similar(text) => request.query("similar", text),
        };
        rows(self.send(request.query("k", k).rows()).await?)
    }

    async fn query(&self, request: &QueryRequest) -> Result<RecordBatch> {
        let path = match request.language {
            Language::Cypher => "/query",
            Language::Sql => "/sql",
        };
        let body = serde_json::json!({
            "query": request.text,
            "params": request.params,
            "explain": request.explain,
            "max_rows": request.max_rows,
        });
        let mut wire = WireRequest::post(path).view(&request.view).rows();
        wire.body = Some(body.to_string());
        rows(self.send(wire).await?)
    }

    async fn log(&self, branch: &str, limit: usize) -> Result<Vec<CommitRecord>> {
        let request = WireRequest::get("/commits")
            .query("branch", branch)
            .query("limit", limit);
        json(self.send(request).await?)
    }

    async fn schema(&self) -> Result<String> {
        let body = self.send(WireRequest::get("/schema")).await?;
        String::from_utf8(body).map_err(|e| unreadable("schema", e))
    }

    async fn apply_schema(&self, source: &str) -> Result<SchemaOutcome> {
        let mut request = WireRequest::post("/schema");
        request.body = Some(source.to_owned());
        json(self.send(request).await?)
    }

    async fn publisher(&self) -> Result<PublisherKind> {
        json(self.send(WireRequest::get("/publisher")).await?)
    }

    async fn embedder_settings(&self) -> Result<EmbedderConfig> {
        json(self.send(WireRequest::get("/embedder")).await?)
    }

    async fn set_embedder(&self, settings: &EmbedderConfig) -> Result<()> {
        let mut request = WireRequest::post("/embedder");
        request.body = Some(
            serde_json::to_string(settings)
                .map_err(|e| Error::remote(ErrorKind::InvalidInput, e.to_string()))?,
        );
        self.send(request).await?;
        Ok(())
    }

    async fn ingest_status(&self, branch: &str) -> Result<IngestStatus> {
        let request = WireRequest::get("/ingest/status").query("branch", branch);
        json(self.send(request).await?)
    }

    async fn shards_of(&self, type_name: &str, keys: &[String]) -> Result<Vec<u32>> {
        let mut request = WireRequest::post(format!("/shards/{}", encode(type_name)));
        request.body = Some(serde_json::json!({ "keys": keys }).to_string());
        json(self.send(request).await?)
    }

    async fn fold(&self, branch: &str, policy: RejectPolicy) -> Result<FoldOutcome> {
        let request = WireRequest::post("/ingest/fold")
            .query("branch", branch)
            .query("halt", policy == RejectPolicy::Halt);
        json(self.send(request).await?)
    }

    async fn rejects(&self, at: &At) -> Result<RecordBatch> {
        rows(
            self.send(WireRequest::get("/rejects").at(at).rows())
                .await?,
        )
    }

    async fn cleanup(&self, older_than: Duration) -> Result<CleanupReport> {
        let request = WireRequest::post("/cleanup").query("older_than_s", older_than.as_secs());
        json(self.send(request).await?)
    }

    async fn create_branch(&self, name: &str, from: &At) -> Result<CommitRecord> {
        let request = WireRequest::post(format!("/branches/{}", encode(name))).at(from);
        json(self.send(request).await?)
    }

    async fn branches(&self) -> Result<Vec<CommitRecord>> {
        json(self.send(WireRequest::get("/branches")).await?)
    }

    async fn delete_branch(&self, name: &str) -> Result<()> {
        let path = format!("/branches/{}", encode(name));
        self.send(WireRequest::new(WireMethod::Delete, path))
            .await
            .map(drop)
    }

    async fn merge(&self, source: &str, into: &str, prefer: Prefer) -> Result<MergeOutcome> {
        let request =
            WireRequest::post(format!("/branches/{}/merge", encode(source))).query("into", into);
        let request = match prefer {
            Prefer::Neither => request,
            Prefer::Source => request.query("prefer", "source"),
            Prefer::Target => request.query("prefer", "target"),
        };
        json(self.send(request).await?)
    }

    async fn export(&self, type_name: &str, at: &At) -> Result<String> {
        let request = WireRequest::get("/export").at(at).query("types", type_name);
        String::from_utf8(self.send(request).await?).map_err(|e| unreadable("export", e))
    }

    async fn snapshot(&self, at: &At) -> Result<Snapshot> {
        json(self.send(WireRequest::get("/snapshot").at(at)).await?)
    }

    async fn pin(&self, name: &str, at: &At) -> Result<Pin> {
        let request = WireRequest::post(format!("/pins/{}", encode(name))).at(at);
        json(self.send(request).await?)
    }

    async fn unpin(&self, name: &str) -> Result<Pin> {
        let path = format!("/pins/{}", encode(name));
        json(
            self.send(WireRequest::new(WireMethod::Delete, path))
                .await?,
        )
    }

    async fn pins(&self) -> Result<Vec<Pin>> {
        json(self.send(WireRequest::get("/pins")).await?)
    }

    async fn changes(&self, query: &ChangesQuery) -> Result<Vec<ChangeRecord>> {
        let mut request = WireRequest::get("/changes")
            .query("branch", &query.branch)
            .query("since", &query.since)
            .query("limit", query.max_commits)
            .query("page", true);
        if !query.types.is_empty() {
            request = request.query("types", query.types.join(","));
        }
        let body = self.send(request).await?;
        let mut records = Vec::new();
        for line in body.split(|&byte| byte == b'\n').filter(|l| !l.is_empty()) {
            let record = std::str::from_utf8(line)
                .map_err(|e| unreadable("change record", e))
                .and_then(|line| {
                    ChangeRecord::from_line(line).map_err(|e| unreadable("change record", e))
                })?;
            if let ChangeRecord::Error(stopped) = record {
                let kind = ErrorKind::from_name(&stopped.kind).unwrap_or(ErrorKind::Internal);
                return Err(Error::remote(kind, stopped.error));
            }
            records.push(record);
        }
        Ok(records)
    }
}
