//! `--server URL`: the same commands against a `tributary serve` over HTTP. Rows travel as
//! Arrow IPC and results as the engine's own types, so output matches an embedded run.

use std::time::Duration;

use arrow_array::RecordBatch;
use reqwest::{Method, RequestBuilder, Response};
use serde::de::DeserializeOwned;
use tributary::{
    At, CleanupReport, CommitRecord, Direction, Error, ErrorKind, FoldOutcome, GraphOps,
    IngestStatus, LoadMode, LoadOptions, LoadOutcome, ReadOptions, RejectPolicy, Result,
    SearchQuery, View,
};
use tributary_server::{ErrorBody, ARROW_STREAM};

/// A graph on a server.
pub struct Remote {
    base: String,
    graph: String,
    token: Option<String>,
    http: reqwest::Client,
}

fn unreachable_server(base: &str, error: reqwest::Error) -> Error {
    Error::remote(
        ErrorKind::Unavailable,
        format!("cannot reach the server at {base}: {error}"),
    )
}

fn internal(message: String) -> Error {
    Error::remote(ErrorKind::Internal, message)
}

/// Rows sent as an Arrow IPC stream, as one batch.
async fn rows_of(response: Response) -> Result<RecordBatch> {
    let bytes = response
        .bytes()
        .await
        .map_err(|e| internal(format!("reading the answer: {e}")))?;
    let unreadable =
        |e: arrow_schema::ArrowError| internal(format!("unreadable rows from the server: {e}"));
    let reader = arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None)
        .map_err(unreadable)?;
    let schema = reader.schema();
    let batches = reader.collect::<Result<Vec<_>, _>>().map_err(unreadable)?;
    arrow_select::concat::concat_batches(&schema, &batches).map_err(unreadable)
}

fn at_query(at: &At, query: &mut Vec<(&'static str, String)>) {
    match at {
        At::Branch(branch) => query.push(("branch", branch.clone())),
        At::Commit(commit) => query.push(("commit", commit.clone())),
    }
}

fn view_query(view: &View) -> Vec<(&'static str, String)> {
    let mut query = Vec::new();
    at_query(&view.at, &mut query);
    if view.fresh {
        query.push(("fresh", "true".to_owned()));
    }
    query
}

impl Remote {
    pub fn new(base: &str, graph: &str, token: Option<String>) -> Remote {
        Remote {
            base: base.trim_end_matches('/').to_owned(),
            graph: graph.to_owned(),
            token,
            http: reqwest::Client::new(),
        }
    }

    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let url = format!("{}/graphs/{}{path}", self.base, self.graph);
        let request = self.http.request(method, url);
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Send; an error response becomes the error an embedded run would report, of the
    /// kind the server named.
    pub async fn send(&self, request: RequestBuilder) -> Result<Response> {
        let response = request
            .send()
            .await
            .map_err(|e| unreachable_server(&self.base, e))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        Err(match serde_json::from_str::<ErrorBody>(&text) {
            Ok(body) => {
                let kind = ErrorKind::from_name(&body.kind).unwrap_or(ErrorKind::Internal);
                Error::remote(kind, body.error)
            }
            Err(_) => internal(format!("the server answered {status}: {text}")),
        })
    }

    async fn json<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T> {
        let response = self.send(request).await?;
        response
            .json()
            .await
            .map_err(|e| internal(format!("unreadable answer from the server: {e}")))
    }

    async fn rows(&self, request: RequestBuilder) -> Result<RecordBatch> {
        let response = self
            .send(request.header(reqwest::header::ACCEPT, ARROW_STREAM))
            .await?;
        rows_of(response).await
    }

    /// Create the graph (the server must run with `--init`): its type count and commit.
    pub async fn create(&self, schema: String) -> Result<(usize, String)> {
        let created: serde_json::Value = self
            .json(self.request(Method::POST, "").body(schema))
            .await?;
        Ok((
            created["types"].as_u64().unwrap_or_default() as usize,
            created["commit"].as_str().unwrap_or_default().to_owned(),
        ))
    }
}

#[async_trait::async_trait]
impl GraphOps for Remote {
    async fn load(&self, text: &str, options: &LoadOptions) -> Result<LoadOutcome> {
        let mode = match options.mode {
            LoadMode::Upsert => "upsert",
            LoadMode::Insert => "insert",
        };
        let query = [("branch", options.branch.as_str()), ("mode", mode)];
        let request = self.request(Method::POST, "/load");
        self.json(request.query(&query).body(text.to_owned())).await
    }

    async fn read(&self, type_name: &str, options: &ReadOptions) -> Result<RecordBatch> {
        let mut query = view_query(&View {
            at: options.at.clone(),
            fresh: options.fresh,
        });
        if let Some(filter) = &options.filter {
            query.push(("filter", filter.clone()));
        }
        if let Some(select) = &options.select {
            query.push(("select", select.join(",")));
        }
        if let Some(limit) = options.limit {
            query.push(("limit", limit.to_string()));
        }
        let path = format!("/types/{}", encode(type_name));
        self.rows(self.request(Method::GET, &path).query(&query))
            .await
    }

    async fn get(&self, type_name: &str, key: &str, view: &View) -> Result<Option<RecordBatch>> {
        let path = format!("/types/{}/{}", encode(type_name), encode(key));
        let request = self
            .request(Method::GET, &path)
            .query(&view_query(view))
            .header(reqwest::header::ACCEPT, ARROW_STREAM);
        match self.send(request).await {
            Ok(response) => rows_of(response).await.map(Some),
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
    ) -> Result<RecordBatch> {
        let mut query = view_query(view);
        query.push(("edge", edge.to_owned()));
        let way = if direction == Direction::In {
            "in"
        } else {
            "out"
        };
        query.push(("direction", way.to_owned()));
        let path = format!("/neighbors/{}/{}", encode(type_name), encode(key));
        self.rows(self.request(Method::GET, &path).query(&query))
            .await
    }

    async fn search(
        &self,
        type_name: &str,
        search: &SearchQuery,
        k: usize,
        view: &View,
    ) -> Result<RecordBatch> {
        let mut query = view_query(view);
        match search {
            SearchQuery::Text(text) => query.push(("text", text.clone())),
            SearchQuery::Nearest(vector) => {
                query.push(("nearest", serde_json::to_string(vector).unwrap_or_default()))
            }
        }
        query.push(("k", k.to_string()));
        let path = format!("/search/{}", encode(type_name));
        self.rows(self.request(Method::GET, &path).query(&query))
            .await
    }

    async fn log(&self, branch: &str, limit: usize) -> Result<Vec<CommitRecord>> {
        let query = [("branch", branch.to_owned()), ("limit", limit.to_string())];
        self.json(self.request(Method::GET, "/commits").query(&query))
            .await
    }

    async fn schema(&self) -> Result<String> {
        let response = self.send(self.request(Method::GET, "/schema")).await?;
        response
            .text()
            .await
            .map_err(|e| internal(format!("reading the answer: {e}")))
    }

    async fn ingest_status(&self, branch: &str) -> Result<IngestStatus> {
        self.json(
            self.request(Method::GET, "/ingest/status")
                .query(&[("branch", branch)]),
        )
        .await
    }

    async fn fold(&self, branch: &str, policy: RejectPolicy) -> Result<FoldOutcome> {
        let halt = policy == RejectPolicy::Halt;
        let query = [("branch", branch.to_owned()), ("halt", halt.to_string())];
        self.json(self.request(Method::POST, "/ingest/fold").query(&query))
            .await
    }

    async fn rejects(&self, at: &At) -> Result<RecordBatch> {
        let mut query = Vec::new();
        at_query(at, &mut query);
        self.rows(self.request(Method::GET, "/rejects").query(&query))
            .await
    }

    async fn cleanup(&self, older_than: Duration) -> Result<CleanupReport> {
        let query = [("older_than_s", older_than.as_secs().to_string())];
        self.json(self.request(Method::POST, "/cleanup").query(&query))
            .await
    }
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
