//! [`Events`]: the watch events of one watch response, decoded from its chunks as they come.

use std::marker::PhantomData;

use bytes::{Buf, Bytes};
use http_body::Body;
use http_body_util::BodyExt;
use kube::core::{Status, WatchEvent};
use serde::de::DeserializeOwned;

/// The longest event accepted (the API server stores objects of at most ~1.5 MiB; an event
/// holds one). A longer line is treated as a broken stream, not buffered without end.
pub(super) const MAX_EVENT_BYTES: usize = 16 << 20;

/// A watch response body, read as newline-separated JSON events.
///
/// Events are decoded straight out of each chunk; only an event that spans chunks is copied
/// into `partial`, which is released once that event is decoded. An idle watch therefore holds
/// no read buffer of its own (kube's watch keeps an 8 KiB line buffer for its whole life).
pub(super) struct Events<K, B = kube::client::Body> {
    body: B,
    /// What is left of the last chunk, not yet decoded.
    chunk: Bytes,
    /// The beginning of an event whose end has not arrived yet.
    partial: Vec<u8>,
    ended: bool,
    _kind: PhantomData<fn() -> K>,
}

impl<K, B> Events<K, B>
where
    K: DeserializeOwned,
    B: Body<Data = Bytes, Error = kube::Error> + Unpin,
{
    pub(super) fn new(body: B) -> Self {
        Events {
            body,
            chunk: Bytes::new(),
            partial: Vec::new(),
            ended: false,
            _kind: PhantomData,
        }
    }

    /// The next event; `None` once the response has ended (the server closed the watch, or
    /// the connection dropped in a way that only means "watch again").
    pub(super) async fn next(&mut self) -> Option<Result<WatchEvent<K>, kube::Error>> {
        loop {
            if let Some(end) = memchr::memchr(b'\n', &self.chunk) {
                let line = self.chunk.split_to(end + 1);
                let event = if self.partial.is_empty() {
                    decode(&line[..end])
                } else {
                    let mut whole = std::mem::take(&mut self.partial);
                    whole.extend_from_slice(&line[..end]);
                    decode(&whole)
                };
                match event {
                    Some(event) => return Some(event),
                    None => continue,
                }
            }
            if !self.chunk.is_empty() {
                if self.partial.len() + self.chunk.len() > MAX_EVENT_BYTES {
                    self.end();
                    return Some(Err(kube::Error::ReadEvents(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("watch event longer than {MAX_EVENT_BYTES} bytes"),
                    ))));
                }
                self.partial.extend_from_slice(&self.chunk);
                self.chunk.clear();
            }
            if self.ended {
                return None;
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(mut data) = frame.into_data() {
                        self.chunk = data.copy_to_bytes(data.remaining());
                    }
                }
                Some(Err(err)) => {
                    self.end();
                    if ends_quietly(&err) {
                        tracing::debug!(error = %crate::ErrorChain(&err), "watch connection ended");
                        return None;
                    }
                    return Some(Err(err));
                }
                None => {
                    if !self.partial.is_empty() {
                        tracing::debug!(bytes = self.partial.len(), "watch ended inside an event");
                    }
                    self.end();
                    return None;
                }
            }
        }
    }

    fn end(&mut self) {
        self.ended = true;
        self.chunk = Bytes::new();
        self.partial = Vec::new();
    }
}

/// One line: `None` for a blank line, an event, or the error the line carries.
fn decode<K: DeserializeOwned>(line: &[u8]) -> Option<Result<WatchEvent<K>, kube::Error>> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(match serde_json::from_slice::<WatchEvent<K>>(line) {
        Ok(event) => Ok(event),
        // A bare `Status` instead of an event (some servers and proxies end a watch so).
        Err(err) => match serde_json::from_slice::<Status>(line) {
            Ok(status) if status.code != 0 => Err(kube::Error::Api(status.boxed())),
            _ => Err(kube::Error::SerdeError(err)),
        },
    })
}

/// A connection that times out or is cut mid-response only means the watch must be resumed
/// (long watches see this), as kube's own watch treats it.
fn ends_quietly(err: &kube::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::TimedOut
            )
        {
            return true;
        }
        if e.to_string().contains("unexpected EOF during chunk") {
            return true;
        }
        source = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    type Frames =
        futures::stream::Iter<std::vec::IntoIter<Result<http_body::Frame<Bytes>, kube::Error>>>;
    type Chunks = http_body_util::StreamBody<Frames>;

    /// A body delivering `chunks` one frame each.
    fn body(chunks: &[&[u8]]) -> Chunks {
        let frames: Vec<_> = chunks
            .iter()
            .map(|c| Ok(http_body::Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        http_body_util::StreamBody::new(futures::stream::iter(frames))
    }

    fn added(name: &str, rv: &str) -> String {
        format!(
            "{{\"type\":\"ADDED\",\"object\":{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\
             \"metadata\":{{\"name\":\"{name}\",\"resourceVersion\":\"{rv}\"}}}}}}\n"
        )
    }

    async fn names(events: &mut Events<ConfigMap, Chunks>) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(event) = events.next().await {
            match event {
                Ok(WatchEvent::Added(cm)) => out.push(cm.metadata.name.unwrap_or_default()),
                Ok(other) => out.push(format!("{other:?}")),
                Err(err) => out.push(format!("error: {err}")),
            }
        }
        out
    }

    #[tokio::test]
    async fn events_within_and_across_chunks() {
        let (a, b, c) = (added("a", "1"), added("b", "2"), added("c", "3"));
        let mut two = a.clone();
        two.push_str(&b);
        // Two events in one chunk, then one split over three chunks, a blank line between.
        let (c1, rest) = c.split_at(10);
        let (c2, c3) = rest.split_at(20);
        let mut events = Events::<ConfigMap, Chunks>::new(body(&[
            two.as_bytes(),
            b"\n",
            c1.as_bytes(),
            c2.as_bytes(),
            c3.as_bytes(),
        ]));
        assert_eq!(names(&mut events).await, ["a", "b", "c"]);
        assert!(events.partial.capacity() == 0 && events.chunk.is_empty());
    }

    #[tokio::test]
    async fn a_bad_line_is_an_error_and_the_stream_goes_on() {
        let mut events = Events::<ConfigMap, Chunks>::new(body(&[
            b"{not json}\n",
            br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old","reason":"Expired","code":410}"#,
            b"\n",
            added("a", "1").as_bytes(),
        ]));
        let seen = names(&mut events).await;
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert!(
            seen[0].starts_with("error: Error deserializing"),
            "{seen:?}"
        );
        assert!(seen[1].contains("too old"), "{seen:?}");
        assert_eq!(seen[2], "a");
    }

    #[tokio::test]
    async fn an_event_cut_off_by_the_end_is_dropped() {
        let a = added("a", "1");
        let mut events =
            Events::<ConfigMap, Chunks>::new(body(&[a.as_bytes(), b"{\"type\":\"ADD"]));
        assert_eq!(names(&mut events).await, ["a"]);
    }

    #[tokio::test]
    async fn an_endless_line_is_refused() {
        let big = vec![b' '; 1 << 20];
        let chunks: Vec<&[u8]> = std::iter::once(&b"{\"type\":\"ADDED\",\"object\":"[..])
            .chain(std::iter::repeat_n(
                &big[..],
                MAX_EVENT_BYTES / big.len() + 1,
            ))
            .collect();
        let mut events = Events::<ConfigMap, Chunks>::new(body(&chunks));
        let seen = names(&mut events).await;
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert!(seen[0].contains("longer than"), "{seen:?}");
    }
}
