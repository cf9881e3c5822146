//! The internal HTTP server (`--internal-http-listen`, 127.0.0.1:6878 by default):
//!
//! | path | what | authentication |
//! | --- | --- | --- |
//! | `/api/livez` | the process answers | none (for probes) |
//! | `/api/readyz` | the catalog is loaded and the listeners are up (503 before) | none (for probes) |
//! | `/metrics` | Prometheus text: sinks, sources, sessions, storage | the wire's |
//! | `/` | the status page: sinks and sources, their lag over the last hour | the wire's |
//! | `/api/status` | what the status page draws, as JSON | the wire's |
//!
//! "The wire's" authentication: when the server authenticates SQL clients
//! (`--authenticator password|sasl`), these paths ask for the same user and
//! password with HTTP basic authentication, checked against the same verifiers
//! and throttled the same way.
//!
//! The server answers from before the data directory is opened: the probes say the
//! process lives and is not ready yet, the other paths answer 503 until the catalog is
//! loaded (a Kubernetes readiness probe then sees a starting server, not a dead port).

mod history;
mod prometheus;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tracing::{debug, info, warn};

use floe_adapter::Coordinator;
use floe_adapter::auth::Authenticator;

pub use history::LagHistory;

/// How often the lag of every sink and source is sampled for the status page.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(5);

/// What the server reports from.
pub struct HttpState {
    /// What the status paths read and check credentials with; set once the catalog is
    /// loaded (until then those paths answer 503).
    loaded: OnceLock<Loaded>,
    /// Set once the catalog is loaded and every listener is up.
    ready: AtomicBool,
    history: LagHistory,
}

/// The server's state once its data directory is open.
struct Loaded {
    coordinator: Arc<Coordinator>,
    authenticator: Arc<Authenticator>,
}

impl HttpState {
    /// The state of a server still opening its data directory.
    pub fn starting() -> Arc<HttpState> {
        Arc::new(HttpState {
            loaded: OnceLock::new(),
            ready: AtomicBool::new(false),
            history: LagHistory::new(Duration::from_secs(3600), SAMPLE_INTERVAL),
        })
    }

    /// The catalog is loaded: the status paths answer from `coordinator`, behind
    /// `authenticator` (a second call changes nothing).
    pub fn loaded(&self, coordinator: Arc<Coordinator>, authenticator: Arc<Authenticator>) {
        let _ = self.loaded.set(Loaded {
            coordinator,
            authenticator,
        });
    }

    /// Marks the server ready (`/api/readyz` answers 200 from now on).
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

/// Serves until `shutdown` resolves, and samples lag every [`SAMPLE_INTERVAL`].
pub async fn serve(
    listener: TcpListener,
    state: Arc<HttpState>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let sampler = tokio::spawn(sample_lag(Arc::downgrade(&state)));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let state = state.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |request| {
                            let state = state.clone();
                            async move { Ok::<_, Infallible>(route(&state, peer, request).await) }
                        });
                        if let Err(e) = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await
                        {
                            debug!(%peer, error = %e, "HTTP connection ended with an error");
                        }
                    });
                }
                Err(e) => {
                    warn!(error = %e, "HTTP accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
    sampler.abort();
    info!("internal HTTP server stopped");
}

/// Samples every object's lag into the history until the state is dropped.
async fn sample_lag(state: std::sync::Weak<HttpState>) {
    let mut interval = tokio::time::interval(SAMPLE_INTERVAL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let Some(state) = state.upgrade() else {
            return;
        };
        let Some(loaded) = state.loaded.get() else {
            continue;
        };
        match loaded.coordinator.operational_status().await {
            Ok(status) => state.history.record(&status),
            Err(e) => warn!(error = %e, "sampling lag for the status page failed"),
        }
    }
}

type HttpResponse = Response<Full<Bytes>>;

async fn route(state: &HttpState, peer: SocketAddr, request: Request<Incoming>) -> HttpResponse {
    let path = request.uri().path().to_string();
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n");
    }
    match path.as_str() {
        "/api/livez" => text(StatusCode::OK, "ok\n"),
        "/api/readyz" if state.is_ready() => text(StatusCode::OK, "ready\n"),
        "/api/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
        "/metrics" | "/" | "/api/status" => {
            let Some(loaded) = state.loaded.get() else {
                return text(StatusCode::SERVICE_UNAVAILABLE, "starting\n");
            };
            if let Err(denied) = authenticate(loaded, peer, &request).await {
                return denied;
            }
            match path.as_str() {
                "/metrics" => metrics(state, loaded).await,
                "/" => respond(
                    StatusCode::OK,
                    "text/html; charset=utf-8",
                    include_str!("status.html"),
                ),
                _ => status_json(state, loaded).await,
            }
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// Checks HTTP basic credentials when the wire authenticates its clients.
async fn authenticate(
    state: &Loaded,
    peer: SocketAddr,
    request: &Request<Incoming>,
) -> Result<(), HttpResponse> {
    let authenticator = &state.authenticator;
    if !authenticator.method.requires_password() {
        return Ok(());
    }
    let Some((user, password)) = basic_credentials(request) else {
        return Err(unauthorized());
    };
    if authenticator.check_password(&user, &password).await {
        authenticator.login_succeeded(&user, peer.ip());
        Ok(())
    } else {
        authenticator.login_failed(&user, peer.ip()).await;
        Err(unauthorized())
    }
}

fn basic_credentials(request: &Request<Incoming>) -> Option<(String, String)> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

fn unauthorized() -> HttpResponse {
    let mut response = text(StatusCode::UNAUTHORIZED, "authentication required\n");
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"floe\", charset=\"UTF-8\""),
    );
    response
}

async fn metrics(state: &HttpState, loaded: &Loaded) -> HttpResponse {
    match loaded.coordinator.operational_status().await {
        Ok(status) => respond(
            StatusCode::OK,
            floe_metrics::TextEncoder::CONTENT_TYPE,
            prometheus::render(&status, loaded.authenticator.failures(), state.is_ready()),
        ),
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("reading the server's state failed: {e}\n"),
        ),
    }
}

async fn status_json(state: &HttpState, loaded: &Loaded) -> HttpResponse {
    match loaded.coordinator.operational_status().await {
        Ok(status) => respond(
            StatusCode::OK,
            "application/json",
            history::status_document(&status, &state.history).to_string(),
        ),
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("reading the server's state failed: {e}\n"),
        ),
    }
}

fn text(status: StatusCode, body: &str) -> HttpResponse {
    respond(status, "text/plain; charset=utf-8", body.to_string())
}

fn respond(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> HttpResponse {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
