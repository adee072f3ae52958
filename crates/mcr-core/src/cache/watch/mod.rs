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

use std::{collections::VecDeque, time::Duration};

use futures::stream::{self, BoxStream, StreamExt};
use kube::{
    Resource, ResourceExt,
    core::{ObjectList, PartialObjectMeta, Request, Status, WatchEvent},
    runtime::watcher::{self, Event},
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
/// `PartialObjectMeta<_>`).
pub(super) fn stream<K>(
    client: kube::Client,
    url: String,
    opts: InformerOptions,
    metadata: bool,
) -> BoxStream<'static, watcher::Result<Event<K>>>
where
    K: Resource + Clone + DeserializeOwned + Send + 'static,
{
    let lister = Lister {
        client,
        request: Request::new(url),
        opts,
        metadata,
    };
    stream::unfold((lister, State::Start), |(lister, state)| async move {
        let (item, state) = lister.step(state).await;
        Some((item, (lister, state)))
    })
    .boxed()
}

struct Lister {
    client: kube::Client,
    request: Request,
    opts: InformerOptions,
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
    /// Advances until there is something to yield.
    ///
    /// The stream keeps this future for its whole life, at the size of its largest state: the
    /// list and watch requests are boxed, so an idle watch holds only what waiting for the next
    /// event takes (~2 KiB less per informer).
    async fn step<K>(&self, mut state: State<K>) -> (watcher::Result<Event<K>>, State<K>)
    where
        K: Resource + Clone + DeserializeOwned + Send + 'static,
    {
        loop {
            state = match state {
                State::Start if self.opts.streaming_list => {
                    return match Box::pin(self.watch(true, "0")).await {
                        Ok(events) => (Ok(Event::Init), State::Streaming { events }),
                        Err(err) => (Err(watcher::Error::WatchStartFailed(err)), State::Start),
                    };
                }
                State::Start => {
                    let page = State::Page {
                        token: None,
                        items: VecDeque::new(),
                        version: None,
                    };
                    return (Ok(Event::Init), page);
                }
                State::Page {
                    token,
                    mut items,
                    version,
                } => {
                    if let Some(object) = items.pop_front() {
                        let page = State::Page {
                            token,
                            items,
                            version,
                        };
                        return (Ok(Event::InitApply(object)), page);
                    }
                    match (token, version) {
                        (None, Some(version)) => {
                            return (Ok(Event::InitDone), State::Listed { version });
                        }
                        (token, _) => match Box::pin(self.list::<K>(token)).await {
                            Ok(list) => {
                                let version = non_empty(list.metadata.resource_version);
                                let token = non_empty(list.metadata.continue_);
                                if version.is_none() && token.is_none() {
                                    return (Err(watcher::Error::NoResourceVersion), State::Start);
                                }
                                State::Page {
                                    token,
                                    items: list.items.into(),
                                    version,
                                }
                            }
                            Err(err) => {
                                return (Err(watcher::Error::InitialListFailed(err)), State::Start);
                            }
                        },
                    }
                }
                State::Listed { version } => match Box::pin(self.watch(false, &version)).await {
                    Ok(events) => State::Watching { version, events },
                    Err(err) => {
                        let next = if is_gone(&err) {
                            State::Start
                        } else {
                            State::Listed { version }
                        };
                        return (Err(watcher::Error::WatchStartFailed(err)), next);
                    }
                },
                State::Streaming { mut events } => match self.next(&mut events).await {
                    Some(Ok(WatchEvent::Added(object) | WatchEvent::Modified(object))) => {
                        return (Ok(Event::InitApply(object)), State::Streaming { events });
                    }
                    Some(Ok(WatchEvent::Deleted(_))) => {
                        tracing::debug!("delete event during a streaming list's initial events");
                        State::Streaming { events }
                    }
                    Some(Ok(WatchEvent::Bookmark(mark))) => {
                        if mark.metadata.annotations.contains_key(INITIAL_EVENTS_END) {
                            let version = mark.metadata.resource_version;
                            return (Ok(Event::InitDone), State::Watching { version, events });
                        }
                        State::Streaming { events }
                    }
                    Some(Ok(WatchEvent::Error(status))) => {
                        let next = if status.code == 410 {
                            State::Start
                        } else {
                            State::Streaming { events }
                        };
                        return (Err(watcher::Error::WatchError(status)), next);
                    }
                    Some(Err(err)) => {
                        return (
                            Err(watcher::Error::WatchFailed(err)),
                            State::Streaming { events },
                        );
                    }
                    None => State::Start,
                },
                State::Watching {
                    version,
                    mut events,
                } => match self.next(&mut events).await {
                    Some(Ok(WatchEvent::Added(object) | WatchEvent::Modified(object))) => {
                        return applied(Event::Apply, object, events);
                    }
                    Some(Ok(WatchEvent::Deleted(object))) => {
                        return applied(Event::Delete, object, events);
                    }
                    Some(Ok(WatchEvent::Bookmark(mark))) => State::Watching {
                        version: mark.metadata.resource_version,
                        events,
                    },
                    Some(Ok(WatchEvent::Error(status))) => {
                        let next = if status.code == 410 {
                            State::Start
                        } else {
                            State::Watching { version, events }
                        };
                        return (Err(watcher::Error::WatchError(status)), next);
                    }
                    Some(Err(err)) => {
                        let watching = State::Watching { version, events };
                        return (Err(watcher::Error::WatchFailed(err)), watching);
                    }
                    None => State::Listed { version },
                },
            };
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

/// `Apply` / `Delete` of a watched object, which must carry a resource version to resume from.
fn applied<K: Resource>(
    event: fn(K) -> Event<K>,
    object: K,
    events: Events<K>,
) -> (watcher::Result<Event<K>>, State<K>) {
    match non_empty(object.resource_version()) {
        Some(version) => (Ok(event(object)), State::Watching { version, events }),
        None => (Err(watcher::Error::NoResourceVersion), State::Start),
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

    /// The stream holds the step future for its life: it must not carry the requests' states.
    #[tokio::test]
    async fn the_step_future_stays_small() {
        let client = kube::Client::new(
            tower::service_fn(|_req: http::Request<kube::client::Body>| async {
                Ok::<_, std::convert::Infallible>(http::Response::new(kube::client::Body::empty()))
            }),
            "default",
        );
        let lister = Lister {
            client,
            request: Request::new("/api/v1/configmaps"),
            opts: InformerOptions::default(),
            metadata: false,
        };
        let step = lister.step::<ConfigMap>(State::Start);
        let size = std::mem::size_of_val(&step);
        eprintln!("step future: {size} bytes");
        assert!(size <= 1024, "step future of {size} bytes");
    }
}
