//! HTTP plumbing shared by floe's catalog clients: client construction (system roots plus
//! an extra CA bundle), the one send-with-retry loop and its rules, `Retry-After`
//! handling, URL encoding and secret redaction.
//!
//! # When a request is sent again
//!
//! Written once, here, for every HTTP client of floe (the catalog, the token endpoint): a
//! request is sent again only when the server cannot have acted on it.
//! - The connection could not be made: the server never saw the request.
//! - The answer is 429 or 503: the server says it did not process the request and when to
//!   come back (`Retry-After`, else a doubling backoff), within [`HttpSettings`]' bounds.
//!   The Iceberg REST specification lists 500, 502 and 504, not 503, as "commit state
//!   unknown", so this holds for commits too.
//! - A read (GET, HEAD) lost its connection without timing out: a read changes nothing,
//!   and a connection a busy server closed under a pooled client (CI saw one) is gone for
//!   good, so the next attempt takes a fresh one.
//!
//! Anything else (a timeout, a connection lost after a write went out, 500, 502, 504)
//! leaves the outcome unknown. A commit must never be re-sent blindly then: it may have
//! been applied, and a second one would be another writer's change. The caller gets the
//! failure and decides (the sink reloads the table and looks for its own commit). A read
//! that timed out is not re-sent either, so one slow server costs one request timeout,
//! not several.

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::StatusCode;

use crate::error::{ErrorKind, ResultExt, SinkError};

/// Settings of floe's HTTP clients. Every duration is a setting so tests can use short ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSettings {
    /// PEM file of extra CA certificates trusted besides the system's roots (a server
    /// setting), for catalogs behind a private CA.
    pub extra_ca_bundle: Option<PathBuf>,
    /// How long before an OAuth2 token expires floe fetches a new one.
    pub token_refresh_margin: Duration,
    /// How often vended storage credentials that carry no expiry are renewed.
    pub credential_refresh_interval: Duration,
    /// Time allowed to open a connection.
    pub connect_timeout: Duration,
    /// Time allowed for a whole request, response body included.
    pub request_timeout: Duration,
    /// How many times a request answered 429 or 503 (or that could not connect, or a read
    /// that lost its connection) is tried again before floe gives up and reports the
    /// catalog unavailable.
    pub max_retries: u32,
    /// First wait when the server gives no `Retry-After`; doubled on each retry.
    pub initial_backoff: Duration,
    /// Longest wait floe computes itself.
    pub max_backoff: Duration,
    /// Longest `Retry-After` floe waits inside one request; a longer one fails the request
    /// as retryable, leaving the wait to the sink's own backoff.
    pub max_retry_after: Duration,
}

impl Default for HttpSettings {
    fn default() -> HttpSettings {
        HttpSettings {
            extra_ca_bundle: None,
            token_refresh_margin: Duration::from_secs(60),
            credential_refresh_interval: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            max_retries: 4,
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(10),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// Builds a reqwest client: rustls with the system's roots plus `extra_ca_bundle`, the
/// timeouts of `settings`, and no redirects (a catalog or token endpoint that redirects is
/// misconfigured, and following one could send credentials elsewhere).
pub fn build_http_client(settings: &HttpSettings) -> Result<reqwest::Client, SinkError> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(settings.connect_timeout)
        .timeout(settings.request_timeout)
        .user_agent(concat!("floe/", env!("CARGO_PKG_VERSION")));
    if let Some(path) = &settings.extra_ca_bundle {
        let pem = std::fs::read(path).context(ErrorKind::InvalidConfig, || {
            format!("cannot read extra CA bundle {}", path.display())
        })?;
        let certificates = reqwest::Certificate::from_pem_bundle(&pem)
            .context(ErrorKind::InvalidConfig, || {
                format!("invalid extra CA bundle {}", path.display())
            })?;
        if certificates.is_empty() {
            return Err(SinkError::new(
                ErrorKind::InvalidConfig,
                format!(
                    "extra CA bundle {} holds no PEM certificate",
                    path.display()
                ),
            ));
        }
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder.build().context(ErrorKind::InvalidConfig, || {
        "cannot build HTTP client".into()
    })
}

/// floe's HTTP client: a reqwest client built from [`HttpSettings`], and the one
/// send-with-retry loop (see the module's rules) every catalog and token request goes
/// through.
#[derive(Debug, Clone)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    settings: HttpSettings,
}

/// The final answer to a request.
#[derive(Debug)]
pub(crate) struct Answer<T> {
    pub response: reqwest::Response,
    /// How many times the request was sent.
    pub attempts: u32,
    /// The `Retry-After` of a final 429/503 (retries used up, or a wait too long).
    pub retry_after: Option<Duration>,
    /// What preparing the last attempt produced besides the request (a presented token).
    pub prepared: T,
}

impl<T> Answer<T> {
    /// For a final 429/503: `gave up after N attempts (Retry-After Ns)`.
    pub fn gave_up(&self) -> Option<String> {
        if !is_retry_later(self.response.status()) {
            return None;
        }
        let waited = match self.retry_after {
            Some(wait) => format!(" (Retry-After {}s)", wait.as_secs()),
            None => String::new(),
        };
        Some(format!("gave up after {} attempts{waited}", self.attempts))
    }
}

/// Why a request got no answer.
#[derive(Debug)]
pub(crate) enum SendError<E> {
    /// Preparing the request (building, authenticating, signing) failed.
    Prepare(E),
    /// No HTTP answer came back; `text` is the transport error's innermost cause.
    Unanswered { text: String, error: reqwest::Error },
}

impl HttpClient {
    pub(crate) fn new(settings: &HttpSettings) -> Result<HttpClient, SinkError> {
        Ok(HttpClient {
            client: build_http_client(settings)?,
            settings: settings.clone(),
        })
    }

    pub(crate) fn settings(&self) -> &HttpSettings {
        &self.settings
    }

    /// The underlying client, to build requests with.
    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// Sends the request `prepare` builds and sends it again while the module's rules allow
    /// (a refused connection, 429, 503). `prepare` runs for each attempt: tokens may have
    /// been renewed and signatures are bound to the time.
    pub(crate) async fn send<T, E, F, Fut>(&self, mut prepare: F) -> Result<Answer<T>, SendError<E>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(reqwest::Request, T), E>>,
    {
        let mut attempt = 0;
        loop {
            let (request, prepared) = prepare().await.map_err(SendError::Prepare)?;
            let (method, url) = (request.method().clone(), display_url(request.url()));
            tracing::debug!(%method, %url, attempt, "HTTP request");
            let (retry_after, outcome) = match self.client.execute(request).await {
                Err(error) if error.is_connect() => (None, Err(error)),
                // A safe method (RFC 9110: GET, HEAD, ...) only reads.
                Err(error) if method.is_safe() && !error.is_timeout() => (None, Err(error)),
                Err(error) => return Err(unanswered(error)),
                Ok(response) if is_retry_later(response.status()) => {
                    (response_retry_after(&response), Ok(response))
                }
                Ok(response) => {
                    return Ok(Answer {
                        response,
                        attempts: attempt + 1,
                        retry_after: None,
                        prepared,
                    });
                }
            };
            // Not processed (no connection, 429, 503) or a read: safe to send again, if
            // allowed.
            if let RetryDecision::Wait(wait) = retry_decision(&self.settings, attempt, retry_after)
            {
                tracing::debug!(%method, %url, ?wait, "sending again after a wait");
                attempt += 1;
                tokio::time::sleep(wait).await;
                continue;
            }
            return match outcome {
                Ok(response) => Ok(Answer {
                    response,
                    attempts: attempt + 1,
                    retry_after,
                    prepared,
                }),
                Err(error) => Err(unanswered(error)),
            };
        }
    }
}

fn unanswered<E>(error: reqwest::Error) -> SendError<E> {
    let error = error.without_url();
    SendError::Unanswered {
        text: transport_error_text(&error),
        error,
    }
}

/// The `Retry-After` of an answer, as a wait from now.
fn response_retry_after(response: &reqwest::Response) -> Option<Duration> {
    response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| parse_retry_after(value, SystemTime::now()))
}

/// Whether a status asks the client to come back later.
pub(crate) fn is_retry_later(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE
}

/// What to do after a 429/503 (or a failed connection) on attempt `attempt` (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryDecision {
    /// Wait this long, then try again.
    Wait(Duration),
    /// Retries are used up.
    GiveUp,
    /// The server asks for a longer wait than one request may take.
    TooLong(Duration),
}

pub(crate) fn retry_decision(
    settings: &HttpSettings,
    attempt: u32,
    retry_after: Option<Duration>,
) -> RetryDecision {
    if attempt >= settings.max_retries {
        return RetryDecision::GiveUp;
    }
    match retry_after {
        Some(wait) if wait > settings.max_retry_after => RetryDecision::TooLong(wait),
        Some(wait) => RetryDecision::Wait(wait),
        None => {
            let factor = 2u32.saturating_pow(attempt.min(16));
            let wait = settings
                .initial_backoff
                .saturating_mul(factor)
                .min(settings.max_backoff);
            RetryDecision::Wait(wait)
        }
    }
}

/// Parses a `Retry-After` value: delay seconds or an HTTP date (IMF-fixdate, the form
/// RFC 9110 requires senders to use). A date in the past means "now".
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse::<u64>().ok().map(Duration::from_secs);
    }
    let at = parse_http_date(value)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Parses an IMF-fixdate such as `Sun, 06 Nov 1994 08:49:37 GMT`.
fn parse_http_date(value: &str) -> Option<SystemTime> {
    let (_weekday, rest) = value.split_once(", ")?;
    let parts: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let day: u32 = day.parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| m == month)? as u32
        + 1;
    let year: i64 = year.parse().ok()?;
    let mut clock = time.split(':').map(|part| part.parse::<u64>().ok());
    let (hour, minute, second) = (clock.next()??, clock.next()??, clock.next()??);
    if clock.next().is_some() || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let seconds = days.checked_mul(86_400)? + (hour * 3600 + minute * 60 + second) as i64;
    let seconds = u64::try_from(seconds).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(seconds))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = if year >= 0 { year } else { year - 399 } / 400;
    let year_of_era = year - era * 400;
    let month = month as i64;
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day as i64 - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Percent-encodes everything but RFC 3986's unreserved characters, for one path segment
/// or query value.
pub(crate) fn encode_component(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A URL for messages: without user info (which could hold a password) and without query.
pub(crate) fn display_url(url: &reqwest::Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.to_string()
}

/// Same as [`display_url`] for a URL string; unparsable input is kept up to any `@`.
pub(crate) fn display_url_str(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => display_url(&parsed),
        Err(_) => match url.rsplit_once('@') {
            Some((_, host)) => host.to_string(),
            None => url.to_string(),
        },
    }
}

/// Values shorter than this are not replaced: a one-letter "secret" would turn every
/// occurrence of that letter into stars and make the message unreadable, while hiding
/// nothing anyone could not guess.
const MIN_REDACTED_LEN: usize = 6;

/// Replaces every occurrence of each secret in text a remote server sent back, so that an
/// echoed credential never reaches an error message or a log line.
pub(crate) fn redact(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_string();
    for secret in secrets {
        if secret.len() >= MIN_REDACTED_LEN {
            out = out.replace(secret, "********");
        }
    }
    out
}

/// Text of a transport error, without its URL (the caller names the URL itself): the
/// innermost cause (connection refused, an unknown certificate issuer), which says more
/// than reqwest's generic outer layers.
pub(crate) fn transport_error_text(err: &reqwest::Error) -> String {
    let timeout = err.is_timeout();
    let connect = err.is_connect();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text = cause.to_string();
        source = cause.source();
    }
    if timeout {
        format!("timed out: {text}")
    } else if connect {
        format!("cannot connect: {text}")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds() {
        let now = SystemTime::now();
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("-1", now), None);
        assert_eq!(parse_retry_after("1.5", now), None);
        assert_eq!(parse_retry_after("", now), None);
    }

    #[test]
    fn retry_after_http_date() {
        // 1994-11-06T08:49:37Z is 784111777 s after the epoch.
        let date = UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(date));
        let now = date - Duration::from_secs(5);
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::from_secs(5))
        );
        // A date in the past means "retry now".
        let later = date + Duration::from_secs(5);
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", later),
            Some(Duration::ZERO)
        );
        // 2024-02-29T00:00:00Z, a leap day.
        assert_eq!(
            parse_http_date("Thu, 29 Feb 2024 00:00:00 GMT"),
            Some(UNIX_EPOCH + Duration::from_secs(1_709_164_800))
        );
        for bad in [
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:49:37 GMT",
            "soon",
        ] {
            assert_eq!(parse_retry_after(bad, date), None, "{bad}");
        }
    }

    #[test]
    fn retry_decisions() {
        let settings = HttpSettings {
            max_retries: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(300),
            max_retry_after: Duration::from_secs(10),
            ..HttpSettings::default()
        };
        assert_eq!(
            retry_decision(&settings, 0, None),
            RetryDecision::Wait(Duration::from_millis(100))
        );
        assert_eq!(
            retry_decision(&settings, 1, None),
            RetryDecision::Wait(Duration::from_millis(200))
        );
        assert_eq!(
            retry_decision(&settings, 2, None),
            RetryDecision::Wait(Duration::from_millis(300))
        );
        assert_eq!(retry_decision(&settings, 3, None), RetryDecision::GiveUp);
        assert_eq!(
            retry_decision(&settings, 0, Some(Duration::from_secs(2))),
            RetryDecision::Wait(Duration::from_secs(2))
        );
        assert_eq!(
            retry_decision(&settings, 0, Some(Duration::from_secs(11))),
            RetryDecision::TooLong(Duration::from_secs(11))
        );
    }

    #[test]
    fn encoding_and_display() {
        assert_eq!(encode_component("a\u{1f}b c/d"), "a%1Fb%20c%2Fd");
        assert_eq!(encode_component("s3://x-y_z.~"), "s3%3A%2F%2Fx-y_z.~");
        assert_eq!(
            display_url_str("https://user:pw@example.com:8443/v1/config?warehouse=x"),
            "https://example.com:8443/v1/config"
        );
        assert_eq!(
            redact("bad secret hunter2 and hunter2", &["hunter2", ""]),
            "bad secret ******** and ********"
        );
    }
}
