//! Strict stand-ins for the two endpoints a workload inside AWS reads its role's credentials
//! from, which exist nowhere else: the ECS container credentials endpoint
//! (`AWS_CONTAINER_CREDENTIALS_FULL_URI`, with the `Authorization` token check of
//! `AWS_CONTAINER_AUTHORIZATION_TOKEN`) and EC2's instance metadata service in its IMDSv2
//! form (a `PUT /latest/api/token` with a TTL header first, then GETs carrying the token).
//! Anything the real services refuse is refused with their status: a wrong method, a
//! missing or wrong token, a token request without a TTL or with one out of range, a
//! forwarded request, an unknown path.
//!
//! Both serve the credentials they are given (a moto role session: the SDK requires a
//! session token in these documents, and moto, like AWS, refuses a session token with an
//! IAM user's long-term key) and record every request they answered.
//!
//! ```no_run
//! let moto = floe_testkit::moto_shared();
//! let session = moto.create_workload_session("ecs-task");
//! let ecs = floe_testkit::ContainerCredentials::start(&session, Some("token-1"));
//! // floe with AWS_CONTAINER_CREDENTIALS_FULL_URI = ecs.full_uri(),
//! //           AWS_CONTAINER_AUTHORIZATION_TOKEN = "token-1"
//! ```

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::moto::WorkloadSession;

/// The longest token lifetime IMDS grants (6 hours).
const IMDS_MAX_TTL_SECONDS: u64 = 21_600;

/// One request a stand-in answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointRequest {
    pub method: String,
    pub path: String,
    pub status: u16,
}

/// A parsed HTTP/1.1 request: method, path, headers with lowercase names.
struct Request {
    method: String,
    path: String,
    headers: HashMap<String, String>,
}

/// An answer: status, extra headers, body.
type Answer = (u16, Vec<(&'static str, String)>, String);

/// A loopback HTTP server answering one request per connection with `handler`.
struct Server {
    port: u16,
    requests: Arc<Mutex<Vec<EndpointRequest>>>,
    stopping: Arc<AtomicBool>,
}

impl Server {
    fn start(handler: impl Fn(&Request) -> Answer + Send + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().expect("local address").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stopping = Arc::new(AtomicBool::new(false));
        let (recorded, stop) = (requests.clone(), stopping.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = stream
                    && let Some(record) = serve(stream, &handler)
                {
                    recorded.lock().expect("requests lock").push(record);
                }
            }
        });
        Server {
            port,
            requests,
            stopping,
        }
    }

    fn requests(&self) -> Vec<EndpointRequest> {
        self.requests.lock().expect("requests lock").clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Reads one request from `stream`, answers it and closes the connection.
fn serve(mut stream: TcpStream, handler: &impl Fn(&Request) -> Answer) -> Option<EndpointRequest> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let request = read_request(&mut stream).ok()?;
    let (status, headers, body) = handler(&request);
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reason(status),
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(body.as_bytes()).ok()?;
    Some(EndpointRequest {
        method: request.method,
        path: request.path,
        status,
    })
}

fn read_request(stream: &mut TcpStream) -> io::Result<Request> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(io::Error::other(format!("bad request line {line:?}")));
    };
    let (method, path) = (method.to_string(), path.to_string());
    let mut headers = HashMap::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let Some((name, value)) = line.trim_end().split_once(':') else {
            break;
        };
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    reader.take(length as u64).read_to_end(&mut Vec::new())?;
    Ok(Request {
        method,
        path,
        headers,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Status",
    }
}

fn plain(status: u16, body: &str) -> Answer {
    (
        status,
        vec![("Content-Type", "text/plain".into())],
        body.into(),
    )
}

/// The ECS container credentials endpoint: `GET <full uri>` answers the task role's
/// credentials document; with a token, only requests whose `Authorization` header is
/// exactly that token.
pub struct ContainerCredentials {
    server: Server,
    path: String,
}

impl ContainerCredentials {
    pub fn start(session: &WorkloadSession, authorization: Option<&str>) -> ContainerCredentials {
        let path = format!("/v2/credentials/{}", crate::random_hex(8));
        let document = json!({
            "RoleArn": session.role_arn,
            "AccessKeyId": session.credentials.access_key_id,
            "SecretAccessKey": session.credentials.secret_access_key,
            "Token": session.credentials.session_token,
            "Expiration": session.expiration,
        })
        .to_string();
        let (expected_path, token) = (path.clone(), authorization.map(str::to_string));
        let server = Server::start(move |request| {
            if request.method != "GET" {
                return plain(405, "method not allowed");
            }
            if request.path != expected_path {
                return plain(404, "not found");
            }
            if let Some(token) = &token
                && request.headers.get("authorization") != Some(token)
            {
                return plain(401, "invalid or missing authorization token");
            }
            (
                200,
                vec![("Content-Type", "application/json".into())],
                document.clone(),
            )
        });
        ContainerCredentials { server, path }
    }

    /// The value of `AWS_CONTAINER_CREDENTIALS_FULL_URI`.
    pub fn full_uri(&self) -> String {
        format!("http://127.0.0.1:{}{}", self.server.port, self.path)
    }

    pub fn requests(&self) -> Vec<EndpointRequest> {
        self.server.requests()
    }
}

/// EC2's instance metadata service with IMDSv2 required: `PUT /latest/api/token` with
/// `X-aws-ec2-metadata-token-ttl-seconds` (1 to 21600) hands out a token; the GETs of
/// the instance profile's role name and credentials answer only with a live token in
/// `X-aws-ec2-metadata-token` (401 otherwise, as an instance with `HttpTokens=required`).
pub struct InstanceMetadata {
    server: Server,
}

impl InstanceMetadata {
    pub fn start(session: &WorkloadSession) -> InstanceMetadata {
        let role_name = session.role_name.clone();
        let document = json!({
            "Code": "Success",
            "Type": "AWS-HMAC",
            "AccessKeyId": session.credentials.access_key_id,
            "SecretAccessKey": session.credentials.secret_access_key,
            "Token": session.credentials.session_token,
            "Expiration": session.expiration,
        })
        .to_string();
        let tokens: Mutex<HashMap<String, Instant>> = Mutex::new(HashMap::new());
        let server = Server::start(move |request| match request.method.as_str() {
            "PUT" => issue_token(request, &tokens),
            "GET" => {
                let live = request
                    .headers
                    .get("x-aws-ec2-metadata-token")
                    .and_then(|token| tokens.lock().expect("tokens").get(token).copied())
                    .is_some_and(|expires| Instant::now() < expires);
                if !live {
                    return plain(401, "");
                }
                metadata(&request.path, &role_name, &document)
            }
            _ => plain(405, ""),
        });
        InstanceMetadata { server }
    }

    /// The value of `AWS_EC2_METADATA_SERVICE_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.server.port)
    }

    pub fn requests(&self) -> Vec<EndpointRequest> {
        self.server.requests()
    }
}

/// `PUT /latest/api/token`: a new token living the TTL asked for.
fn issue_token(request: &Request, tokens: &Mutex<HashMap<String, Instant>>) -> Answer {
    if request.path != "/latest/api/token" {
        return plain(405, "");
    }
    // IMDS refuses token requests that went through a proxy.
    if request.headers.contains_key("x-forwarded-for") {
        return plain(403, "");
    }
    let ttl = request
        .headers
        .get("x-aws-ec2-metadata-token-ttl-seconds")
        .and_then(|ttl| ttl.parse::<u64>().ok())
        .filter(|ttl| (1..=IMDS_MAX_TTL_SECONDS).contains(ttl));
    let Some(ttl) = ttl else {
        return plain(400, "");
    };
    let token = crate::random_hex(24);
    let expires = Instant::now() + Duration::from_secs(ttl);
    tokens
        .lock()
        .expect("tokens")
        .insert(token.clone(), expires);
    (
        200,
        vec![("X-aws-ec2-metadata-token-ttl-seconds", ttl.to_string())],
        token,
    )
}

/// The metadata paths of an instance profile's credentials.
fn metadata(path: &str, role_name: &str, document: &str) -> Answer {
    const CREDENTIALS: &str = "/latest/meta-data/iam/security-credentials/";
    match path.strip_prefix(CREDENTIALS) {
        Some("") => plain(200, role_name),
        Some(name) if name == role_name => plain(200, document),
        _ => plain(404, ""),
    }
}
