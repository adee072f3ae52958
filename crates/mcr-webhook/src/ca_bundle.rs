//! The CA bundle written into the members' webhook configurations: checked before it is
//! written, and followed in a file so a rotated serving CA reaches every member without a
//! restart.

use std::{path::Path, time::Duration};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Why `pem` is not a CA bundle: it must hold at least one PEM `CERTIFICATE` block and
/// nothing unreadable (a half-written file fails here, and is never written into members).
pub(crate) fn check(pem: &[u8]) -> Result<(), String> {
    let mut count = 0;
    for item in rustls_pemfile::read_all(&mut &*pem) {
        match item {
            Ok(rustls_pemfile::Item::X509Certificate(_)) => count += 1,
            Ok(_) => return Err("holds a PEM block that is not a CERTIFICATE".into()),
            Err(err) => return Err(format!("is not readable PEM: {err}")),
        }
    }
    if count == 0 {
        return Err("holds no CERTIFICATE block".into());
    }
    Ok(())
}

/// Sends `pem` on `bundle` if it is a CA bundle and differs from the current one; whether it
/// did.
pub(crate) fn offer(bundle: &watch::Sender<Vec<u8>>, pem: Vec<u8>) -> Result<bool, String> {
    check(&pem)?;
    Ok(bundle.send_if_modified(|current| {
        if *current == pem {
            return false;
        }
        *current = pem;
        true
    }))
}

/// Reads `path` every `poll` until `token` fires, and hands what it holds to `offer`. A file
/// that is missing or not a CA bundle keeps the current bundle, and is logged once until it
/// changes.
pub(crate) async fn follow(
    path: &Path,
    poll: Duration,
    offer: impl Fn(Vec<u8>) -> Result<bool, String>,
    token: CancellationToken,
) {
    let mut ticker = tokio::time::interval(poll.max(Duration::from_millis(10)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_error: Option<String> = None;
    loop {
        tokio::select! {
            () = token.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let outcome = tokio::fs::read(path)
            .await
            .map_err(|err| format!("cannot be read: {err}"))
            .and_then(&offer);
        match outcome {
            Ok(changed) => {
                last_error = None;
                if changed {
                    info!(path = %path.display(), "new CA bundle: rewriting the members' webhook configurations");
                }
            }
            Err(err) => {
                if last_error.as_ref() != Some(&err) {
                    warn!(path = %path.display(), error = %err, "CA bundle file not usable; the current bundle stays");
                    last_error = Some(err);
                }
            }
        }
    }
}
