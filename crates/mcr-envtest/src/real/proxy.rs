//! A loopback TCP proxy in front of a real API server: the fault hooks' lever.
//!
//! Clients and kubeconfigs point at the proxy. TLS passes through untouched (the serving
//! certificate names 127.0.0.1, which both ends share). Its link state comes from the same
//! [`Faults`] as the emulator's: `Down` closes the listener and cuts open connections
//! (refused, as a dead server), `Hang` holds every byte until healed, latency delays each
//! client-to-server chunk.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::faults::{Faults, Mode};
use crate::gate::Gate;

/// The proxy of one real cluster.
pub(crate) struct Proxy {
    upstream: SocketAddr,
    faults: Arc<Faults>,
    gate: Gate,
}

impl Proxy {
    /// Listens on a random 127.0.0.1 port and forwards to `upstream`.
    pub(crate) fn start(
        name: &str,
        upstream: SocketAddr,
        faults: Arc<Faults>,
    ) -> io::Result<Proxy> {
        let proxy = Proxy {
            upstream,
            faults,
            gate: Gate::reserve_loopback(name)?,
        };
        proxy.sync(Mode::Up)?;
        Ok(proxy)
    }

    /// The address clients use.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.gate.addr()
    }

    /// Opens or closes the listener to match the link state.
    pub(crate) fn sync(&self, mode: Mode) -> io::Result<()> {
        if mode == Mode::Down {
            self.unbind();
            return Ok(());
        }
        let (upstream, faults) = (self.upstream, self.faults.clone());
        self.gate.open(move |stream, cancel| {
            let conn = connection(stream, upstream, faults.clone());
            tokio::spawn(async move {
                tokio::select! {
                    _ = cancel.cancelled() => {}
                    _ = conn => {}
                }
            });
        })
    }

    /// Closes the listener now and cuts every open connection (the port stays reserved).
    pub(crate) fn unbind(&self) {
        self.gate.close();
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
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
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
