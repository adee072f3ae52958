//! [`Compact`]: a response body whose data chunks own exactly their bytes.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

/// A response body that copies each data chunk out of the connection's read buffer.
///
/// hyper hands out chunks that share the connection's whole read buffer (8 KiB). A watch
/// reader keeps the last chunk it consumed until the next one arrives (kube frames the
/// stream with a `StreamReader`), so an idle watch pinned a read buffer while hyper had
/// already allocated the next one for the pending read: two buffers per member. Copying
/// frees the shared buffer as soon as the chunk is taken; what stays is the size of the
/// last event. The copy is small next to decoding the JSON it holds.
pub(super) struct Compact(pub(super) Incoming);

impl Body for Compact {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.0).poll_frame(cx).map(|frame| {
            frame.map(|frame| frame.map(|f| f.map_data(|data| Bytes::copy_from_slice(&data))))
        })
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}
