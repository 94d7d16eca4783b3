//! One accepted connection: served by hyper with a header-read timeout (over TLS when the
//! server has a certificate), shut down gracefully when the server stops; or, over the
//! connection cap, answered 503 and closed.

use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit};

use crate::error::RETRY_AFTER_S;
use crate::tls::Tls;

/// Finish the TLS handshake (within the header-read timeout: a client that stalls in it
/// is as slow as one that stalls in its headers), then serve the connection.
pub async fn serve_tls(
    tls: Tls,
    stream: TcpStream,
    app: Router,
    header_read_timeout: Duration,
    stop: watch::Receiver<bool>,
    open: OwnedSemaphorePermit,
) {
    match tokio::time::timeout(header_read_timeout, tls.acceptor().accept(stream)).await {
        Ok(Ok(stream)) => serve(stream, app, header_read_timeout, stop, open).await,
        Ok(Err(error)) => tracing::debug!(%error, "a TLS handshake failed"),
        Err(_) => tracing::debug!("a TLS handshake took longer than the header-read timeout"),
    }
}

/// Serve `stream` until it closes, or until `stop` says the server stops (then the
/// request in flight is finished and the connection closed).
pub async fn serve<S>(
    stream: S,
    app: Router,
    header_read_timeout: Duration,
    mut stop: watch::Receiver<bool>,
    _open: OwnedSemaphorePermit,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    tokio::pin!(connection);
    let served = tokio::select! {
        served = connection.as_mut() => served,
        // The guard `wait_for` returns must not live across the await below.
        _ = async { stop.wait_for(|stopping| *stopping).await.map(|_| ()) } => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = served {
        tracing::debug!(%error, "a connection ended with an error");
    }
}

/// Answer a connection over the cap with 503 and close it, without reading from it. (Over
/// TLS it is closed unanswered: an answer would cost a handshake, the work the cap sheds.)
pub async fn refuse(mut stream: TcpStream) {
    let body = r#"{"kind":"unavailable","error":"the server has as many connections open as it takes (serve --max-connections); retry later"}"#;
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: {RETRY_AFTER_S}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let written = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
    if !matches!(written, Ok(Ok(()))) {
        tracing::debug!("a refused connection did not take its answer");
    }
}
