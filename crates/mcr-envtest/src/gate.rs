//! A listening port that can be closed (connections refused) and re-opened on the same port.
//!
//! The emulator's HTTPS endpoint and the real backend's proxy both need this for stop/restart
//! and `Partition::Refuse`. While closed the port stays *reserved*: a bound socket that does
//! not listen, so a connection is refused exactly as by a dead server, yet the kernel cannot
//! hand the port to an outgoing connection as its ephemeral local port. Without the
//! reservation a busy client could take the port during the window and the listener could not
//! be re-opened (`EADDRINUSE`), leaving the cluster down for good.
//!
//! The listener lives in a slot the accept loop polls, so closing is taking it out of the slot,
//! shutting the socket down (which stops it listening even where a forked child still holds a
//! copy of its descriptor) and cancelling the open connections' token.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;

type Slot = Arc<Mutex<Option<TcpListener>>>;

enum State {
    /// Accepting; the token cuts the connections accepted since.
    Open {
        slot: Slot,
        cancel: CancellationToken,
    },
    /// Refusing; the socket holds the port (`None` only if reserving failed).
    Closed { reserved: Option<TcpSocket> },
}

/// One port that opens and closes on demand (see the module docs).
pub(crate) struct Gate {
    label: String,
    addr: SocketAddr,
    runtime: tokio::runtime::Handle,
    state: Mutex<State>,
}

/// A bound, not yet listening socket with `SO_REUSEADDR` (so `TIME_WAIT` leftovers of the
/// previous listener do not block it).
fn reserve(addr: SocketAddr) -> io::Result<TcpSocket> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    Ok(socket)
}

impl Gate {
    /// Reserves a random 127.0.0.1 port, closed until [`open`](Self::open). `label` names the
    /// owner in logs.
    pub(crate) fn reserve_loopback(label: &str) -> io::Result<Self> {
        let socket = reserve(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        Ok(Self {
            label: label.to_string(),
            addr: socket.local_addr()?,
            runtime: tokio::runtime::Handle::current(),
            state: Mutex::new(State::Closed {
                reserved: Some(socket),
            }),
        })
    }

    /// The port's address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts listening (a no-op when open) and spawns an accept loop that hands every
    /// connection, with a token cancelled at [`close`](Self::close), to `on_accept`.
    pub(crate) fn open(
        &self,
        on_accept: impl Fn(TcpStream, CancellationToken) + Send + 'static,
    ) -> io::Result<()> {
        // Held while binding, so two concurrent heals cannot both bind the port.
        let mut state = self.state.lock();
        let State::Closed { reserved } = &mut *state else {
            return Ok(());
        };
        let socket = match reserved.take() {
            Some(socket) => socket,
            None => {
                let _guard = self.runtime.enter();
                reserve(self.addr)?
            }
        };
        let listener = {
            let _guard = self.runtime.enter();
            socket.listen(1024)?
        };
        let slot: Slot = Arc::new(Mutex::new(Some(listener)));
        let cancel = CancellationToken::new();
        let label = self.label.clone();
        self.runtime
            .spawn(accept_loop(slot.clone(), cancel.clone(), label, on_accept));
        *state = State::Open { slot, cancel };
        tracing::debug!(cluster = %self.label, addr = %self.addr, "listening");
        Ok(())
    }

    /// Stops listening now, cuts every open connection and keeps the port reserved.
    pub(crate) fn close(&self) {
        let mut state = self.state.lock();
        let State::Open { slot, cancel } = &*state else {
            return;
        };
        if let Some(listener) = slot.lock().take() {
            stop_listening(&listener, &self.label);
        }
        cancel.cancel();
        let reserved = {
            let _guard = self.runtime.enter();
            reserve(self.addr)
        };
        let reserved = match reserved {
            Ok(socket) => Some(socket),
            Err(err) => {
                tracing::warn!(cluster = %self.label, addr = %self.addr, %err, "could not keep the closed port reserved");
                None
            }
        };
        *state = State::Closed { reserved };
        tracing::debug!(cluster = %self.label, addr = %self.addr, "closed");
    }

    /// Stops listening and releases the port (at drop).
    fn release(&self) {
        self.close();
        *self.state.lock() = State::Closed { reserved: None };
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.release();
    }
}

/// Takes the socket itself out of the listening state before its descriptor is dropped. A child
/// process forked anywhere in this process holds a copy of every descriptor until its `exec`;
/// dropping ours alone would leave the port accepting (and unbindable) for that window.
fn stop_listening(listener: &TcpListener, label: &str) {
    if let Err(err) = socket2::SockRef::from(listener).shutdown(std::net::Shutdown::Both) {
        tracing::debug!(cluster = %label, %err, "shutting the listener down failed; dropping it");
    }
}

fn poll_accept(
    slot: &Slot,
    cx: &mut Context<'_>,
) -> Poll<Option<io::Result<(TcpStream, SocketAddr)>>> {
    let guard = slot.lock();
    match guard.as_ref() {
        None => Poll::Ready(None),
        Some(listener) => listener.poll_accept(cx).map(Some),
    }
}

async fn accept_loop(
    slot: Slot,
    cancel: CancellationToken,
    label: String,
    on_accept: impl Fn(TcpStream, CancellationToken),
) {
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => return,
            accepted = poll_fn(|cx| poll_accept(&slot, cx)) => accepted,
        };
        match accepted {
            None => return,
            Some(Ok((stream, _peer))) => on_accept(stream, cancel.child_token()),
            Some(Err(err)) => {
                tracing::warn!(cluster = %label, %err, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_closed_port_refuses_and_stays_reserved() {
        let gate = Gate::reserve_loopback("t").unwrap();
        let addr = gate.addr();
        let refused = TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);

        gate.open(|stream, _| drop(stream)).unwrap();
        TcpStream::connect(addr).await.expect("open: accepted");

        gate.close();
        let refused = TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
        // Another socket (as an outgoing connection's ephemeral port would) cannot take it.
        let squatter = TcpSocket::new_v4().unwrap();
        assert!(
            squatter.bind(addr).is_err(),
            "the closed port stays reserved"
        );

        gate.open(|stream, _| drop(stream)).unwrap();
        TcpStream::connect(addr)
            .await
            .expect("re-opened on the same port");
        gate.open(|stream, _| drop(stream))
            .expect("opening twice is a no-op");
    }

    /// A child process forked by anything in the same process (a control plane's binary, a
    /// test's helper) holds a copy of every descriptor until it calls `exec`. Closing must stop
    /// the listening socket itself, not only drop this process's descriptor.
    #[tokio::test]
    async fn a_closed_port_refuses_while_a_forked_child_holds_the_listener() {
        use std::os::fd::AsFd;
        let gate = Gate::reserve_loopback("t").unwrap();
        let addr = gate.addr();
        gate.open(|stream, _| drop(stream)).unwrap();
        // What the child holds between fork and exec: a duplicate of the listening descriptor.
        let held = {
            let state = gate.state.lock();
            let State::Open { slot, .. } = &*state else {
                panic!("open")
            };
            let listener = slot.lock();
            listener
                .as_ref()
                .unwrap()
                .as_fd()
                .try_clone_to_owned()
                .unwrap()
        };
        gate.close();
        let refused = TcpStream::connect(addr).await;
        assert_eq!(
            refused.map(|_| ()).map_err(|err| err.kind()),
            Err(io::ErrorKind::ConnectionRefused),
            "a closed port accepted a connection while a copy of its listener lived on"
        );
        drop(held);
        gate.open(|stream, _| drop(stream)).unwrap();
        TcpStream::connect(addr)
            .await
            .expect("re-opened on the same port");
    }

    #[tokio::test]
    async fn closing_cuts_open_connections() {
        let gate = Gate::reserve_loopback("t").unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        gate.open(move |_stream, cancel| {
            let _ = tx.send(cancel);
        })
        .unwrap();
        let _client = TcpStream::connect(gate.addr()).await.unwrap();
        let cancel = rx.recv().await.unwrap();
        assert!(!cancel.is_cancelled());
        gate.close();
        assert!(cancel.is_cancelled());
    }
}
