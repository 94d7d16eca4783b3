//! The OpenAPI document. The router registers each handler through its `#[utoipa::path]`
//! attribute, which also describes it; its parameters come from the structs the handler
//! deserializes and its answers from the engine's own result types. Router and document
//! are made by the same calls, so neither can name a route the other lacks.

use std::sync::Arc;

use axum::Router;
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::{Content, OpenApi, Ref};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::{
    branches, changes, embedder, export, ingest, query, routes as handlers, snapshots, AppState,
};

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Tributary",
        description = "Graphs under one root, by folder name. Auth: `Authorization: Bearer TOKEN` \
            when the server has tokens (read scope for GET and for the read-only `query` and `sql` POSTs, write scope for other POSTs and DELETE). \
            Every error answers with an `Error` body: a machine-readable `kind`, a message, and \
            for a refused load the bad lines."
    ),
    components(schemas(
        crate::ErrorBody,
        crate::ingest::IngestRecord,
        handlers::LoadModeName,
        handlers::DirectionName,
        tributary::Prefer
    ))
)]
struct Described;

/// Every route, with the document that describes it.
pub(crate) fn routes() -> (Router<Arc<AppState>>, OpenApi) {
    let (router, mut document) =
        OpenApiRouter::with_openapi(<Described as utoipa::OpenApi>::openapi())
            .routes(routes!(handlers::healthz))
            .routes(routes!(handlers::metrics))
            .routes(routes!(openapi_json))
            .routes(routes!(handlers::list_graphs))
            .routes(routes!(handlers::create_graph))
            .routes(routes!(handlers::load))
            .routes(routes!(ingest::ingest))
            .routes(routes!(handlers::status))
            .routes(routes!(handlers::fold))
            .routes(routes!(handlers::shards))
            .routes(routes!(handlers::rejects))
            .routes(routes!(handlers::read))
            .routes(routes!(handlers::count))
            .routes(routes!(handlers::get_one))
            .routes(routes!(handlers::neighbors))
            .routes(routes!(handlers::search))
            .routes(routes!(query::cypher))
            .routes(routes!(query::sql))
            .routes(routes!(handlers::commits))
            .routes(routes!(handlers::schema, handlers::apply_schema))
            .routes(routes!(handlers::publisher))
            .routes(routes!(embedder::show, embedder::set))
            .routes(routes!(handlers::cleanup))
            .routes(routes!(branches::list))
            .routes(routes!(branches::create, branches::delete))
            .routes(routes!(branches::merge))
            .routes(routes!(snapshots::snapshot))
            .routes(routes!(snapshots::list))
            .routes(routes!(snapshots::pin, snapshots::unpin))
            .routes(routes!(changes::changes))
            .routes(routes!(export::export))
            .split_for_parts();
    document.info.version = env!("CARGO_PKG_VERSION").to_owned();
    add_error_answers(&mut document);
    (router, document)
}

/// The document, as the server serves it at `GET /openapi.json`.
pub fn document() -> OpenApi {
    routes().1
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "server",
    responses((status = 200, description = "The OpenAPI document of this server.", body = Object)))]
async fn openapi_json() -> axum::Json<OpenApi> {
    axum::Json(document())
}

/// The errors an operation can answer, by the statuses [`crate::ApiError`] uses: every
/// graph operation can meet bad input, a missing graph, a refused token, a conflict, an
/// oversized body or a busy server.
fn add_error_answers(document: &mut OpenApi) {
    let error = |why: &str| -> Response {
        ResponseBuilder::new()
            .description(why)
            .content(
                "application/json",
                Content::new(Some(Ref::from_schema_name("Error"))),
            )
            .build()
    };
    let graph_errors = [
        ("400", "Bad input: the message (and for a load, `lines`) says what."),
        ("401", "No token, or an unknown one."),
        ("403", "The token lacks the scope, or the graph; or the server's disk refuses the write (read-only, permission denied)."),
        ("404", "No such graph, type or branch (`not_found`), or no such row (`no_row`)."),
        ("409", "A conflict: a concurrent write won (retry), or a merge's keys changed differently on both sides."),
        ("413", "The body, or a line, is over the server's bound."),
        ("503", "Busy, the store is unreachable, or the disk is full: retry after `Retry-After` seconds."),
    ];
    for (path, item) in document.paths.paths.iter_mut() {
        let statuses: &[&str] = if path.starts_with("/graphs/") {
            &["400", "401", "403", "404", "409", "413", "503"]
        } else if path == "/metrics" {
            &["401", "403"]
        } else {
            &[]
        };
        for operation in operations(item) {
            for (status, why) in graph_errors.iter().filter(|(s, _)| statuses.contains(s)) {
                operation
                    .responses
                    .responses
                    .entry((*status).to_owned())
                    .or_insert_with(|| error(why).into());
            }
        }
    }
}

fn operations(item: &mut utoipa::openapi::PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        item.get.as_mut(),
        item.post.as_mut(),
        item.delete.as_mut(),
        item.put.as_mut(),
        item.patch.as_mut(),
    ]
    .into_iter()
    .flatten()
}

/// (method, path) of every documented operation, upper-case methods.
pub fn operations_of(document: &OpenApi) -> Vec<(String, String)> {
    let mut all = Vec::new();
    for (path, item) in &document.paths.paths {
        for (method, operation) in [
            ("GET", &item.get),
            ("POST", &item.post),
            ("DELETE", &item.delete),
            ("PUT", &item.put),
            ("PATCH", &item.patch),
        ] {
            if operation.is_some() {
                all.push((method.to_owned(), path.clone()));
            }
        }
    }
    all
}
