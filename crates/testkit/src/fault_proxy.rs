//! A fault-injecting HTTP/1.1 proxy between a client (floe) and any HTTP peer, switched
//! from the test at run time. Optionally terminates TLS with a generated test CA.
//!
//! ```no_run
//! use floe_testkit::{FaultProxy, seaweedfs_shared};
//! use std::time::Duration;
//! let sw = seaweedfs_shared();
//! let proxy = FaultProxy::start(&sw.catalog_url());
//! // point floe's catalog URL at proxy.url() ...
//! proxy.drop_next_commit_response();          // the commit lands, its answer is lost
//! proxy.fail_next(2, 503, Some(1));            // two 503s with Retry-After: 1
//! proxy.set_delay(Duration::from_millis(300)); // every request waits 300 ms
//! proxy.refuse_connections(true);             // connections are closed at once
//! let commits = proxy.count("POST", "/v1/*/namespaces/*/tables/*");
//! ```
//!
//! Requests are forwarded unchanged (the `Host` header included, so SigV4 signatures stay
//! valid), one upstream connection per request; client connections are kept alive.
//! Route patterns match path segments: `*` is one segment, `**` any number.

use crate::tls::TestCa;
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// What happened to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Forwarded; the upstream status was returned to the client.
    Forwarded(u16),
    /// Answered by the proxy with this status (not forwarded).
    Injected(u16),
    /// Forwarded (upstream answered this status), then the client connection was closed
    /// without an answer.
    ResponseDropped(u16),
    /// The upstream could not be reached or answered garbage (client got 502).
    UpstreamFailed,
    /// Forwarded (upstream answered `upstream`), then the client got `sent` instead of the
    /// upstream's answer.
    AnswerReplaced { upstream: u16, sent: u16 },
}

/// One request seen by the proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    pub method: String,
    /// The path, without the query.
    pub path: String,
    pub query: String,
    pub outcome: Outcome,
}

#[derive(Clone, Debug)]
enum Route {
    Any,
    Commit,
    Pattern { method: String, pattern: String },
}

impl Route {
    fn matches(&self, method: &str, path: &str) -> bool {
        match self {
            Route::Any => true,
            Route::Commit => is_commit(method, path),
            Route::Pattern { method: m, pattern } => {
                (m == "*" || m.eq_ignore_ascii_case(method)) && path_matches(pattern, path)
            }
        }
    }
}

#[derive(Clone, Debug)]
struct Failure {
    route: Route,
    remaining: usize,
    status: u16,
    retry_after: Option<u64>,
}

#[derive(Clone, Debug)]
struct Drop {
    route: Route,
    remaining: usize,
}

/// A fault for the next `remaining` requests of `route`, with its parameter.
#[derive(Clone, Debug)]
struct Armed<T> {
    route: Route,
    remaining: usize,
    value: T,
}

#[derive(Default)]
struct State {
    delay: Option<Duration>,
    failures: Vec<Failure>,
    drops: Vec<Drop>,
    /// Requests held back this long before they are forwarded.
    holds: Vec<Armed<Duration>>,
    /// Requests forwarded whose answers are replaced by this status.
    replacements: Vec<Armed<u16>>,
    refuse: bool,
    refused_connections: usize,
    log: Vec<RequestRecord>,
}

struct Shared {
    state: Mutex<State>,
    upstream: String,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running proxy (its own thread and runtime). Stopped when dropped.
pub struct FaultProxy {
    port: u16,
    upstream: String,
    shared: Arc<Shared>,
    tls: Option<TestCa>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Whether this is an Iceberg REST commit: `POST .../namespaces/{ns}/tables/{table}` or
/// `POST .../transactions/commit`.
pub fn is_commit(method: &str, path: &str) -> bool {
    method.eq_ignore_ascii_case("POST")
        && (path_matches("**/namespaces/*/tables/*", path)
            || path_matches("**/transactions/commit", path))
}

/// Whether `path` matches `pattern` segment by segment (`*` one segment, `**` any).
pub fn path_matches(pattern: &str, path: &str) -> bool {
    fn go(p: &[&str], s: &[&str]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some(&"**") => (0..=s.len()).any(|i| go(&p[1..], &s[i..])),
            Some(seg) => !s.is_empty() && (*seg == "*" || *seg == s[0]) && go(&p[1..], &s[1..]),
        }
    }
    let p: Vec<&str> = pattern.trim_matches('/').split('/').collect();
    let s: Vec<&str> = path.trim_matches('/').split('/').collect();
    go(&p, &s)
}

impl FaultProxy {
    /// A plain-HTTP proxy to `upstream` (`http://host:port`, any path ignored).
    pub fn start(upstream: &str) -> FaultProxy {
        Self::launch(upstream, None)
    }

    /// An HTTPS proxy (TLS terminated with a new test CA, see [`FaultProxy::ca_bundle_path`])
    /// to the plain-HTTP `upstream`.
    pub fn start_tls(upstream: &str) -> FaultProxy {
        Self::launch(upstream, Some(TestCa::generate()))
    }

    fn launch(upstream: &str, tls: Option<TestCa>) -> FaultProxy {
        let url = crate::http::Url::parse(upstream)
            .unwrap_or_else(|e| panic!("fault proxy upstream {upstream}: {e}"));
        assert!(
            !url.https,
            "the fault proxy forwards to plain HTTP upstreams only"
        );
        let upstream_addr = format!("{}:{}", url.host, url.port);
        let listener =
            std::net::TcpListener::bind(("127.0.0.1", crate::free_port())).expect("bind proxy");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            upstream: upstream_addr,
        });
        let acceptor = tls
            .as_ref()
            .map(|ca| tokio_rustls::TlsAcceptor::from(ca.server_config()));
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("fault-proxy-{port}"))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("proxy runtime");
                rt.block_on(accept_loop(listener, thread_shared, acceptor, stop_rx));
            })
            .expect("proxy thread");
        FaultProxy {
            port,
            upstream: upstream.to_string(),
            shared,
            tls,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// The proxy's URL: `http://127.0.0.1:PORT` (or `https://` with TLS). Append the
    /// upstream's paths to it as you would to the upstream's URL.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }
    pub fn port(&self) -> u16 {
        self.port
    }
    /// The upstream URL given at start.
    pub fn upstream(&self) -> &str {
        &self.upstream
    }
    /// The PEM CA bundle a client must trust to reach a TLS proxy.
    pub fn ca_bundle_path(&self) -> Option<PathBuf> {
        self.tls.as_ref().map(TestCa::ca_bundle_path)
    }

    /// The next commit (see [`is_commit`]) is forwarded upstream, then the client's
    /// connection is closed without an answer. Each call arms one more.
    pub fn drop_next_commit_response(&self) {
        self.push_drop(Route::Commit, 1);
    }

    /// The next `n` requests matching `method` (`*` for any) and `pattern` are forwarded
    /// and their answers dropped.
    pub fn drop_next_responses(&self, method: &str, pattern: &str, n: usize) {
        self.push_drop(
            Route::Pattern {
                method: method.to_string(),
                pattern: pattern.to_string(),
            },
            n,
        );
    }

    /// The next commit waits `delay` before it is forwarded, whether or not the client is
    /// still waiting for it (a commit that outlives the client's timeout and lands later).
    /// Other requests pass meanwhile. Each call arms one more.
    pub fn hold_next_commit(&self, delay: Duration) {
        self.shared.lock().holds.push(Armed {
            route: Route::Commit,
            remaining: 1,
            value: delay,
        });
    }

    /// The next commit is forwarded upstream (and applied there), but the client gets
    /// `status` (e.g. 502, 503, 504) instead of the upstream's answer. Each call arms one
    /// more.
    pub fn replace_next_commit_answer(&self, status: u16) {
        self.shared.lock().replacements.push(Armed {
            route: Route::Commit,
            remaining: 1,
            value: status,
        });
    }

    fn push_drop(&self, route: Route, n: usize) {
        self.shared.lock().drops.push(Drop {
            route,
            remaining: n,
        });
    }

    /// Every request waits `delay` before it is handled.
    pub fn set_delay(&self, delay: Duration) {
        self.shared.lock().delay = Some(delay);
    }
    pub fn clear_delay(&self) {
        self.shared.lock().delay = None;
    }

    /// The next `n` requests get `status` (e.g. 429, 500, 503) from the proxy, with
    /// `Retry-After: retry_after` when given, and are not forwarded.
    pub fn fail_next(&self, n: usize, status: u16, retry_after: Option<u64>) {
        self.push_failure(Route::Any, n, status, retry_after);
    }

    /// Like [`FaultProxy::fail_next`], for requests matching `method` (`*` for any) and
    /// the path `pattern` only.
    pub fn fail_next_matching(
        &self,
        method: &str,
        pattern: &str,
        n: usize,
        status: u16,
        retry_after: Option<u64>,
    ) {
        self.push_failure(
            Route::Pattern {
                method: method.to_string(),
                pattern: pattern.to_string(),
            },
            n,
            status,
            retry_after,
        );
    }

    fn push_failure(&self, route: Route, n: usize, status: u16, retry_after: Option<u64>) {
        self.shared.lock().failures.push(Failure {
            route,
            remaining: n,
            status,
            retry_after,
        });
    }

    /// While on, new connections are closed as soon as they are accepted (before TLS),
    /// and open connections are closed before their next request.
    pub fn refuse_connections(&self, on: bool) {
        self.shared.lock().refuse = on;
    }
    /// Connections closed because of [`FaultProxy::refuse_connections`].
    pub fn refused_connections(&self) -> usize {
        self.shared.lock().refused_connections
    }

    /// Every request so far, in arrival order of their outcome.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.lock().log.clone()
    }
    /// Requests matching `method` (`*` for any) and the path `pattern`.
    pub fn count(&self, method: &str, pattern: &str) -> usize {
        let route = Route::Pattern {
            method: method.to_string(),
            pattern: pattern.to_string(),
        };
        self.shared
            .lock()
            .log
            .iter()
            .filter(|r| route.matches(&r.method, &r.path))
            .count()
    }
    /// Commits seen (whatever their outcome).
    pub fn commit_count(&self) -> usize {
        self.shared
            .lock()
            .log
            .iter()
            .filter(|r| is_commit(&r.method, &r.path))
            .count()
    }
    /// Request counts keyed by `"METHOD /path"`.
    pub fn counts_by_route(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for r in self.shared.lock().log.iter() {
            *counts
                .entry(format!("{} {}", r.method, r.path))
                .or_insert(0) += 1;
        }
        counts
    }
    /// Clears every fault and the request log.
    pub fn reset(&self) {
        let mut s = self.shared.lock();
        *s = State::default();
    }
}

impl std::ops::Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else { continue };
                {
                    let mut s = shared.lock();
                    if s.refuse {
                        s.refused_connections += 1;
                        drop(s);
                        drop(tcp); // closed at once
                        continue;
                    }
                }
                let _ = tcp.set_nodelay(true);
                let shared = shared.clone();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    match acceptor {
                        Some(acceptor) => {
                            if let Ok(tls) = acceptor.accept(tcp).await {
                                serve(tls, shared).await;
                            }
                        }
                        None => serve(tcp, shared).await,
                    }
                });
            }
        }
    }
}

struct HttpRequest {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    close: bool,
}

struct HttpResponse {
    status: u16,
    reason: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "expect",
];

fn hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.iter().any(|h| h.eq_ignore_ascii_case(name))
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(stream: S, shared: Arc<Shared>) {
    let mut conn = BufReader::new(stream);
    loop {
        let req = match read_request(&mut conn).await {
            Ok(Some(req)) => req,
            _ => return,
        };
        let (path, query) = match req.target.split_once('?') {
            Some((p, q)) => (p.to_string(), q.to_string()),
            None => (req.target.clone(), String::new()),
        };
        let (delay, failure, drop_response, hold, replacement) = {
            let mut s = shared.lock();
            if s.refuse {
                s.refused_connections += 1;
                return;
            }
            let hold = take_armed(&mut s.holds, &req.method, &path);
            let replacement = take_armed(&mut s.replacements, &req.method, &path);
            let failure = s
                .failures
                .iter_mut()
                .find(|f| f.remaining > 0 && f.route.matches(&req.method, &path))
                .map(|f| {
                    f.remaining -= 1;
                    f.clone()
                });
            let drop_response = failure.is_none()
                && s.drops
                    .iter_mut()
                    .find(|d| d.remaining > 0 && d.route.matches(&req.method, &path))
                    .map(|d| d.remaining -= 1)
                    .is_some();
            s.failures.retain(|f| f.remaining > 0);
            s.drops.retain(|d| d.remaining > 0);
            (s.delay, failure, drop_response, hold, replacement)
        };
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        if let Some(hold) = hold {
            tokio::time::sleep(hold).await;
        }
        let record = |outcome| RequestRecord {
            method: req.method.clone(),
            path: path.clone(),
            query: query.clone(),
            outcome,
        };
        if let Some(f) = failure {
            let mut headers = vec![("Content-Type".to_string(), "application/json".to_string())];
            if let Some(secs) = f.retry_after {
                headers.push(("Retry-After".to_string(), secs.to_string()));
            }
            let kind = match f.status {
                401 => "NotAuthorizedException",
                403 => "ForbiddenException",
                404 => "NoSuchTableException",
                409 => "CommitFailedException",
                429 => "TooManyRequestsException",
                503 => "ServiceUnavailableException",
                _ => "ServerErrorException",
            };
            let body = serde_json::json!({"error": {
                "message": format!("injected by the fault proxy ({})", f.status),
                "type": kind,
                "code": f.status,
            }});
            let resp = HttpResponse {
                status: f.status,
                reason: reason(f.status).to_string(),
                headers,
                body: serde_json::to_vec(&body).unwrap_or_default(),
            };
            shared.lock().log.push(record(Outcome::Injected(f.status)));
            if write_response(conn.get_mut(), &resp, &req.method, req.close)
                .await
                .is_err()
                || req.close
            {
                return;
            }
            continue;
        }
        match forward(&shared.upstream, &req).await {
            Ok(resp) => {
                if let Some(status) = replacement {
                    shared.lock().log.push(record(Outcome::AnswerReplaced {
                        upstream: resp.status,
                        sent: status,
                    }));
                    let replaced = HttpResponse {
                        status,
                        reason: reason(status).to_string(),
                        headers: vec![("Content-Type".into(), "text/plain".into())],
                        body: format!("fault proxy: answer replaced by {status}").into_bytes(),
                    };
                    if write_response(conn.get_mut(), &replaced, &req.method, req.close)
                        .await
                        .is_err()
                        || req.close
                    {
                        return;
                    }
                    continue;
                }
                if drop_response {
                    shared
                        .lock()
                        .log
                        .push(record(Outcome::ResponseDropped(resp.status)));
                    return; // close without answering
                }
                shared
                    .lock()
                    .log
                    .push(record(Outcome::Forwarded(resp.status)));
                if write_response(conn.get_mut(), &resp, &req.method, req.close)
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Err(e) => {
                shared.lock().log.push(record(Outcome::UpstreamFailed));
                let resp = HttpResponse {
                    status: 502,
                    reason: "Bad Gateway".into(),
                    headers: vec![("Content-Type".into(), "text/plain".into())],
                    body: format!("fault proxy: upstream failed: {e}").into_bytes(),
                };
                let _ = write_response(conn.get_mut(), &resp, &req.method, true).await;
                return;
            }
        }
        if req.close {
            return;
        }
    }
}

/// Takes one arming of the first entry of `armed` whose route matches, dropping entries
/// that are used up.
fn take_armed<T: Clone>(armed: &mut Vec<Armed<T>>, method: &str, path: &str) -> Option<T> {
    let found = armed
        .iter_mut()
        .find(|entry| entry.remaining > 0 && entry.route.matches(method, path))
        .map(|entry| {
            entry.remaining -= 1;
            entry.value.clone()
        });
    armed.retain(|entry| entry.remaining > 0);
    found
}

async fn read_line<R: AsyncBufReadExt + Unpin>(r: &mut R) -> io::Result<Option<String>> {
    let mut buf = Vec::new();
    let n = r.read_until(b'\n', &mut buf).await?;
    if n == 0 {
        return Ok(None);
    }
    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        buf.pop();
    }
    Ok(Some(String::from_utf8_lossy(&buf).to_string()))
}

async fn read_headers<R: AsyncBufReadExt + Unpin>(r: &mut R) -> io::Result<Vec<(String, String)>> {
    let mut headers = Vec::new();
    loop {
        let line = read_line(r)
            .await?
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "eof in headers"))?;
        if line.is_empty() {
            return Ok(headers);
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
}

async fn read_body<R: AsyncBufReadExt + Unpin>(
    r: &mut R,
    headers: &[(String, String)],
    until_eof: bool,
) -> io::Result<Vec<u8>> {
    if header(headers, "transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    {
        let mut body = Vec::new();
        loop {
            let line = read_line(r)
                .await?
                .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "eof in chunks"))?;
            let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| io::Error::other("bad chunk size"))?;
            if size == 0 {
                while read_line(r).await?.is_some_and(|l| !l.is_empty()) {}
                return Ok(body);
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..]).await?;
            read_line(r).await?;
        }
    } else if let Some(len) = header(headers, "content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| io::Error::other("bad content-length"))?;
        let mut body = vec![0; len];
        r.read_exact(&mut body).await?;
        Ok(body)
    } else if until_eof {
        let mut body = Vec::new();
        r.read_to_end(&mut body).await?;
        Ok(body)
    } else {
        Ok(Vec::new())
    }
}

async fn read_request<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut BufReader<S>,
) -> io::Result<Option<HttpRequest>> {
    let line = loop {
        match read_line(conn).await? {
            None => return Ok(None),
            Some(l) if l.is_empty() => continue,
            Some(l) => break l,
        }
    };
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target), version) = (parts.next(), parts.next(), parts.next()) else {
        return Err(io::Error::other(format!("bad request line: {line}")));
    };
    let (method, target) = (method.to_string(), target.to_string());
    let http10 = version == Some("HTTP/1.0");
    let headers = read_headers(conn).await?;
    if header(&headers, "expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        conn.get_mut()
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await?;
        conn.get_mut().flush().await?;
    }
    let body = read_body(conn, &headers, false).await?;
    let connection = header(&headers, "connection").map(str::to_ascii_lowercase);
    let close = match connection.as_deref() {
        Some(c) if c.contains("close") => true,
        Some(c) if c.contains("keep-alive") => false,
        _ => http10,
    };
    Ok(Some(HttpRequest {
        method,
        target,
        headers,
        body,
        close,
    }))
}

async fn forward(upstream: &str, req: &HttpRequest) -> io::Result<HttpResponse> {
    let stream = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(upstream))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timeout"))??;
    let mut stream = BufReader::new(stream);
    let mut head = format!("{} {} HTTP/1.1\r\n", req.method, req.target);
    for (k, v) in &req.headers {
        if !hop_by_hop(k) {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    if !req.body.is_empty() || matches!(req.method.as_str(), "POST" | "PUT" | "PATCH") {
        head.push_str(&format!("Content-Length: {}\r\n", req.body.len()));
    }
    head.push_str("Connection: close\r\n\r\n");
    stream.get_mut().write_all(head.as_bytes()).await?;
    stream.get_mut().write_all(&req.body).await?;
    stream.get_mut().flush().await?;
    loop {
        let line = read_line(&mut stream)
            .await?
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "upstream closed"))?;
        let mut parts = line.splitn(3, ' ');
        let _version = parts.next();
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::other(format!("bad upstream status line: {line}")))?;
        let reason = parts.next().unwrap_or("").to_string();
        let headers = read_headers(&mut stream).await?;
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        let no_body = req.method == "HEAD" || status == 204 || status == 304;
        let body = if no_body {
            Vec::new()
        } else {
            read_body(&mut stream, &headers, true).await?
        };
        return Ok(HttpResponse {
            status,
            reason,
            headers,
            body,
        });
    }
}

async fn write_response<W: AsyncWrite + Unpin>(
    w: &mut W,
    resp: &HttpResponse,
    method: &str,
    close: bool,
) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {} {}\r\n", resp.status, resp.reason);
    let head_request = method == "HEAD";
    for (k, v) in &resp.headers {
        // A HEAD answer keeps the upstream's Content-Length (it describes the resource).
        if !hop_by_hop(k) || (head_request && k.eq_ignore_ascii_case("content-length")) {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    if !head_request && resp.status != 204 && resp.status != 304 {
        head.push_str(&format!("Content-Length: {}\r\n", resp.body.len()));
    }
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    w.write_all(head.as_bytes()).await?;
    if !head_request {
        w.write_all(&resp.body).await?;
    }
    w.flush().await?;
    if close {
        let _ = w.shutdown().await;
    }
    Ok(())
}

fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Injected",
    }
}
