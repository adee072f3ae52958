//! A client whose lists of one collection are held back: that collection's namespace lists
//! last, so a test can show that nothing is decided before every watch has listed.

use std::time::Duration;

use http::Request;
use kube::client::Body;

/// `client`, with its lists (not its watches) of `path` (e.g.
/// `/api/v1/namespaces/ns-b/secrets`) held back until `release()` says so, or for at most
/// `hold`. Every other request goes straight to the server.
///
/// ```no_run
/// # fn demo(host: kube::Client) {
/// use std::time::Duration;
/// let path = "/api/v1/namespaces/ns-b/secrets".to_string();
/// let client = mcr_test_support::listing_last(host, path, Duration::from_secs(5), || false);
/// # }
/// ```
pub fn listing_last(
    client: kube::Client,
    path: String,
    hold: Duration,
    release: impl Fn() -> bool + Clone + Send + Sync + 'static,
) -> kube::Client {
    let service = tower::service_fn(move |req: Request<Body>| {
        let (client, release) = (client.clone(), release.clone());
        let held = req.uri().path() == path
            && !req.uri().query().unwrap_or_default().contains("watch=true");
        async move {
            if held {
                let until = tokio::time::Instant::now() + hold;
                while !release() && tokio::time::Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            client.send(req).await
        }
    });
    kube::Client::new(service, "default")
}
