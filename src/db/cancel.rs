//! The server-side cancel of a statement that overran the client's deadline.

use std::pin::Pin;

use tokio_postgres::{CancelToken, NoTls};

use super::describe;

/// Sends a cancel request for `token`'s connection to `target` and waits until the other end
/// closes the cancel connection, as libpq does. tokio-postgres's own `cancel_query` closes it
/// at once, and PgBouncer drops a cancel request whose connection closes before the server has
/// acknowledged it.
pub(super) async fn cancel(
    token: &CancelToken,
    tls: Option<super::tls::Connector>,
    (host, port): (String, u16),
) -> std::io::Result<()> {
    let socket = tokio::net::TcpStream::connect((host.as_str(), port))
        .await?
        .into_std()?;
    // A second handle on the same socket, to see the close after the request has been sent.
    let watch = tokio::net::TcpStream::from_std(socket.try_clone()?)?;
    let stream = KeepOpen(tokio::net::TcpStream::from_std(socket)?);
    match tls {
        None => token.cancel_query_raw(stream, NoTls).await,
        Some(mut tls) => {
            let connect =
                tokio_postgres::tls::MakeTlsConnect::<KeepOpen>::make_tls_connect(&mut tls, &host)
                    .map_err(std::io::Error::other)?;
            token.cancel_query_raw(stream, connect).await
        }
    }
    .map_err(io_error)?;
    let mut buf = [0u8; 64];
    loop {
        watch.readable().await?;
        match watch.try_read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            // A reset is a close too.
            Err(_) => return Ok(()),
        }
    }
}

pub(super) fn io_error(e: tokio_postgres::Error) -> std::io::Error {
    std::io::Error::other(describe(&e))
}

/// A socket whose shutdown only flushes: the cancel request must not half-close it (see
/// [`cancel`]).
#[derive(Debug)]
struct KeepOpen(tokio::net::TcpStream);

impl tokio::io::AsyncRead for KeepOpen {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for KeepOpen {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
}

