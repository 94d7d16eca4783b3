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
        .serve_connection(
            TokioIo::new(TargetRepair::new(stream)),
            TowerToHyperService::new(app),
        );
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

/// A connection whose first request line has the bytes a URL may not hold raw (`curl
/// '…?filter=age>1'` sends `>` as it is) percent-encoded, as the client should have sent
/// them: hyper refuses such a line with a bare 400, before any handler could answer with an
/// error body. Later requests of a kept-alive connection pass as they are: telling their
/// lines from bodies takes HTTP's framing, and clients that keep connections alive encode
/// their URLs.
struct TargetRepair<S> {
    inner: S,
    /// Bytes of the first line seen so far (a line longer than this is left as it is).
    seen: usize,
    /// Spaces seen on the first line: the target is between the first and the second.
    spaces: u32,
    done: bool,
    /// Repaired bytes the reader has not taken yet.
    pending: Vec<u8>,
}

impl<S> TargetRepair<S> {
    const LONGEST_LINE: usize = 64 * 1024;

    fn new(inner: S) -> Self {
        TargetRepair {
            inner,
            seen: 0,
            spaces: 0,
            done: false,
            pending: Vec::new(),
        }
    }

    /// Append `bytes` read from the connection to `pending`, repairing the target.
    fn repair(&mut self, bytes: &[u8]) {
        for (at, &byte) in bytes.iter().enumerate() {
            if self.done {
                self.pending.extend_from_slice(&bytes[at..]);
                return;
            }
            self.seen += 1;
            match byte {
                b'\n' => self.done = true,
                b' ' => self.spaces = self.spaces.saturating_add(1),
                _ if self.spaces == 1 && needs_encoding(byte) => {
                    self.pending
                        .extend_from_slice(format!("%{byte:02X}").as_bytes());
                    continue;
                }
                _ => {}
            }
            if self.seen >= Self::LONGEST_LINE {
                self.done = true;
            }
            self.pending.push(byte);
        }
    }
}

/// A byte a URL may not hold as it is (RFC 3986): hyper refuses the line that has one.
fn needs_encoding(byte: u8) -> bool {
    matches!(
        byte,
        b'"' | b'<' | b'>' | b'\\' | b'^' | b'`' | b'{' | b'|' | b'}'
    ) || byte >= 0x80
}

impl<S: AsyncRead + Unpin> AsyncRead for TargetRepair<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        let this = &mut *self;
        if this.pending.is_empty() {
            if this.done {
                return std::pin::Pin::new(&mut this.inner).poll_read(cx, buf);
            }
            let mut chunk = [0u8; 4096];
            let mut read = tokio::io::ReadBuf::new(&mut chunk);
            match std::pin::Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) => {
                    let filled = read.filled().to_vec();
                    if filled.is_empty() {
                        return Poll::Ready(Ok(()));
                    }
                    this.repair(&filled);
                }
                other => return other,
            }
        }
        let n = this.pending.len().min(buf.remaining());
        buf.put_slice(&this.pending[..n]);
        this.pending.drain(..n);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for TargetRepair<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
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
