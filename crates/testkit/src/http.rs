//! A small blocking HTTP/1.1 client for tests: one connection per request, HTTP and
//! HTTPS (trusting only a given CA bundle), no redirects, no retries.
//!
//! ```no_run
//! use floe_testkit::http;
//! let resp = http::get("http://127.0.0.1:8181/v1/config").bearer("tok").send().unwrap();
//! assert_eq!(resp.status, 200);
//! let doc = resp.json();
//! ```

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A parsed `http://` or `https://` URL.
#[derive(Clone, Debug)]
pub struct Url {
    pub https: bool,
    pub host: String,
    pub port: u16,
    /// Path and query, e.g. `/v1/config?warehouse=x`.
    pub target: String,
}

impl Url {
    pub fn parse(url: &str) -> io::Result<Url> {
        let bad = || io::Error::new(io::ErrorKind::InvalidInput, format!("bad URL: {url}"));
        let (https, rest) = if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else {
            return Err(bad());
        };
        let (authority, target) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        let (host, port) = if let Some(h) = authority.strip_prefix('[') {
            let end = h.find(']').ok_or_else(bad)?;
            let port = h[end + 1..].strip_prefix(':');
            (h[..end].to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (authority.to_string(), None),
            }
        };
        let port = match port {
            Some(p) => p.parse().map_err(|_| bad())?,
            None if https => 443,
            None => 80,
        };
        Ok(Url {
            https,
            host,
            port,
            target,
        })
    }

    /// The `Host` header value.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if (self.https && self.port == 443) || (!self.https && self.port == 80) {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// The path without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("/")
    }

    /// The query string without `?` (empty when none).
    pub fn query(&self) -> &str {
        self.target.split_once('?').map(|(_, q)| q).unwrap_or("")
    }
}

/// A request being built. Create with [`get`], [`post`], [`request`], ...
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub ca_bundle: Option<PathBuf>,
    pub timeout: Duration,
}

pub fn request(method: &str, url: &str) -> Request {
    Request {
        method: method.to_string(),
        url: url.to_string(),
        headers: Vec::new(),
        body: Vec::new(),
        ca_bundle: None,
        timeout: Duration::from_secs(30),
    }
}
pub fn get(url: &str) -> Request {
    request("GET", url)
}
pub fn post(url: &str) -> Request {
    request("POST", url)
}
pub fn put(url: &str) -> Request {
    request("PUT", url)
}
pub fn delete(url: &str) -> Request {
    request("DELETE", url)
}
pub fn head(url: &str) -> Request {
    request("HEAD", url)
}

impl Request {
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
    pub fn bearer(self, token: &str) -> Self {
        self.header("Authorization", &format!("Bearer {token}"))
    }
    pub fn basic_auth(self, user: &str, password: &str) -> Self {
        use base64::Engine;
        let raw = format!("{}:{}", form_encode(user), form_encode(password));
        let enc = base64::engine::general_purpose::STANDARD.encode(raw);
        self.header("Authorization", &format!("Basic {enc}"))
    }
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }
    pub fn json(self, value: &serde_json::Value) -> Self {
        self.header("Content-Type", "application/json")
            .body(serde_json::to_vec(value).expect("json"))
    }
    /// A form-encoded body (`application/x-www-form-urlencoded`).
    pub fn form(self, pairs: &[(&str, &str)]) -> Self {
        self.header("Content-Type", "application/x-www-form-urlencoded")
            .body(form_body(pairs))
    }
    /// Trust (only) the CA certificates in this PEM file for `https://` URLs.
    pub fn ca_bundle(mut self, path: &Path) -> Self {
        self.ca_bundle = Some(path.to_path_buf());
        self
    }
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    pub fn has_header(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(name))
    }

    /// Sends the request and reads the whole response.
    pub fn send(&self) -> io::Result<Response> {
        let url = Url::parse(&self.url)?;
        let tcp = TcpStream::connect((url.host.as_str(), url.port))?;
        tcp.set_read_timeout(Some(self.timeout))?;
        tcp.set_write_timeout(Some(self.timeout))?;
        tcp.set_nodelay(true)?;
        let mut head = format!("{} {} HTTP/1.1\r\n", self.method, url.target);
        if !self.has_header("host") {
            head.push_str(&format!("Host: {}\r\n", url.host_header()));
        }
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if !self.body.is_empty() || matches!(self.method.as_str(), "POST" | "PUT" | "PATCH") {
            head.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        }
        head.push_str("Connection: close\r\n\r\n");
        let is_head = self.method == "HEAD";
        if url.https {
            let config = client_tls_config(self.ca_bundle.as_deref())?;
            let name = rustls::pki_types::ServerName::try_from(url.host.clone())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            let conn = rustls::ClientConnection::new(config, name).map_err(io::Error::other)?;
            let mut stream = rustls::StreamOwned::new(conn, tcp);
            stream.write_all(head.as_bytes())?;
            stream.write_all(&self.body)?;
            stream.flush()?;
            read_response(&mut BufReader::new(stream), is_head)
        } else {
            let mut stream = tcp;
            stream.write_all(head.as_bytes())?;
            stream.write_all(&self.body)?;
            read_response(&mut BufReader::new(stream), is_head)
        }
    }
}

fn client_tls_config(ca: Option<&Path>) -> io::Result<Arc<rustls::ClientConfig>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = ca {
        for cert in CertificateDer::pem_file_iter(ca).map_err(io::Error::other)? {
            roots
                .add(cert.map_err(io::Error::other)?)
                .map_err(io::Error::other)?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A complete response.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }
    /// The body as JSON; panics (showing the body) when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "response {} is not JSON ({e}): {}",
                self.status,
                self.text()
            )
        })
    }
}

fn read_response<R: Read>(reader: &mut BufReader<R>, is_head: bool) -> io::Result<Response> {
    loop {
        let status_line = read_line(reader)?;
        if status_line.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before a response",
            ));
        }
        let mut parts = status_line.splitn(3, ' ');
        let _version = parts.next();
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::other(format!("bad status line: {status_line}")))?;
        let mut headers = Vec::new();
        loop {
            let line = read_line(reader)?;
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        if (100..200).contains(&status) {
            continue; // interim response
        }
        let find = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let body = if is_head || status == 204 || status == 304 {
            Vec::new()
        } else if find("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
        {
            read_chunked(reader)?
        } else if let Some(len) = find("content-length") {
            let len: usize = len
                .parse()
                .map_err(|_| io::Error::other("bad content-length"))?;
            let mut body = vec![0; len];
            reader.read_exact(&mut body)?;
            body
        } else {
            read_to_close(reader)?
        };
        return Ok(Response {
            status,
            headers,
            body,
        });
    }
}

/// Reads one CRLF-terminated line (without the terminator); "" at end of stream.
fn read_line<R: BufRead>(reader: &mut R) -> io::Result<String> {
    let mut buf = Vec::new();
    reader.read_until(b'\n', &mut buf)?;
    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        buf.pop();
    }
    Ok(String::from_utf8_lossy(&buf).to_string())
}

fn read_chunked<R: BufRead>(reader: &mut R) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line = read_line(reader)?;
        let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| io::Error::other(format!("bad chunk size line: {line:?}")))?;
        if size == 0 {
            // trailers
            while !read_line(reader)?.is_empty() {}
            return Ok(body);
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        read_line(reader)?;
    }
}

fn read_to_close<R: Read>(reader: &mut R) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    match reader.read_to_end(&mut body) {
        Ok(_) => Ok(body),
        // A TLS peer that closes without close_notify: the body is what we got.
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(body),
        Err(e) => Err(e),
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
pub fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `k1=v1&k2=v2`, percent-encoded.
pub fn form_body(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Decodes `k=v&...` (percent and `+` decoding).
pub fn form_decode(s: &str) -> Vec<(String, String)> {
    fn dec(s: &str) -> String {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => match u8::from_str_radix(&s[i + 1..i + 3], 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                },
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).to_string()
    }
    s.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (dec(k), dec(v)),
            None => (dec(p), String::new()),
        })
        .collect()
}
