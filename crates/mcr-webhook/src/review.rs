//! The reply shapes: what kube-apiserver reads back from a webhook, including for requests the
//! webhook could not handle (`allowed: false` with a status, and the request's uid when known).

use http::StatusCode;
use kube::core::{
    Status,
    admission::AdmissionResponse,
    conversion::{ConversionResponse, ConversionReview},
};

/// Which review a route speaks, so an error reply has the shape its caller parses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReviewKind {
    /// `admission.k8s.io/v1` `AdmissionReview` (mutating and validating webhooks).
    Admission,
    /// `apiextensions.k8s.io/v1` `ConversionReview` (CRD conversion).
    Conversion,
}

/// An HTTP status and a JSON body.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn ok(body: Vec<u8>) -> Reply {
        Reply {
            status: StatusCode::OK,
            body,
        }
    }
}

impl ReviewKind {
    /// A review refusing the request: `allowed: false` (admission) or a failed result
    /// (conversion), carrying `uid` when the request's uid could be read.
    pub(crate) fn refuse(
        self,
        http: StatusCode,
        uid: Option<String>,
        code: u16,
        reason: &str,
        message: &str,
    ) -> Reply {
        let status = Status::failure(message, reason).with_code(code);
        let body = match self {
            ReviewKind::Admission => {
                let mut response = AdmissionResponse::invalid(message);
                response.uid = uid.unwrap_or_default();
                response.result = status;
                serde_json::to_vec(&response.into_review())
            }
            ReviewKind::Conversion => {
                let mut response = ConversionResponse::invalid(status);
                response.uid = uid.unwrap_or_default();
                let mut review: ConversionReview = response.into_review();
                review.types.api_version = "apiextensions.k8s.io/v1".into();
                review.types.kind = "ConversionReview".into();
                serde_json::to_vec(&review)
            }
        };
        Reply {
            status: http,
            // Serializing these types cannot fail (string maps and plain fields only).
            body: body.unwrap_or_default(),
        }
    }
}

/// The `request.uid` of a review body, if it parses that far.
pub(crate) fn uid_of(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Review {
        request: Option<Uid>,
    }
    #[derive(serde::Deserialize)]
    struct Uid {
        uid: Option<String>,
    }
    serde_json::from_slice::<Review>(body)
        .ok()?
        .request?
        .uid
        .filter(|u| !u.is_empty())
}
