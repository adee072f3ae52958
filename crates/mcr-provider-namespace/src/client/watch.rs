//! Rewriting a streamed watch response line by line, without buffering the whole stream.

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody, combinators::UnsyncBoxBody};

use super::body::rewrite_watch_line;

/// The body type of responses produced by the namespace service.
pub(crate) type BoxBody = UnsyncBoxBody<Bytes, tower::BoxError>;

/// Moves every complete line out of `buf`, rewritten, into the returned bytes.
fn take_lines(buf: &mut Vec<u8>, from: &str, to: &str) -> Vec<u8> {
    let Some(last) = buf.iter().rposition(|b| *b == b'\n') else {
        return Vec::new();
    };
    let complete: Vec<u8> = buf.drain(..=last).collect();
    let mut out = Vec::with_capacity(complete.len());
    for line in complete.split(|b| *b == b'\n') {
        if line.is_empty() {
            continue;
        }
        match rewrite_watch_line(line, from, to) {
            Some(rewritten) => out.extend_from_slice(&rewritten),
            None => out.extend_from_slice(line),
        }
        out.push(b'\n');
    }
    out
}

struct State {
    frames: http_body_util::BodyDataStream<kube::client::Body>,
    buf: Vec<u8>,
    done: bool,
    from: Arc<str>,
    to: Arc<str>,
}

/// Wraps a watch response body so that each event's object is moved from namespace `from` to
/// `to`. Events are forwarded as soon as their line is complete.
pub(crate) fn rewrite_watch_body(
    body: kube::client::Body,
    from: Arc<str>,
    to: Arc<str>,
) -> BoxBody {
    let state = State {
        frames: body.into_data_stream(),
        buf: Vec::new(),
        done: false,
        from,
        to,
    };
    let stream = futures::stream::unfold(state, |mut st| async move {
        while !st.done {
            match st.frames.next().await {
                Some(Ok(chunk)) => {
                    st.buf.extend_from_slice(&chunk);
                    let out = take_lines(&mut st.buf, &st.from, &st.to);
                    if !out.is_empty() {
                        return Some((Ok(Bytes::from(out)), st));
                    }
                }
                Some(Err(err)) => {
                    st.done = true;
                    return Some((Err(tower::BoxError::from(err)), st));
                }
                None => {
                    st.done = true;
                    if !st.buf.is_empty() {
                        st.buf.push(b'\n');
                        let out = take_lines(&mut st.buf, &st.from, &st.to);
                        return Some((Ok(Bytes::from(out)), st));
                    }
                }
            }
        }
        None
    });
    StreamBody::new(stream.map(|r| r.map(Frame::data))).boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_lines_only() {
        let mut buf = br#"{"type":"ADDED","object":{"metadata":{"namespace":"r"}}}
{"type":"MOD"#
            .to_vec();
        let out = take_lines(&mut buf, "r", "default");
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(r#""namespace":"default""#), "{text}");
        assert!(text.ends_with('\n'));
        assert_eq!(buf, br#"{"type":"MOD"#);
    }

    #[tokio::test]
    async fn streams_across_chunks() {
        let chunks: Vec<Result<Frame<Bytes>, std::io::Error>> = vec![
            Ok(Frame::data(Bytes::from_static(br#"{"type":"ADDED","object":{"metadata":{"na"#))),
            Ok(Frame::data(Bytes::from_static(
                b"mespace\":\"r\"}}}\n{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"namespace\":\"r\"}}}",
            ))),
        ];
        let upstream = StreamBody::new(futures::stream::iter(chunks));
        let bytes = BodyExt::collect(upstream).await.unwrap().to_bytes();
        let body = kube::client::Body::from(bytes);
        let out = BodyExt::collect(rewrite_watch_body(body, "r".into(), "default".into()))
            .await
            .unwrap()
            .to_bytes();
        let text = String::from_utf8(out.to_vec()).unwrap();
        assert_eq!(
            text.matches(r#""namespace":"default""#).count(),
            2,
            "{text}"
        );
        assert_eq!(text.lines().count(), 2);
    }
}
