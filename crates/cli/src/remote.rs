//! `--server URL`: the same commands against a `tributary serve` over HTTP. The HTTP form
//! of each operation is the engine's (`tributary::wire`); this is only the sending.

use reqwest::{Method, RequestBuilder, Response};
use tributary::wire::{Transport, WireMethod, WireRequest, ARROW_STREAM};
use tributary::{Error, ErrorKind, Result};
use tributary_server::ErrorBody;

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

impl Remote {
    pub fn new(base: &str, graph: &str, token: Option<String>, http: reqwest::Client) -> Remote {
        Remote {
            base: base.trim_end_matches('/').to_owned(),
            graph: graph.to_owned(),
            token,
            http,
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
    pub async fn send_http(&self, request: RequestBuilder) -> Result<Response> {
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
            Ok(body) if !body.conflicts.is_empty() => {
                Error::remote_conflict(body.error, body.conflicts)
            }
            Ok(body) => {
                let kind = ErrorKind::from_name(&body.kind).unwrap_or(ErrorKind::Internal);
                let hint = match (kind, &self.token) {
                    (ErrorKind::Unauthorized, None) => {
                        " (give the server's token with --token-file FILE, TRIBUTARY_TOKEN \
                         or --token)"
                    }
                    _ => "",
                };
                Error::remote(kind, format!("{}{hint}", body.error))
            }
            Err(_) => internal(format!("the server answered {status}: {text}")),
        })
    }

    /// Create the graph (the server must run with `--init`): its type count and commit.
    pub async fn create(
        &self,
        schema: String,
        publisher: Option<tributary::PublisherKind>,
    ) -> Result<(usize, String, String)> {
        let mut request = self.request(Method::POST, "");
        if let Some(kind) = publisher {
            request = request.query(&[("publisher", kind.to_string())]);
        }
        let response = self.send_http(request.body(schema)).await?;
        let created: serde_json::Value = response
            .json()
            .await
            .map_err(|e| internal(format!("unreadable answer from the server: {e}")))?;
        Ok((
            created["types"].as_u64().unwrap_or_default() as usize,
            created["commit"].as_str().unwrap_or_default().to_owned(),
            created["publisher"].as_str().unwrap_or_default().to_owned(),
        ))
    }
}

#[async_trait::async_trait]
impl Transport for Remote {
    async fn send(&self, request: WireRequest) -> Result<Vec<u8>> {
        let method = match request.method {
            WireMethod::Get => Method::GET,
            WireMethod::Post => Method::POST,
            WireMethod::Delete => Method::DELETE,
        };
        let mut http = self.request(method, &request.path).query(&request.query);
        if request.wants_rows {
            http = http.header(reqwest::header::ACCEPT, ARROW_STREAM);
        }
        if let Some(body) = request.body {
            http = http.body(body);
        }
        let response = self.send_http(http).await?;
        let body = response
            .bytes()
            .await
            .map_err(|e| internal(format!("reading the answer: {e}")))?;
        Ok(body.to_vec())
    }
}
