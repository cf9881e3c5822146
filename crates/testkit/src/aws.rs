//! AWS Signature Version 4 for test requests, and the query-API (IAM/STS form POST)
//! helper used to drive moto and SeaweedFS's STS.

use crate::http::{self, Request, Response, Url};
use ring::{digest, hmac};
use std::time::{SystemTime, UNIX_EPOCH};

/// An access key pair, with a session token for temporary credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for AwsCredentials {
    // Never print secrets in test output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl AwsCredentials {
    pub fn new(access_key_id: &str, secret_access_key: &str) -> Self {
        AwsCredentials {
            access_key_id: access_key_id.to_string(),
            secret_access_key: secret_access_key.to_string(),
            session_token: None,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
        .as_ref()
        .to_vec()
}

/// `(YYYYMMDD'T'HHMMSS'Z', YYYYMMDD)` for a Unix time.
fn amz_dates(unix: u64) -> (String, String) {
    let days = (unix / 86400) as i64;
    let secs = unix % 86400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    let date = format!("{y:04}{m:02}{d:02}");
    let stamp = format!(
        "{date}T{:02}{:02}{:02}Z",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    );
    (stamp, date)
}

fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = http::form_decode(query)
        .into_iter()
        .map(|(k, v)| (http::form_encode(&k), http::form_encode(&v)))
        .collect();
    pairs.sort();
    pairs
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// Signs `req` with SigV4: adds `Authorization`, `X-Amz-Date`, `X-Amz-Content-Sha256`
/// (for `s3*` signing names) and `X-Amz-Security-Token` (temporary credentials).
/// `service` is the signing name: `s3`, `s3tables`, `sts`, `iam`...
pub fn sign(req: Request, creds: &AwsCredentials, region: &str, service: &str) -> Request {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    sign_at(req, creds, region, service, now)
}

/// [`sign`] at a given Unix time.
pub fn sign_at(
    mut req: Request,
    creds: &AwsCredentials,
    region: &str,
    service: &str,
    unix_time: u64,
) -> Request {
    let url = Url::parse(&req.url).expect("URL");
    let (stamp, date) = amz_dates(unix_time);
    let payload_hash = sha256_hex(&req.body);
    req.headers.retain(|(k, _)| {
        !k.eq_ignore_ascii_case("authorization")
            && !k.eq_ignore_ascii_case("x-amz-date")
            && !k.eq_ignore_ascii_case("x-amz-content-sha256")
            && !k.eq_ignore_ascii_case("x-amz-security-token")
    });
    if !req.has_header("host") {
        req.headers.push(("Host".into(), url.host_header()));
    }
    req.headers.push(("X-Amz-Date".into(), stamp.clone()));
    // S3 (and S3 Tables) want the payload hash as a header; other services do not.
    if service.starts_with("s3") {
        req.headers
            .push(("X-Amz-Content-Sha256".into(), payload_hash.clone()));
    }
    if let Some(token) = &creds.session_token {
        req.headers
            .push(("X-Amz-Security-Token".into(), token.clone()));
    }
    let mut signed: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.to_ascii_lowercase(),
                v.split_whitespace().collect::<Vec<_>>().join(" "),
            )
        })
        .collect();
    signed.sort();
    let canonical_headers: String = signed.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let signed_headers = signed
        .iter()
        .map(|(k, _)| k.as_str())
        .collect::<Vec<_>>()
        .join(";");
    // Every service but S3 signs the path URI-encoded twice: its `%` escapes are escaped again.
    let canonical_path = if service == "s3" {
        url.path().to_string()
    } else {
        url.path().replace('%', "%25")
    };
    let canonical_request = format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        req.method,
        canonical_path,
        canonical_query(url.query()),
        canonical_headers,
        signed_headers,
        payload_hash
    );
    let scope = format!("{date}/{region}/{service}/aws4_request");
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{}",
        sha256_hex(canonical_request.as_bytes())
    );
    let k_date = hmac_sha256(
        format!("AWS4{}", creds.secret_access_key).as_bytes(),
        date.as_bytes(),
    );
    let k_region = hmac_sha256(&k_date, region.as_bytes());
    let k_service = hmac_sha256(&k_region, service.as_bytes());
    let k_signing = hmac_sha256(&k_service, b"aws4_request");
    let signature = hex(&hmac_sha256(&k_signing, string_to_sign.as_bytes()));
    req.headers.push((
        "Authorization".into(),
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            creds.access_key_id
        ),
    ));
    req
}

/// A signed AWS query-API call (IAM, STS): form POST of `Action=...&Version=...&params`
/// to `endpoint`. Returns the raw response (XML body).
pub fn query_api(
    endpoint: &str,
    service: &str,
    region: &str,
    creds: &AwsCredentials,
    action: &str,
    version: &str,
    params: &[(&str, &str)],
) -> Response {
    let mut pairs = vec![("Action", action), ("Version", version)];
    pairs.extend_from_slice(params);
    let req = http::post(&format!("{}/", endpoint.trim_end_matches('/'))).form(&pairs);
    let req = sign(req, creds, region, service);
    req.send()
        .unwrap_or_else(|e| panic!("{service} {action} at {endpoint}: {e}"))
}

/// An STS `AssumeRole` (form POST, SigV4 with signing name `sts`). `external_id`
/// is sent only when given.
pub fn assume_role(
    sts_endpoint: &str,
    region: &str,
    creds: &AwsCredentials,
    role_arn: &str,
    session_name: &str,
    external_id: Option<&str>,
    duration_seconds: Option<u32>,
) -> Response {
    let duration = duration_seconds.map(|d| d.to_string());
    let mut params = vec![("RoleArn", role_arn), ("RoleSessionName", session_name)];
    if let Some(id) = external_id {
        params.push(("ExternalId", id));
    }
    if let Some(d) = &duration {
        params.push(("DurationSeconds", d.as_str()));
    }
    query_api(
        sts_endpoint,
        "sts",
        region,
        creds,
        "AssumeRole",
        "2011-06-15",
        &params,
    )
}

/// The credentials of an `AssumeRole` answer.
pub fn parse_assume_role(resp: &Response) -> AwsCredentials {
    let body = resp.text();
    let get = |tag| {
        xml_value(&body, tag)
            .unwrap_or_else(|| panic!("AssumeRole answer ({}) has no <{tag}>: {body}", resp.status))
    };
    AwsCredentials {
        access_key_id: get("AccessKeyId"),
        secret_access_key: get("SecretAccessKey"),
        session_token: Some(get("SessionToken")),
    }
}

/// The text of the first `<tag>...</tag>` in an XML document (entities decoded).
pub fn xml_value(xml: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&close)?;
    Some(
        xml[start..end]
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}
