//! [`CertificateReloader`]: the serving certificate, read from files and swapped in place when
//! the files change (cert-manager rotating a Secret mounted into the pod), with no restart.
//!
//! rustls asks the reloader for a certificate on every handshake, so a new connection gets the
//! certificate of the moment while connections already open keep their session.

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use notify::Watcher;
use parking_lot::{Mutex, RwLock};
use rustls::{
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer},
    server::{ClientHello, ResolvesServerCert},
    sign::CertifiedKey,
};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::Error;

/// The serving certificate and key, read from two PEM files and reloaded when they change.
///
/// [`watch`](Self::watch) follows the files' directories (a Kubernetes Secret volume swaps a
/// `..data` symlink, which is an event in the directory) and also re-reads them every poll
/// interval, in case an event was missed. A reload that fails (a half-written file, a key that
/// does not match the certificate) keeps the certificate in use and is logged; the next change
/// or poll tries again.
///
/// ```no_run
/// use mcr_webhook::CertificateReloader;
///
/// # fn demo() -> Result<(), mcr_webhook::Error> {
/// let certs = CertificateReloader::from_files("/tls/tls.crt", "/tls/tls.key")?;
/// println!("serving certificate generation {}", certs.generation());
/// # Ok(()) }
/// ```
pub struct CertificateReloader {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
    /// The bytes the current certificate was read from, to skip unchanged files.
    read: Mutex<(Vec<u8>, Vec<u8>)>,
    generation: AtomicU64,
}

impl fmt::Debug for CertificateReloader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateReloader")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

impl CertificateReloader {
    /// Reads the certificate chain (`cert_path`, PEM, leaf first) and its private key
    /// (`key_path`, PEM: PKCS#8, PKCS#1 or SEC1). Fails if either is missing, unreadable, or
    /// they do not belong together.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), mcr_webhook::Error> {
    /// let certs = mcr_webhook::CertificateReloader::from_files("tls.crt", "tls.key")?;
    /// # Ok(()) }
    /// ```
    pub fn from_files(
        cert_path: impl Into<PathBuf>,
        key_path: impl Into<PathBuf>,
    ) -> Result<Self, Error> {
        let cert_path = cert_path.into();
        let key_path = key_path.into();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (cert_pem, key_pem) = read_pair(&cert_path, &key_path)?;
        let key = certified_key(&cert_path, &key_path, &cert_pem, &key_pem, &provider)?;
        Ok(Self {
            cert_path,
            key_path,
            provider,
            current: RwLock::new(Arc::new(key)),
            read: Mutex::new((cert_pem, key_pem)),
            generation: AtomicU64::new(1),
        })
    }

    /// How many certificates were loaded so far: 1 after [`from_files`](Self::from_files),
    /// one more for every successful reload of changed files.
    ///
    /// ```no_run
    /// # fn demo(certs: mcr_webhook::CertificateReloader) {
    /// assert!(certs.generation() >= 1);
    /// # }
    /// ```
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Reads the files again and swaps the certificate in if they changed. Returns whether a
    /// new certificate is now served; on error the previous one stays.
    ///
    /// ```no_run
    /// # fn demo(certs: mcr_webhook::CertificateReloader) -> Result<(), mcr_webhook::Error> {
    /// if certs.reload()? { println!("new certificate"); }
    /// # Ok(()) }
    /// ```
    pub fn reload(&self) -> Result<bool, Error> {
        let (cert_pem, key_pem) = read_pair(&self.cert_path, &self.key_path)?;
        {
            let read = self.read.lock();
            if read.0 == cert_pem && read.1 == key_pem {
                return Ok(false);
            }
        }
        let key = certified_key(
            &self.cert_path,
            &self.key_path,
            &cert_pem,
            &key_pem,
            &self.provider,
        )?;
        *self.current.write() = Arc::new(key);
        *self.read.lock() = (cert_pem, key_pem);
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        info!(cert = %self.cert_path.display(), generation, "serving certificate reloaded");
        Ok(true)
    }

    /// Follows the files until `token` fires: reloads on every change in their directories and
    /// every `poll` (a fallback for missed events). Never fails: a watcher that cannot start
    /// leaves the polling, and is logged.
    ///
    /// ```no_run
    /// # async fn demo(certs: std::sync::Arc<mcr_webhook::CertificateReloader>) {
    /// let token = tokio_util::sync::CancellationToken::new();
    /// tokio::spawn(certs.clone().watch(token, std::time::Duration::from_secs(30)));
    /// # }
    /// ```
    pub async fn watch(self: Arc<Self>, token: CancellationToken, poll: Duration) {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let _watcher = match self.start_watcher(tx) {
            Ok(watcher) => Some(watcher),
            Err(err) => {
                warn!(error = %mcr_core::ErrorChain(&err), "certificate files are polled only");
                None
            }
        };
        let mut ticker = tokio::time::interval(poll.max(Duration::from_millis(10)));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = token.cancelled() => return,
                event = rx.recv() => {
                    if event.is_none() {
                        // The watcher is gone: keep polling.
                        token.cancelled().await;
                        return;
                    }
                    while rx.try_recv().is_ok() {}
                }
                _ = ticker.tick() => {}
            }
            if let Err(err) = self.reload() {
                warn!(error = %mcr_core::ErrorChain(&err), "certificate reload failed; the previous certificate is still served");
            }
        }
    }

    fn start_watcher(
        &self,
        tx: tokio::sync::mpsc::UnboundedSender<()>,
    ) -> Result<notify::RecommendedWatcher, Error> {
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if event.is_ok() {
                    let _ = tx.send(());
                }
            })
            .map_err(|source| Error::Watch {
                path: self.cert_path.clone(),
                source,
            })?;
        let mut dirs = vec![parent(&self.cert_path)];
        let key_dir = parent(&self.key_path);
        if !dirs.contains(&key_dir) {
            dirs.push(key_dir);
        }
        for dir in dirs {
            watcher
                .watch(&dir, notify::RecursiveMode::NonRecursive)
                .map_err(|source| Error::Watch {
                    path: dir.clone(),
                    source,
                })?;
            debug!(dir = %dir.display(), "watching for certificate rotation");
        }
        Ok(watcher)
    }
}

impl ResolvesServerCert for CertificateReloader {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().clone())
    }
}

fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn read_pair(cert_path: &Path, key_path: &Path) -> Result<(Vec<u8>, Vec<u8>), Error> {
    let cert = std::fs::read(cert_path).map_err(|source| Error::Read {
        what: "certificate",
        path: cert_path.to_path_buf(),
        source,
    })?;
    let key = std::fs::read(key_path).map_err(|source| Error::Read {
        what: "key",
        path: key_path.to_path_buf(),
        source,
    })?;
    Ok((cert, key))
}

fn certified_key(
    cert_path: &Path,
    key_path: &Path,
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, Error> {
    let pem = |path: &Path, reason: String| Error::Pem {
        path: path.to_path_buf(),
        reason,
    };
    let chain: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut &*cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| pem(cert_path, format!("not a PEM certificate chain: {e}")))?;
    if chain.is_empty() {
        return Err(pem(cert_path, "holds no CERTIFICATE block".into()));
    }
    // Never show key material: only say that the key is unusable.
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut &*key_pem)
        .map_err(|_| pem(key_path, "not a PEM private key".into()))?
        .ok_or_else(|| pem(key_path, "holds no PRIVATE KEY block".into()))?;
    CertifiedKey::from_der(chain, key, provider).map_err(|err| match err {
        rustls::Error::InconsistentKeys(_) => pem(
            key_path,
            format!("does not match the certificate in {}", cert_path.display()),
        ),
        other => Error::Tls(other),
    })
}
