//! The informers' list-then-watch loop.
//!
//! [`stream`] yields what `kube_runtime::watcher` yields (`Init`, `InitApply`, `InitDone`,
//! then `Apply` / `Delete`, and a `watcher::Error` for every failure, after which the caller
//! backs off and polls again) and recovers the same way: a watch that ends or breaks resumes
//! from the last resource version seen, `410 Gone` starts over with a fresh list. Providers
//! watch their source of truth with it too ([`watch`], [`watch_metadata`]), so every watch mcr
//! opens runs this one loop. Metadata-only watches send `as=PartialObjectMetadata(List)`, so
//! Secrets' data, for one, never travel (kube 5's `watcher` does so too over an
//! `Api<PartialObjectMeta<K>>`). What it does that kube's does not:
//! - **an idle watch holds no read buffer** ([`events::Events`] decodes events straight out of
//!   the response's chunks; kube's watch keeps an 8 KiB line buffer per watch for its life).
//!
//! It also starts over when the watch request itself is refused with `410 Gone` (kube retries
//! the same resource version).

mod events;

use std::{collections::VecDeque, sync::Arc, time::Duration};

use futures::stream::{self, BoxStream, StreamExt};
use kube::{
    Resource, ResourceExt,
    core::{ObjectList, PartialObjectMeta, Request, Status, WatchEvent},
    runtime::watcher::{self, DefaultBackoff, Event},
};
use serde::de::DeserializeOwned;

use self::events::Events;
use super::key::InformerOptions;

/// How much of an error response's body is read (its `Status`).
const MAX_ERROR_BODY: usize = 64 << 10;

/// How long past the server-side watch timeout a silent watch is given before it is
/// considered dead and resumed (kube-runtime's margin).
const IDLE_MARGIN: Duration = Duration::from_secs(5);

/// How long a list page, or the opening of a watch, may go unanswered before it is given up
/// (a `watcher::Error` like any failed request, then backoff and a retry): kube-apiserver's own
/// request timeout (`--request-timeout`, 60 s), after which it has abandoned the request
/// anyway, plus a margin. A request lost on the way (a dead connection, a proxy that dropped
/// it) would otherwise hold the informer until the client's read timeout, or forever where
/// the client has none.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(65);

/// `request`, or an error once it has gone unanswered for [`REQUEST_TIMEOUT`].
async fn bounded<T>(what: &str, request: impl Future<Output = kube::Result<T>>) -> kube::Result<T> {
    match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
        Ok(answer) => answer,
        Err(_) => Err(kube::Error::Service(
            format!("{what}: no answer within {}s", REQUEST_TIMEOUT.as_secs()).into(),
        )),
    }
}

/// The annotation of the bookmark that ends a streaming list's initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// A list-then-watch stream of `api`'s objects: kube-runtime's `watcher` with mcr's own loop,
/// the one every informer uses. It yields the same events (`Init`, `InitApply`, `InitDone`,
/// `Apply`, `Delete`) and errors, so kube-runtime's `WatchStreamExt` (`default_backoff`, ...)
/// applies unchanged; providers watch their source of truth with it.
///
/// ```no_run
/// use futures::StreamExt;
/// use k8s_openapi::api::core::v1::Secret;
/// use kube::runtime::{WatchStreamExt, watcher};
/// # async fn f(client: kube::Client) {
/// let api: kube::Api<Secret> = kube::Api::namespaced(client, "fleet");
/// let mut events = mcr_core::watch(api, watcher::Config::default().labels("fleet=yes"))
///     .default_backoff()
///     .boxed();
/// while let Some(event) = events.next().await { /* ... */ }
/// # }
/// ```
pub fn watch<K>(
    api: kube::Api<K>,
    config: watcher::Config,
) -> BoxStream<'static, watcher::Result<Event<K>>>
where
    K: Resource + Clone + DeserializeOwned + Send + 'static,
{
    let url = api.resource_url().to_owned();
    stream(api.into_client(), url, config.into(), false)
}

/// [`watch`] of the metadata of `api`'s objects only: lists and watches ask the server for
/// `PartialObjectMetadata`, so a Secret's data never travels.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::Secret;
/// use kube::{api::PartialObjectMeta, runtime::watcher};
/// # fn f(client: kube::Client) {
/// let api: kube::Api<PartialObjectMeta<Secret>> = kube::Api::all(client);
/// let events = mcr_core::watch_metadata(api, watcher::Config::default());
/// # }
/// ```
pub fn watch_metadata<K>(
    api: kube::Api<PartialObjectMeta<K>>,
    config: watcher::Config,
) -> BoxStream<'static, watcher::Result<Event<PartialObjectMeta<K>>>>
where
    K: Resource + Clone + DeserializeOwned + Send + 'static,
    PartialObjectMeta<K>: Resource + DeserializeOwned,
{
    let url = api.resource_url().to_owned();
    stream(api.into_client(), url, config.into(), true)
}

/// A list-then-watch stream of the objects at `url` (a collection path such as
/// `/api/v1/configmaps`); `metadata`: ask for `PartialObjectMetadata` (then `K` must be a
/// `PartialObjectMeta<_>`). Errors are yielded at once: the caller backs off.
pub(super) fn stream<K>(
    client: kube::Client,
    url: String,
    opts: InformerOptions,
    metadata: bool,
) -> BoxStream<'static, watcher::Result<Event<K>>>
where
    K: Resource + Clone + DeserializeOwned + Send + 'static,
{
    Watch::new(Arc::new(client), url, Arc::new(opts), metadata, false).into_stream()
}

/// [`stream`] that waits out its own errors with kube-runtime's [`DefaultBackoff`], as
/// `.default_backoff()` would: after an error the next item comes once the backoff's delay
/// has passed, and any event resets it. The informers' stream: the backoff's timer lives in
/// the one future the stream keeps, and its state only while the watch is failing (kube's
/// `StreamBackoff` around the stream would be a second allocation holding both for the
/// stream's whole life, ~370 bytes per informer).
pub(super) fn backed_off<K>(
    client: Arc<kube::Client>,
    url: String,
    opts: Arc<InformerOptions>,
    metadata: bool,
) -> BoxStream<'static, watcher::Result<Event<K>>>
where
    K: Resource + Clone + DeserializeOwned + Send + 'static,
{
    Watch::new(client, url, opts, metadata, true).into_stream()
}

/// The value of a [`stream`] between two items.
struct Watch<K> {
    lister: Lister,
    state: State<K>,
    /// Whether the stream waits out its errors ([`backed_off`]).
    backs_off: bool,
    /// The backoff since the last event, while failing (a fresh one is a reset one).
    backoff: Option<Box<DefaultBackoff>>,
    /// What the next step waits for first.
    wait: Wait,
}

/// What a [`Watch`] waits for before its next step.
enum Wait {
    Nothing,
    /// The backoff's delay after an error.
    For(Duration),
    /// The backoff gave up: the stream ends.
    GivenUp,
}

impl<K> Watch<K>
where
    K: Resource + Clone + DeserializeOwned + Send + 'static,
{
    fn new(
        client: Arc<kube::Client>,
        url: String,
        opts: Arc<InformerOptions>,
        metadata: bool,
        backs_off: bool,
    ) -> Self {
        let lister = Lister {
            client,
            request: Request::new(url),
            opts,
            metadata,
        };
        Watch {
            lister,
            state: State::Start,
            backs_off,
            backoff: None,
            wait: Wait::Nothing,
        }
    }

    fn into_stream(self) -> BoxStream<'static, watcher::Result<Event<K>>> {
        // `advance` takes the value and gives it back, so the stream holds either the value
        // or the future that owns it, never both.
        stream::unfold(self, Watch::advance).boxed()
    }

    /// The next item, and the value for the one after. (An `async` block, not an `async fn`:
    /// the block works on the value it captured, where an `async fn` would keep a second copy
    /// of its argument.)
    #[allow(clippy::manual_async_fn)] // see above
    fn advance(mut self) -> impl Future<Output = Option<(watcher::Result<Event<K>>, Self)>> {
        async move {
            match std::mem::replace(&mut self.wait, Wait::Nothing) {
                Wait::Nothing => {}
                Wait::For(delay) => tokio::time::sleep(delay).await,
                Wait::GivenUp => return None,
            }
            let item = self.lister.step(&mut self.state).await;
            if !self.backs_off {
            } else if item.is_err() {
                let backoff = self.backoff.get_or_insert_default();
                self.wait = match backoff.next() {
                    Some(delay) => {
                        tracing::debug!(?delay, "watch failed, backing off");
                        Wait::For(delay)
                    }
                    None => Wait::GivenUp,
                };
            } else {
                self.backoff = None;
            }
            Some((item, self))
        }
    }
}

struct Lister {
    /// Shared with the cache (and every watch of it).
    client: Arc<kube::Client>,
    request: Request,
    /// Shared with the informer's key in its cache.
    opts: Arc<InformerOptions>,
    metadata: bool,
}

enum State<K> {
    /// Nothing listed: the next step announces a new list (`Event::Init`).
    Start,
    /// Listing page by page; `version` is the list's resource version once the last page is in.
    Page {
        token: Option<String>,
        items: VecDeque<K>,
        version: Option<String>,
    },
    /// Listed (or resumed) at `version`, no watch open.
    Listed { version: String },
    /// A streaming list's watch, before its initial events have ended.
    Streaming { events: Events<K> },
    /// Watching from `version`.
    Watching { version: String, events: Events<K> },
}

impl Lister {
    /// Advances `state` until there is something to yield.
    ///
    /// The stream keeps this future for its whole life, at the size of its largest state: it
    /// works on the stream's state in place (no copies of it across a wait), and the list and
    /// watch requests are boxed, so an idle watch holds only what waiting for the next event
    /// takes.
    async fn step<K>(&self, state: &mut State<K>) -> watcher::Result<Event<K>>
    where
        K: Resource + Clone + DeserializeOwned + Send + 'static,
    {
        loop {
            match state {
                State::Start if self.opts.streaming_list => {
                    return match Box::pin(self.watch(true, "0")).await {
                        Ok(events) => {
                            *state = State::Streaming { events };
                            Ok(Event::Init)
                        }
                        Err(err) => Err(watcher::Error::WatchStartFailed(err)),
                    };
                }
                State::Start => {
                    *state = State::Page {
                        token: None,
                        items: VecDeque::new(),
                        version: None,
                    };
                    return Ok(Event::Init);
                }
                State::Page {
                    token,
                    items,
                    version,
                } => {
                    if let Some(object) = items.pop_front() {
                        return Ok(Event::InitApply(object));
                    }
                    if token.is_none()
                        && let Some(version) = version.take()
                    {
                        *state = State::Listed { version };
                        return Ok(Event::InitDone);
                    }
                    match Box::pin(self.list::<K>(token.take())).await {
                        Ok(list) => {
                            let version = non_empty(list.metadata.resource_version);
                            let token = non_empty(list.metadata.continue_);
                            if version.is_none() && token.is_none() {
                                *state = State::Start;
                                return Err(watcher::Error::NoResourceVersion);
                            }
                            *state = State::Page {
                                token,
                                items: list.items.into(),
                                version,
                            };
                        }
                        Err(err) => {
                            *state = State::Start;
                            return Err(watcher::Error::InitialListFailed(err));
                        }
                    }
                }
                State::Listed { version } => match Box::pin(self.watch(false, version)).await {
                    Ok(events) => {
                        let version = std::mem::take(version);
                        *state = State::Watching { version, events };
                    }
                    Err(err) => {
                        if is_gone(&err) {
                            *state = State::Start;
                        }
                        return Err(watcher::Error::WatchStartFailed(err));
                    }
                },
                State::Streaming { events } => match self.next(events).await {
                    Some(Ok(WatchEvent::Added(object) | WatchEvent::Modified(object))) => {
                        return Ok(Event::InitApply(object));
                    }
                    Some(Ok(WatchEvent::Deleted(_))) => {
                        tracing::debug!("delete event during a streaming list's initial events");
                    }
                    Some(Ok(WatchEvent::Bookmark(mark))) => {
                        if mark.metadata.annotations.contains_key(INITIAL_EVENTS_END) {
                            let version = mark.metadata.resource_version;
                            if let State::Streaming { events } =
                                std::mem::replace(state, State::Start)
                            {
                                *state = State::Watching { version, events };
                            }
                            return Ok(Event::InitDone);
                        }
                    }
                    Some(Ok(WatchEvent::Error(status))) => {
                        if status.code == 410 {
                            *state = State::Start;
                        }
                        return Err(watcher::Error::WatchError(status));
                    }
                    Some(Err(err)) => return Err(watcher::Error::WatchFailed(err)),
                    None => *state = State::Start,
                },
                State::Watching { version, events } => match self.next(events).await {
                    Some(Ok(WatchEvent::Added(object) | WatchEvent::Modified(object))) => {
                        return applied(Event::Apply, object, state);
                    }
                    Some(Ok(WatchEvent::Deleted(object))) => {
                        return applied(Event::Delete, object, state);
                    }
                    Some(Ok(WatchEvent::Bookmark(mark))) => {
                        *version = mark.metadata.resource_version;
                    }
                    Some(Ok(WatchEvent::Error(status))) => {
                        if status.code == 410 {
                            *state = State::Start;
                        }
                        return Err(watcher::Error::WatchError(status));
                    }
                    Some(Err(err)) => return Err(watcher::Error::WatchFailed(err)),
                    None => {
                        let version = std::mem::take(version);
                        *state = State::Listed { version };
                    }
                },
            }
        }
    }

    /// One page of the list.
    async fn list<K: Clone + DeserializeOwned>(
        &self,
        token: Option<String>,
    ) -> kube::Result<ObjectList<K>> {
        let mut params = self.opts.list_params();
        params.continue_token = token;
        let request = if self.metadata {
            self.request.list_metadata(&params)
        } else {
            self.request.list(&params)
        };
        let request = request.map_err(kube::Error::BuildRequest)?;
        bounded("list", self.client.request::<ObjectList<K>>(request)).await
    }

    /// Opens a watch from `version` (`initial`: a streaming list's first watch).
    async fn watch<K: DeserializeOwned>(
        &self,
        initial: bool,
        version: &str,
    ) -> kube::Result<Events<K>> {
        let params = self.opts.watch_params(initial);
        let request = if self.metadata {
            self.request.watch_metadata(&params, version)
        } else {
            self.request.watch(&params, version)
        };
        let mut request = request.map_err(kube::Error::BuildRequest)?;
        // Events are read as they come: no compression.
        request
            .headers_mut()
            .entry(http::header::ACCEPT_ENCODING)
            .or_insert(http::HeaderValue::from_static("identity"));
        let open = async {
            let response = self
                .client
                .send(request.map(kube::client::Body::from))
                .await?;
            let status = response.status();
            if status.is_client_error() || status.is_server_error() {
                return Err(api_error(status, response.into_body()).await);
            }
            Ok(Events::new(response.into_body()))
        };
        bounded("opening a watch", open).await
    }

    /// The next event, or `None` when the watch ended or stayed silent past its timeout.
    async fn next<K: DeserializeOwned>(
        &self,
        events: &mut Events<K>,
    ) -> Option<kube::Result<WatchEvent<K>>> {
        let Some(idle) = self.opts.idle_timeout() else {
            return events.next().await;
        };
        match tokio::time::timeout(idle + IDLE_MARGIN, events.next()).await {
            Ok(event) => event,
            Err(_) => {
                tracing::debug!(
                    seconds = idle.as_secs(),
                    "watch silent past its timeout, resuming"
                );
                None
            }
        }
    }
}

/// `Apply` / `Delete` of a watched object, which must carry a resource version to resume from
/// (`state` is the watch it came from).
fn applied<K: Resource>(
    event: fn(K) -> Event<K>,
    object: K,
    state: &mut State<K>,
) -> watcher::Result<Event<K>> {
    match non_empty(object.resource_version()) {
        Some(resume) => {
            if let State::Watching { version, .. } = state {
                *version = resume;
            }
            Ok(event(object))
        }
        None => {
            *state = State::Start;
            Err(watcher::Error::NoResourceVersion)
        }
    }
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

fn is_gone(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 410)
}

/// The error of a refused request, from its `Status` body (read up to [`MAX_ERROR_BODY`]).
async fn api_error(status: http::StatusCode, mut body: kube::client::Body) -> kube::Error {
    use http_body_util::BodyExt;
    let mut text = Vec::new();
    while text.len() < MAX_ERROR_BODY {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    text.extend_from_slice(data);
                }
            }
            Some(Err(err)) => return err,
            None => break,
        }
    }
    text.truncate(MAX_ERROR_BODY);
    match serde_json::from_slice::<Status>(&text) {
        Ok(parsed) if parsed.code != 0 => kube::Error::Api(parsed.boxed()),
        _ => {
            let text = String::from_utf8_lossy(&text);
            let reason = status.canonical_reason().unwrap_or("error");
            kube::Error::Api(
                Status::failure(text.trim(), reason)
                    .with_code(status.as_u16())
                    .boxed(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    /// A client whose every request is answered `500`.
    fn failing_client() -> kube::Client {
        kube::Client::new(
            tower::service_fn(|_req: http::Request<kube::client::Body>| async {
                let body = kube::client::Body::from(br#"{"kind":"Status","code":500}"#.to_vec());
                let mut response = http::Response::new(body);
                *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
                Ok::<_, std::convert::Infallible>(response)
            }),
            "default",
        )
    }

    /// How long (virtual time) the stream takes to yield its next `Init` after a failed list.
    async fn restart_delay(
        mut events: BoxStream<'static, watcher::Result<Event<ConfigMap>>>,
    ) -> Duration {
        assert!(matches!(events.next().await, Some(Ok(Event::Init))));
        assert!(matches!(
            events.next().await,
            Some(Err(watcher::Error::InitialListFailed(_)))
        ));
        let failed = tokio::time::Instant::now();
        assert!(matches!(events.next().await, Some(Ok(Event::Init))));
        failed.elapsed()
    }

    /// The informers' stream waits out an error with kube-runtime's default backoff (at least
    /// its 800 ms minimum) before it lists again, as `.default_backoff()` around it did; the
    /// plain stream leaves that to its caller and lists again at once.
    #[tokio::test(start_paused = true)]
    async fn the_informers_stream_backs_off_after_an_error() {
        let url = || "/api/v1/configmaps".to_owned();
        let opts = InformerOptions::default;
        let backed =
            backed_off::<ConfigMap>(Arc::new(failing_client()), url(), Arc::new(opts()), false);
        let waited = restart_delay(backed).await;
        assert!(
            waited >= Duration::from_millis(800),
            "listed again after {waited:?}"
        );
        let plain = stream::<ConfigMap>(failing_client(), url(), opts(), false);
        assert_eq!(restart_delay(plain).await, Duration::ZERO);
    }

    /// The stream holds one future for its life, the one of `Watch::advance`: it must not
    /// carry the requests' states, nor a second copy of the stream's value (an `async fn`
    /// taking the value keeps one: 1,456 bytes in a debug build, against 624).
    #[tokio::test]
    async fn the_stream_s_future_stays_small() {
        let client = kube::Client::new(
            tower::service_fn(|_req: http::Request<kube::client::Body>| async {
                Ok::<_, std::convert::Infallible>(http::Response::new(kube::client::Body::empty()))
            }),
            "default",
        );
        let watch = Watch::<ConfigMap>::new(
            Arc::new(client),
            "/api/v1/configmaps".to_owned(),
            Arc::default(),
            false,
            true,
        );
        let value = std::mem::size_of_val(&watch);
        let mut state = State::Start;
        let step = std::mem::size_of_val(&watch.lister.step::<ConfigMap>(&mut state));
        let advance = std::mem::size_of_val(&watch.advance());
        eprintln!("value: {value} bytes, step future: {step}, the stream's future: {advance}");
        assert!(step <= 320, "step future of {step} bytes");
        assert!(
            advance <= value + step + 32,
            "the stream's future is {advance} bytes: its value is {value}, its step {step}"
        );
    }
}
