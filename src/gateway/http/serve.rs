//! The HTTP/1.1 server under the routes: one task per connection, a
//! graceful end, and a deadline for every request's head, so a client
//! that connects and sends nothing (or a header a byte at a time, or
//! nothing more on a kept-alive connection) is dropped after
//! [`HEAD_READ_TIMEOUT`] instead of holding a socket for ever.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tower_service::Service;

/// How long a connection may take to send a request's head, counted from
/// when the server starts waiting for it (a kept-alive connection that
/// stays idle this long is closed too).
pub(crate) const HEAD_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `router` on `listener` until `until` resolves, then lets the
/// requests in flight finish (a turn's request ends when its turn does).
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    until: impl std::future::Future<Output = ()>,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEAD_READ_TIMEOUT);
    let graceful = GracefulShutdown::new();
    let mut until = std::pin::pin!(until);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    refused_accept(err).await;
                    continue;
                }
            },
            () = &mut until => break,
        };
        let router = router.clone();
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            req.extensions_mut()
                .insert(ConnectInfo::<SocketAddr>(remote));
            let mut router = router.clone();
            async move { router.call(req.map(axum::body::Body::new)).await }
        });
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::trace!(%err, "connection ended");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// A connection that went away before it was accepted is nothing; any
/// other failure (out of file descriptors) is said, then waited out.
async fn refused_accept(err: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        err.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::error!(%err, "cannot accept a connection");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Reads until the server closes the connection (the time is paused:
    /// it moves on whenever everything waits).
    async fn until_closed(stream: &mut tokio::net::TcpStream) -> String {
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(600), stream.read_to_end(&mut got))
            .await
            .expect("closed by the server")
            .unwrap();
        String::from_utf8_lossy(&got).into_owned()
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_sends_no_request_head_is_dropped() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let router = Router::new().route("/healthz", axum::routing::get(|| async { "ok" }));
        let stop = tokio_util::sync::CancellationToken::new();
        let server = tokio::spawn(serve(listener, router, stop.clone().cancelled_owned()));

        // Connected, then silent.
        let began = tokio::time::Instant::now();
        let mut silent = tokio::net::TcpStream::connect(address).await.unwrap();
        assert_eq!(until_closed(&mut silent).await, "");
        assert!(
            began.elapsed() >= HEAD_READ_TIMEOUT,
            "{:?}",
            began.elapsed()
        );
        // Half a head, never finished.
        let mut slow = tokio::net::TcpStream::connect(address).await.unwrap();
        slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        let answer = until_closed(&mut slow).await;
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
            "{answer}"
        );
        // A request is answered; the connection kept alive after it is
        // closed once it stays idle.
        let mut kept = tokio::net::TcpStream::connect(address).await.unwrap();
        kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let answer = until_closed(&mut kept).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("ok"), "{answer}");

        stop.cancel();
        server.await.unwrap();
    }
}
