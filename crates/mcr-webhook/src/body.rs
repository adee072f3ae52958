//! Requests read within budgets: the bytes a request holds (its head, and its body as it is
//! read) are counted per connection and per process, so that no caller, and no number of
//! callers, makes the server hold more than the configured bytes of requests at once (a cap
//! per request alone lets one HTTP/2 connection hold its streams' worth of them, and a
//! request whose body never comes would hold its head for free).
//!
//! A request's head counts its header block twice (decoded, and as the frames it came in)
//! plus [`REQUEST_OVERHEAD`] (the state of a request in flight), taken as the request arrives, before its task even runs (so requests queued
//! behind a busy runtime are counted too); its body counts its buffer's capacity, taken
//! before the buffer grows: the whole declared `Content-Length` at once when there is one
//! (the buffer is then allocated once, to the size), chunk by chunk otherwise. A request that
//! does not fit is refused at once; the bytes are given back when its answer is sent.

use std::sync::Arc;

use bytes::Bytes;
use http::HeaderMap;
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What a request in flight holds besides its header block: its HTTP/2 stream, its task, the
/// state of its answer (measured with `tests/flood.rs`: a request holding an 8 KiB header and
/// no body costs the process about 25 KiB).
pub(crate) const REQUEST_OVERHEAD: usize = 8 * 1024;

/// Bytes that requests may hold at once: one budget for the process, one per connection.
#[derive(Clone, Debug)]
pub(crate) struct Budget {
    bytes: Arc<Semaphore>,
    /// What the budget holds in all.
    limit: usize,
    scope: Scope,
}

/// Which budget refused a body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The budget of one connection.
    Connection,
    /// The budget of the whole server.
    Process,
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Scope::Connection => "connection",
            Scope::Process => "webhook server",
        })
    }
}

impl Budget {
    /// A budget of `limit` bytes (at most tokio's largest semaphore).
    pub(crate) fn new(limit: usize, scope: Scope) -> Self {
        let limit = limit.min(Semaphore::MAX_PERMITS);
        Self {
            bytes: Arc::new(Semaphore::new(limit)),
            limit,
            scope,
        }
    }

    fn take(&self, n: usize) -> Result<Option<OwnedSemaphorePermit>, Refused> {
        if n == 0 {
            return Ok(None);
        }
        let refused = Refused::Busy {
            scope: self.scope,
            limit: self.limit,
        };
        let n = u32::try_from(n).map_err(|_| refused.clone())?;
        self.bytes
            .clone()
            .try_acquire_many_owned(n)
            .map(Some)
            .map_err(|_| refused)
    }
}

/// Why a body was not read.
#[derive(Clone, Debug, thiserror::Error)]
pub(crate) enum Refused {
    /// Larger than the cap of one request.
    #[error("the request body is larger than the webhook's limit of {max} bytes")]
    TooLarge {
        /// The cap.
        max: usize,
    },
    /// A budget has no room for it now.
    #[error("the {scope} holds requests up to its limit of {limit} bytes already: refused at once")]
    Busy {
        /// Which budget.
        scope: Scope,
        /// Its limit.
        limit: usize,
    },
    /// The body could not be read (the client reset the stream, a broken chunk).
    #[error("reading the request body: {0}")]
    Read(String),
}

/// The bytes a request holds in both budgets; given back when dropped.
#[derive(Debug)]
pub(crate) struct Account {
    permits: Vec<OwnedSemaphorePermit>,
    connection: Budget,
    process: Budget,
}

impl Account {
    /// Takes `n` more bytes from both budgets (the connection's first: a connection past its
    /// own share takes nothing from the others').
    fn grow(&mut self, n: usize) -> Result<(), Refused> {
        let mine = self.connection.take(n)?;
        let shared = self.process.take(n)?;
        for permit in [mine, shared].into_iter().flatten() {
            match self
                .permits
                .iter_mut()
                .find(|p| std::ptr::eq(Arc::as_ptr(p.semaphore()), Arc::as_ptr(permit.semaphore())))
            {
                Some(held) => held.merge(permit),
                None => self.permits.push(permit),
            }
        }
        Ok(())
    }
}

/// The bytes a request's head holds, as counted in the budgets: its fields twice (as decoded,
/// and as the frames they came in), and the state of a request.
fn head_cost(uri: &http::Uri, headers: &HeaderMap) -> usize {
    let fields: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 32)
        .sum();
    REQUEST_OVERHEAD + 2 * (uri.to_string().len() + fields)
}

/// Admits a request as it arrives (before its task runs): its head counted in `connection`
/// and `process`, or refused.
pub(crate) fn admit(
    uri: &http::Uri,
    headers: &HeaderMap,
    connection: &Budget,
    process: &Budget,
) -> Result<Account, Refused> {
    let mut account = Account {
        permits: Vec::new(),
        connection: connection.clone(),
        process: process.clone(),
    };
    account.grow(head_cost(uri, headers))?;
    Ok(account)
}

/// Reads `body` (declared by `headers`) into one buffer of at most `max` bytes, counting what
/// it holds in the request's `account`.
pub(crate) async fn read(
    headers: &HeaderMap,
    mut body: hyper::body::Incoming,
    max: usize,
    account: &mut Account,
) -> Result<Bytes, Refused> {
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    let mut buf: Vec<u8> = Vec::new();
    if let Some(len) = declared {
        if len > max {
            return Err(Refused::TooLarge { max });
        }
        account.grow(len)?;
        buf.reserve_exact(len);
    }
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Refused::Read(e.to_string()))?;
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        let needed = buf.len() + chunk.len();
        if needed > max {
            return Err(Refused::TooLarge { max });
        }
        if needed > buf.capacity() {
            let target = needed.max(buf.capacity() * 2).min(max);
            account.grow(target - buf.capacity())?;
            buf.reserve_exact(target - buf.len());
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(buf))
}
