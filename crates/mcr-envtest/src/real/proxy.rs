//! A loopback TCP proxy in front of a real API server: the fault hooks' lever.
//!
//! Clients and kubeconfigs point at the proxy. TLS passes through untouched (the serving
//! certificate names 127.0.0.1, which both ends share). Its link state comes from the same
//! [`Faults`] as the emulator's: `Down` closes the listener and cuts open connections
//! (refused, as a dead server), `Hang` holds every byte until healed, latency delays each
//! client-to-server chunk.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::faults::{Faults, Mode};

type Slot = Arc<Mutex<Option<TcpListener>>>;

struct Serving {
    slot: Slot,
    cancel: CancellationToken,
}

/// The proxy of one real cluster.
pub(crate) struct Proxy {
    name: String,
    addr: SocketAddr,
    upstream: SocketAddr,
    faults: Arc<Faults>,
    runtime: tokio::runtime::Handle,
    serving: Mutex<Option<Serving>>,
}

fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

impl Proxy {
    /// Listens on a random 127.0.0.1 port and forwards to `upstream`.
    pub(crate) fn start(
        name: &str,
        upstream: SocketAddr,
        faults: Arc<Faults>,
    ) -> io::Result<Proxy> {
        let listener = listen(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let proxy = Proxy {
            name: name.to_string(),
            addr: listener.local_addr()?,
            upstream,
            faults,
            runtime: tokio::runtime::Handle::current(),
            serving: Mutex::new(None),
        };
        let serving = proxy.serve(listener);
        *proxy.serving.lock().unwrap_or_else(|e| e.into_inner()) = Some(serving);
        Ok(proxy)
    }

    /// The address clients use.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts accepting on `listener`.
    fn serve(&self, listener: TcpListener) -> Serving {
        let slot: Slot = Arc::new(Mutex::new(Some(listener)));
        let cancel = CancellationToken::new();
        let accept = accept_loop(
            slot.clone(),
            cancel.clone(),
            self.upstream,
            self.faults.clone(),
        );
        self.runtime.spawn(accept);
        Serving { slot, cancel }
    }

    /// Opens or closes the listener to match the link state.
    pub(crate) fn sync(&self, mode: Mode) -> io::Result<()> {
        if mode == Mode::Down {
            self.unbind();
            return Ok(());
        }
        // Held while binding, so two concurrent heals cannot both bind the port.
        let mut serving = self.serving.lock().unwrap_or_else(|e| e.into_inner());
        if serving.is_none() {
            let listener = {
                let _guard = self.runtime.enter();
                listen(self.addr)?
            };
            *serving = Some(self.serve(listener));
            tracing::debug!(cluster = %self.name, addr = %self.addr, "proxy listening again");
        }
        Ok(())
    }

    /// Closes the listener now and cuts every open connection.
    pub(crate) fn unbind(&self) {
        let serving = self
            .serving
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(serving) = serving {
            drop(
                serving
                    .slot
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take(),
            );
            serving.cancel.cancel();
            tracing::debug!(cluster = %self.name, addr = %self.addr, "proxy closed");
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.unbind();
    }
}

fn poll_accept(
    slot: &Slot,
    cx: &mut Context<'_>,
) -> Poll<Option<io::Result<(TcpStream, SocketAddr)>>> {
    let guard = slot.lock().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref() {
        None => Poll::Ready(None),
        Some(listener) => listener.poll_accept(cx).map(Some),
    }
}

async fn accept_loop(
    slot: Slot,
    cancel: CancellationToken,
    upstream: SocketAddr,
    faults: Arc<Faults>,
) {
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => return,
            accepted = poll_fn(|cx| poll_accept(&slot, cx)) => accepted,
        };
        match accepted {
            None => return,
            Some(Ok((stream, _))) => {
                let conn = connection(stream, upstream, faults.clone());
                let cancel = cancel.child_token();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = cancel.cancelled() => {}
                        _ = conn => {}
                    }
                });
            }
            Some(Err(err)) => {
                tracing::warn!(%err, "proxy accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

async fn connection(client: TcpStream, upstream: SocketAddr, faults: Arc<Faults>) {
    if faults.admit().await.is_err() {
        return;
    }
    let connect = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(upstream));
    let server = match connect.await {
        Ok(Ok(server)) => server,
        Ok(Err(err)) => {
            tracing::debug!(%upstream, %err, "proxy could not reach the API server");
            return;
        }
        Err(_) => return,
    };
    for stream in [&client, &server] {
        let _ = stream.set_nodelay(true);
    }
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(client_read, server_write, &faults, true);
    let down = pump(server_read, client_write, &faults, false);
    if let Err(err) = tokio::try_join!(up, down) {
        tracing::trace!(%err, "proxied connection ended");
    }
}

/// Copies one direction until EOF, waiting while the link hangs and ending when it goes down.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    faults: &Faults,
    delayed: bool,
) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return to.shutdown().await;
        }
        if faults.admit().await.is_err() {
            return Err(io::ErrorKind::ConnectionAborted.into());
        }
        if let Some(latency) = faults.latency().filter(|_| delayed) {
            tokio::time::sleep(latency).await;
        }
        to.write_all(&buf[..n]).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Partition;

    async fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = stream.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    async fn round_trip(addr: SocketAddr) -> io::Result<Vec<u8>> {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(b"ping").await?;
        let mut buf = [0u8; 4];
        stream.read_exact(&mut buf).await?;
        Ok(buf.to_vec())
    }

    #[tokio::test]
    async fn forwards_refuses_and_hangs() {
        let faults = Arc::new(Faults::default());
        let proxy = Proxy::start("p", echo_server().await, faults.clone()).unwrap();
        assert_eq!(round_trip(proxy.addr()).await.unwrap(), b"ping");

        proxy
            .sync(faults.set_partition(Some(Partition::Refuse)))
            .unwrap();
        let refused = TcpStream::connect(proxy.addr()).await.unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);

        proxy
            .sync(faults.set_partition(Some(Partition::Hang)))
            .unwrap();
        let hung = tokio::spawn(round_trip(proxy.addr()));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!hung.is_finished(), "a hung link answered");
        proxy.sync(faults.set_partition(None)).unwrap();
        assert_eq!(hung.await.unwrap().unwrap(), b"ping");
    }
}
