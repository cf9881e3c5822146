//! AWS STS for AWS connections: `AssumeRole` with the connection's external id (behind a
//! cached, refreshing [`AwsCredentialsProvider`]), `GetCallerIdentity`, and the validation
//! of AWS connections.
//!
//! floe speaks STS's query API itself (a SigV4-signed form POST, signing name `sts`, and a
//! small XML answer) rather than through the AWS SDK: it needs two actions, and the signer
//! is already here for S3 Tables.
//!
//! The principal floe assumes roles from is the server's own identity: the standard
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` environment
//! variables ([`principal_from_env`]).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use reqwest::StatusCode;
use tokio::sync::Mutex;

use crate::config::{AwsAuthConfig, AwsConfig, AwsKeys};
use crate::error::{ErrorKind, SinkError};
use crate::http::{
    HttpClient, HttpSettings, SendError, display_url_str, encode_component, redact,
    transport_error_text,
};
use crate::sigv4::{AwsCredentialsProvider, SigV4Signer, StaticAwsCredentials};

/// STS's API version.
const STS_VERSION: &str = "2011-06-15";

/// The shortest session STS hands out.
pub const MIN_SESSION_DURATION: Duration = Duration::from_secs(900);

/// How assumed-role sessions are asked for and kept fresh. Every duration is a setting so
/// tests can use short ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StsSettings {
    /// The session lifetime asked for (`DurationSeconds`); at least 900 s.
    pub session_duration: Duration,
    /// A new session is assumed when the current one expires within this margin.
    pub refresh_margin: Duration,
}

impl Default for StsSettings {
    fn default() -> StsSettings {
        StsSettings {
            session_duration: Duration::from_secs(3600),
            refresh_margin: Duration::from_secs(300),
        }
    }
}

/// The principal's keys from the standard environment variables `AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY` and (optionally) `AWS_SESSION_TOKEN`; `None` unless both keys
/// are set and non-empty.
pub fn principal_from_env() -> Option<AwsKeys> {
    principal_from(|name| std::env::var(name).ok())
}

fn principal_from(get: impl Fn(&str) -> Option<String>) -> Option<AwsKeys> {
    let non_empty = |name: &str| get(name).filter(|value| !value.trim().is_empty());
    Some(AwsKeys {
        access_key_id: non_empty("AWS_ACCESS_KEY_ID")?,
        secret_access_key: non_empty("AWS_SECRET_ACCESS_KEY")?,
        session_token: non_empty("AWS_SESSION_TOKEN"),
    })
}

/// Temporary credentials STS handed out.
#[derive(Clone)]
pub struct AssumedCredentials {
    pub keys: AwsKeys,
    pub expires_at: SystemTime,
}

impl fmt::Debug for AssumedCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AssumedCredentials")
            .field("keys", &self.keys)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// Who a set of keys belongs to (`GetCallerIdentity`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerIdentity {
    pub arn: String,
    pub account: Option<String>,
}

/// An STS error answer (`<ErrorResponse><Error><Code>..</Code><Message>..</Message>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StsFailure {
    /// `None` when no HTTP answer came back.
    pub status: Option<u16>,
    pub code: Option<String>,
    pub message: String,
}

impl StsFailure {
    /// Whether STS refused the request for lack of permission (the trust policy, the
    /// principal's own policy, or its keys).
    pub fn is_access_denied(&self) -> bool {
        self.status == Some(403)
            || matches!(
                self.code.as_deref(),
                Some("AccessDenied" | "AccessDeniedException")
            )
    }

    fn text(&self) -> String {
        match (&self.code, self.status) {
            (Some(code), _) => format!("{code}: {}", self.message),
            (None, Some(status)) => format!("HTTP {status}: {}", self.message),
            (None, None) => self.message.clone(),
        }
    }
}

/// A client of one STS endpoint and region.
#[derive(Clone)]
pub struct StsClient {
    http: HttpClient,
    endpoint: String,
    region: String,
}

impl fmt::Debug for StsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StsClient")
            .field("endpoint", &display_url_str(&self.endpoint))
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl StsClient {
    /// A client of `endpoint` (the AWS connection's `ENDPOINT`, for a local STS), else of
    /// the regional endpoint `https://sts.<region>.amazonaws.com`. The region defaults to
    /// `us-east-1`.
    pub fn new(
        endpoint: Option<&str>,
        region: Option<&str>,
        settings: &HttpSettings,
    ) -> Result<StsClient, SinkError> {
        let region = region
            .filter(|r| !r.is_empty())
            .unwrap_or("us-east-1")
            .to_string();
        let endpoint = match endpoint.filter(|e| !e.is_empty()) {
            Some(endpoint) => endpoint.trim_end_matches('/').to_string(),
            None => format!("https://sts.{region}.amazonaws.com"),
        };
        match reqwest::Url::parse(&endpoint) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => {}
            _ => {
                return Err(SinkError::new(
                    ErrorKind::InvalidConfig,
                    format!(
                        "invalid AWS ENDPOINT {}: not an http or https URL",
                        display_url_str(&endpoint)
                    ),
                ));
            }
        }
        Ok(StsClient {
            http: HttpClient::new(settings)?,
            endpoint,
            region,
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// `AssumeRole` of `role_arn` as `principal`, with `ExternalId` when given.
    pub async fn assume_role(
        &self,
        principal: &AwsKeys,
        role_arn: &str,
        session_name: &str,
        external_id: Option<&str>,
        duration: Duration,
    ) -> Result<AssumedCredentials, StsFailure> {
        let duration = duration.max(MIN_SESSION_DURATION).as_secs().to_string();
        let mut params = vec![
            ("RoleArn", role_arn),
            ("RoleSessionName", session_name),
            ("DurationSeconds", duration.as_str()),
        ];
        if let Some(external_id) = external_id {
            params.push(("ExternalId", external_id));
        }
        let body = self.call(principal, "AssumeRole", &params).await?;
        let field = |tag: &str| {
            xml_value(&body, tag).ok_or_else(|| StsFailure {
                status: Some(200),
                code: None,
                message: format!("the AssumeRole answer has no <{tag}>"),
            })
        };
        let keys = AwsKeys {
            access_key_id: field("AccessKeyId")?,
            secret_access_key: field("SecretAccessKey")?,
            session_token: Some(field("SessionToken")?),
        };
        let expiration = field("Expiration")?;
        let expires_at = parse_iso8601(&expiration).ok_or_else(|| StsFailure {
            status: Some(200),
            code: None,
            message: format!("the AssumeRole answer has an unreadable Expiration {expiration:?}"),
        })?;
        Ok(AssumedCredentials { keys, expires_at })
    }

    /// `GetCallerIdentity` with `keys`.
    pub async fn get_caller_identity(&self, keys: &AwsKeys) -> Result<CallerIdentity, StsFailure> {
        let body = self.call(keys, "GetCallerIdentity", &[]).await?;
        let arn = xml_value(&body, "Arn").ok_or_else(|| StsFailure {
            status: Some(200),
            code: None,
            message: "the GetCallerIdentity answer has no <Arn>".into(),
        })?;
        Ok(CallerIdentity {
            arn,
            account: xml_value(&body, "Account"),
        })
    }

    /// One signed query-API call; returns the body of a successful answer.
    async fn call(
        &self,
        keys: &AwsKeys,
        action: &str,
        params: &[(&str, &str)],
    ) -> Result<String, StsFailure> {
        let mut form = format!("Action={action}&Version={STS_VERSION}");
        for (name, value) in params {
            form.push('&');
            form.push_str(name);
            form.push('=');
            form.push_str(&encode_component(value));
        }
        let signer = SigV4Signer::new(
            "sts",
            self.region.clone(),
            Arc::new(StaticAwsCredentials::new(keys.clone())),
        );
        let url = format!("{}/", self.endpoint);
        let shown = display_url_str(&url);
        let secrets: Vec<&str> = [
            Some(keys.secret_access_key.as_str()),
            keys.session_token.as_deref(),
        ]
        .into_iter()
        .flatten()
        .collect();
        tracing::debug!(action, endpoint = %shown, "STS request");
        let prepare = || async {
            let mut request = self
                .http
                .client()
                .post(&url)
                .header(
                    reqwest::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded; charset=utf-8",
                )
                .body(form.clone())
                .build()
                .map_err(|err| StsFailure {
                    status: None,
                    code: None,
                    message: format!(
                        "cannot build STS request to {shown}: {}",
                        transport_error_text(&err.without_url())
                    ),
                })?;
            signer.sign(keys, &mut request).map_err(|err| StsFailure {
                status: None,
                code: None,
                message: err.message,
            })?;
            Ok((request, ()))
        };
        let answer = match self.http.send(prepare).await {
            Ok(answer) => answer,
            Err(SendError::Prepare(failure)) => return Err(failure),
            Err(SendError::Unanswered { text, .. }) => {
                return Err(StsFailure {
                    status: None,
                    code: None,
                    message: format!("STS unreachable at {shown}: {text}"),
                });
            }
        };
        let status = answer.response.status();
        let body = answer.response.text().await.map_err(|err| StsFailure {
            status: Some(status.as_u16()),
            code: None,
            message: format!(
                "reading STS's answer from {shown} failed: {}",
                transport_error_text(&err.without_url())
            ),
        })?;
        if status == StatusCode::OK {
            return Ok(body);
        }
        let message = xml_value(&body, "Message")
            .or_else(|| {
                let text = body.trim();
                (!text.is_empty() && text.len() <= 300 && !text.starts_with('<'))
                    .then(|| text.to_string())
            })
            .unwrap_or_else(|| status.to_string());
        Err(StsFailure {
            status: Some(status.as_u16()),
            code: xml_value(&body, "Code"),
            message: redact(&message, &secrets),
        })
    }
}

/// A role session assumed with an external id, cached and assumed again when it expires
/// within the refresh margin. Concurrent callers share one `AssumeRole`.
pub struct AssumeRoleProvider {
    client: StsClient,
    principal: Arc<dyn AwsCredentialsProvider>,
    role_arn: String,
    session_name: String,
    external_id: String,
    settings: StsSettings,
    session: Mutex<Option<Session>>,
    assumed: AtomicU64,
}

struct Session {
    credentials: AssumedCredentials,
    /// When to assume the role again.
    refresh_at: SystemTime,
}

impl fmt::Debug for AssumeRoleProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AssumeRoleProvider")
            .field("client", &self.client)
            .field("role_arn", &self.role_arn)
            .field("session_name", &self.session_name)
            .field("external_id", &self.external_id)
            .finish_non_exhaustive()
    }
}

impl AssumeRoleProvider {
    pub fn new(
        client: StsClient,
        principal: Arc<dyn AwsCredentialsProvider>,
        role_arn: String,
        session_name: String,
        external_id: String,
        settings: StsSettings,
    ) -> AssumeRoleProvider {
        AssumeRoleProvider {
            client,
            principal,
            role_arn,
            session_name,
            external_id,
            settings,
            session: Mutex::new(None),
            assumed: AtomicU64::new(0),
        }
    }

    /// How many sessions this provider assumed so far.
    pub fn sessions_assumed(&self) -> u64 {
        self.assumed.load(Ordering::Relaxed)
    }

    async fn assume(&self) -> Result<AssumedCredentials, SinkError> {
        let principal = self.principal.credentials().await?;
        let credentials = self
            .client
            .assume_role(
                &principal,
                &self.role_arn,
                &self.session_name,
                Some(&self.external_id),
                self.settings.session_duration,
            )
            .await
            .map_err(|failure| assume_error(&self.role_arn, &failure))?;
        self.assumed.fetch_add(1, Ordering::Relaxed);
        tracing::info!(role = %self.role_arn, session = %self.session_name, expires_at = ?credentials.expires_at, "assumed AWS role");
        Ok(credentials)
    }
}

/// When a session obtained `now` and expiring at `expires_at` is assumed again: `margin`
/// before it expires, but never sooner than a few seconds after it was obtained (a margin
/// longer than the session would otherwise assume the role on every request).
fn refresh_time(now: SystemTime, expires_at: SystemTime, margin: Duration) -> SystemTime {
    let earliest = now + Duration::from_secs(5);
    let wanted = expires_at.checked_sub(margin).unwrap_or(UNIX_EPOCH);
    wanted.max(earliest).min(expires_at)
}

#[async_trait]
impl AwsCredentialsProvider for AssumeRoleProvider {
    async fn credentials(&self) -> Result<AwsKeys, SinkError> {
        Ok(self.credentials_with_expiry().await?.0)
    }

    async fn credentials_with_expiry(&self) -> Result<(AwsKeys, Option<SystemTime>), SinkError> {
        let mut session = self.session.lock().await;
        let now = SystemTime::now();
        if let Some(current) = session.as_ref()
            && now < current.refresh_at
        {
            return Ok((
                current.credentials.keys.clone(),
                Some(current.credentials.expires_at),
            ));
        }
        let credentials = self.assume().await?;
        let refresh_at = refresh_time(now, credentials.expires_at, self.settings.refresh_margin);
        let answer = (credentials.keys.clone(), Some(credentials.expires_at));
        *session = Some(Session {
            credentials,
            refresh_at,
        });
        Ok(answer)
    }
}

fn assume_error(role_arn: &str, failure: &StsFailure) -> SinkError {
    if failure.status.is_none() || failure.status.is_some_and(|s| s >= 500 || s == 429) {
        return SinkError::new(
            ErrorKind::Unavailable,
            format!("failed to assume role {role_arn}: {}", failure.text()),
        );
    }
    SinkError::new(
        ErrorKind::Authentication,
        format!("failed to assume role {role_arn}: {}", failure.text()),
    )
    .with_hint(
        "Check that the role's trust policy names floe's AWS principal and requires the \
         external ID shown in mz_internal.mz_aws_connections.",
    )
    // A trust policy being fixed is worth retrying for a running sink.
    .with_retryable(true)
}

/// The error when an assume-role connection is used but floe has no principal keys.
pub fn missing_principal_error() -> SinkError {
    SinkError::new(
        ErrorKind::InvalidConfig,
        "cannot assume an AWS role: floe has no AWS credentials of its own",
    )
    .with_hint(
        "Start floe with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) \
         of the principal the role's trust policy names.",
    )
}

/// The credentials provider of an AWS connection: static keys, or a role assumed from
/// `principal` with the connection's external id.
pub fn aws_credentials_provider(
    config: &AwsConfig,
    principal: Option<&AwsKeys>,
    http: &HttpSettings,
    sts: &StsSettings,
) -> Result<Arc<dyn AwsCredentialsProvider>, SinkError> {
    match &config.auth {
        AwsAuthConfig::Keys(keys) => Ok(Arc::new(StaticAwsCredentials::new(keys.clone()))),
        AwsAuthConfig::AssumeRole {
            arn,
            session_name,
            external_id,
        } => {
            let principal = principal.ok_or_else(missing_principal_error)?;
            let client =
                StsClient::new(config.endpoint.as_deref(), config.region.as_deref(), http)?;
            Ok(Arc::new(AssumeRoleProvider::new(
                client,
                Arc::new(StaticAwsCredentials::new(principal.clone())),
                arn.clone(),
                session_name.clone(),
                external_id.clone(),
                sts.clone(),
            )))
        }
    }
}

/// Validates an AWS connection. Static keys: `GetCallerIdentity` succeeds. An assumed role:
/// it can be assumed with the connection's external id, and it can NOT be assumed without
/// one (else any AWS customer of the same principal could assume it).
pub async fn validate_aws_connection(
    config: &AwsConfig,
    principal: Option<&AwsKeys>,
    http: &HttpSettings,
) -> Result<(), SinkError> {
    let client = StsClient::new(config.endpoint.as_deref(), config.region.as_deref(), http)?;
    match &config.auth {
        AwsAuthConfig::Keys(keys) => {
            client.get_caller_identity(keys).await.map_err(|failure| {
                SinkError::new(
                    if failure.status.is_none() {
                        ErrorKind::Unavailable
                    } else {
                        ErrorKind::Authentication
                    },
                    format!("AWS credentials are not valid: {}", failure.text()),
                )
                .with_hint(
                    "Check the connection's ACCESS KEY ID, SECRET ACCESS KEY and SESSION TOKEN.",
                )
            })?;
            Ok(())
        }
        AwsAuthConfig::AssumeRole {
            arn,
            session_name,
            external_id,
        } => {
            let principal = principal.ok_or_else(missing_principal_error)?;
            client
                .assume_role(principal, arn, session_name, Some(external_id), MIN_SESSION_DURATION)
                .await
                .map_err(|failure| {
                    let mut err = assume_error(arn, &failure);
                    if failure.is_access_denied() {
                        err = err.with_detail(format!(
                            "STS refused to let floe's principal assume the role with external ID {external_id}."
                        ));
                    }
                    err
                })?;
            match client
                .assume_role(principal, arn, session_name, None, MIN_SESSION_DURATION)
                .await
            {
                Ok(_) => Err(SinkError::new(
                    ErrorKind::InvalidConfig,
                    "role trust policy does not require an external ID",
                )
                .with_detail(format!(
                    "The role {arn} can be assumed without an external ID, so anyone who can act \
                     as floe's AWS principal could use it."
                ))
                .with_hint(format!(
                    "Add the condition {{\"StringEquals\": {{\"sts:ExternalId\": \"{external_id}\"}}}} \
                     to the statement of the role's trust policy that allows sts:AssumeRole."
                ))
                .with_retryable(false)),
                Err(failure) if failure.is_access_denied() => Ok(()),
                Err(failure) => Err(SinkError::new(
                    ErrorKind::Unavailable,
                    format!(
                        "cannot check that role {arn} requires an external ID: {}",
                        failure.text()
                    ),
                )),
            }
        }
    }
}

/// The text of the first `<tag>...</tag>` in an XML document, entities decoded.
fn xml_value(xml: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&close)?;
    Some(
        xml[start..end]
            .trim()
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&#xA;", "\n")
            .replace("&amp;", "&"),
    )
}

/// Parses an ISO 8601 UTC time as STS writes it: `2025-11-30T02:00:00Z`, with optional
/// fractional seconds, or a `+00:00` offset.
fn parse_iso8601(text: &str) -> Option<SystemTime> {
    let text = text.trim();
    let (date, time) = text.split_once('T')?;
    let mut date_parts = date.split('-');
    let year: i64 = date_parts.next()?.parse().ok()?;
    let month: u32 = date_parts.next()?.parse().ok()?;
    let day: u32 = date_parts.next()?.parse().ok()?;
    if date_parts.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let time = time
        .strip_suffix('Z')
        .or_else(|| time.strip_suffix("+00:00"))?;
    let (clock, fraction) = match time.split_once('.') {
        Some((clock, fraction)) => (clock, Some(fraction)),
        None => (time, None),
    };
    let mut clock_parts = clock.split(':').map(|p| p.parse::<u64>().ok());
    let (hour, minute, second) = (
        clock_parts.next()??,
        clock_parts.next()??,
        clock_parts.next()??,
    );
    if clock_parts.next().is_some() || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let nanos = match fraction {
        Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            let digits = &digits[..digits.len().min(9)];
            digits.parse::<u32>().ok()? * 10u32.pow(9 - digits.len() as u32)
        }
        Some(_) => return None,
        None => 0,
    };
    let days = crate::http::days_from_civil(year, month, day);
    let seconds = u64::try_from(days * 86_400).ok()? + hour * 3600 + minute * 60 + second;
    Some(UNIX_EPOCH + Duration::new(seconds, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_times() {
        assert_eq!(
            parse_iso8601("2024-02-29T00:00:00Z"),
            Some(UNIX_EPOCH + Duration::from_secs(1_709_164_800))
        );
        assert_eq!(
            parse_iso8601("2024-02-29T00:00:01.5Z"),
            Some(UNIX_EPOCH + Duration::new(1_709_164_801, 500_000_000))
        );
        assert_eq!(
            parse_iso8601("2024-02-29T00:00:01+00:00"),
            Some(UNIX_EPOCH + Duration::from_secs(1_709_164_801))
        );
        for bad in [
            "2024-02-29",
            "2024-13-01T00:00:00Z",
            "2024-02-29T25:00:00Z",
            "2024-02-29T00:00:00+02:00",
            "soon",
        ] {
            assert_eq!(parse_iso8601(bad), None, "{bad}");
        }
    }

    #[test]
    fn xml_fields() {
        let body = "<AssumeRoleResponse><AssumeRoleResult><Credentials>\
            <AccessKeyId>ASIA1</AccessKeyId><SecretAccessKey>s&amp;k</SecretAccessKey>\
            <SessionToken>tok</SessionToken><Expiration>2030-01-01T00:00:00Z</Expiration>\
            </Credentials></AssumeRoleResult></AssumeRoleResponse>";
        assert_eq!(xml_value(body, "AccessKeyId").as_deref(), Some("ASIA1"));
        assert_eq!(xml_value(body, "SecretAccessKey").as_deref(), Some("s&k"));
        assert_eq!(xml_value(body, "Missing"), None);
    }

    #[test]
    fn principal_keys_from_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let keys = principal_from(env(&[
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
        ]))
        .unwrap();
        assert_eq!(keys.access_key_id, "AKID");
        assert_eq!(keys.session_token, None);
        let keys = principal_from(env(&[
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
            ("AWS_SESSION_TOKEN", "token"),
        ]))
        .unwrap();
        assert_eq!(keys.session_token.as_deref(), Some("token"));
        assert!(principal_from(env(&[("AWS_ACCESS_KEY_ID", "AKID")])).is_none());
        assert!(
            principal_from(env(&[
                ("AWS_ACCESS_KEY_ID", ""),
                ("AWS_SECRET_ACCESS_KEY", "secret")
            ]))
            .is_none()
        );
    }

    #[test]
    fn refresh_times() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let hour = now + Duration::from_secs(3600);
        assert_eq!(
            refresh_time(now, hour, Duration::from_secs(300)),
            hour - Duration::from_secs(300)
        );
        // A margin longer than the session: soon, not on every request.
        assert_eq!(
            refresh_time(
                now,
                now + Duration::from_secs(900),
                Duration::from_secs(3600)
            ),
            now + Duration::from_secs(5)
        );
        // Never after expiry.
        assert_eq!(
            refresh_time(now, now + Duration::from_secs(2), Duration::ZERO),
            now + Duration::from_secs(2)
        );
    }

    #[test]
    fn endpoints_and_failures() {
        let settings = HttpSettings::default();
        let client = StsClient::new(None, Some("eu-west-1"), &settings).unwrap();
        assert_eq!(client.endpoint(), "https://sts.eu-west-1.amazonaws.com");
        let client = StsClient::new(Some("http://127.0.0.1:9/"), None, &settings).unwrap();
        assert_eq!(client.endpoint(), "http://127.0.0.1:9");
        assert!(StsClient::new(Some("ftp://x"), None, &settings).is_err());
        let denied = StsFailure {
            status: Some(403),
            code: Some("AccessDenied".into()),
            message: "no".into(),
        };
        assert!(denied.is_access_denied());
        let err = assume_error("arn:aws:iam::1:role/r", &denied);
        assert_eq!(err.kind, ErrorKind::Authentication);
        assert_eq!(
            err.message,
            "failed to assume role arn:aws:iam::1:role/r: AccessDenied: no"
        );
        let down = StsFailure {
            status: None,
            code: None,
            message: "STS unreachable".into(),
        };
        assert!(!down.is_access_denied());
        assert_eq!(assume_error("r", &down).kind, ErrorKind::Unavailable);
    }

    /// An unreachable STS fails the validation with the endpoint named, not a hang.
    #[tokio::test]
    async fn unreachable_sts() {
        let settings = HttpSettings {
            max_retries: 0,
            ..HttpSettings::default()
        };
        let config = AwsConfig {
            endpoint: Some("http://127.0.0.1:9".into()),
            region: Some("us-east-1".into()),
            auth: AwsAuthConfig::Keys(AwsKeys {
                access_key_id: "AKID".into(),
                secret_access_key: "very-secret-value".into(),
                session_token: None,
            }),
        };
        let err = validate_aws_connection(&config, None, &settings)
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unavailable, "{err:?}");
        assert!(err.message.contains("127.0.0.1:9"), "{}", err.message);
        assert!(!err.message.contains("very-secret-value"));
        let role = AwsConfig {
            auth: AwsAuthConfig::AssumeRole {
                arn: "arn:aws:iam::1:role/r".into(),
                session_name: "s".into(),
                external_id: "mz_x_u1".into(),
            },
            ..config
        };
        let err = validate_aws_connection(&role, None, &settings)
            .await
            .unwrap_err();
        assert_eq!(
            err.message,
            "cannot assume an AWS role: floe has no AWS credentials of its own"
        );
    }
}
