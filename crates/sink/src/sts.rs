//! AWS identity for AWS connections, through the AWS SDK: floe's own principal from the
//! standard credential chain, `AssumeRole` with the connection's external id (behind a
//! cached, refreshing [`AwsCredentialsProvider`]), `GetCallerIdentity`, and the validation
//! of AWS connections.
//!
//! floe's principal (the identity it assumes roles from) comes from the SDK's standard
//! chain ([`PrincipalSource::Chain`]): the `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` /
//! `AWS_SESSION_TOKEN` environment variables, the shared profile files (`AWS_PROFILE`),
//! web identity (EKS: `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN`), container
//! credentials (ECS) and instance metadata (EC2), in that order. The same environment gives
//! the region, STS endpoint overrides (`AWS_ENDPOINT_URL_STS`, `AWS_ENDPOINT_URL`) and FIPS
//! or dual-stack endpoints (`AWS_USE_FIPS_ENDPOINT`, `AWS_USE_DUALSTACK_ENDPOINT`); a
//! connection's `ENDPOINT` and `REGION` take precedence. Requests go through the SDK's
//! standard retries, bounded by floe's [`HttpSettings`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_sts::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
use aws_sdk_sts::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_http_client::tls::{self, TlsContext, TrustStore};
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use tokio::sync::{Mutex, OnceCell};

use crate::config::{AwsAuthConfig, AwsConfig, AwsKeys};
use crate::error::{ErrorKind, ResultExt, SinkError};
use crate::http::{HttpSettings, display_url_str, redact};
use crate::sigv4::{AwsCredentialsProvider, StaticAwsCredentials};

/// The shortest session STS hands out.
pub const MIN_SESSION_DURATION: Duration = Duration::from_secs(900);

/// The region when neither the connection nor the environment names one.
const DEFAULT_REGION: &str = "us-east-1";

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

/// Where floe's own AWS identity comes from.
#[derive(Clone)]
pub enum PrincipalSource {
    /// The SDK's standard credential chain (see the module documentation).
    Chain,
    /// Fixed keys.
    Keys(AwsKeys),
    /// No identity: roles cannot be assumed.
    None,
}

impl fmt::Debug for PrincipalSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrincipalSource::Chain => f.write_str("Chain"),
            PrincipalSource::Keys(keys) => f.debug_tuple("Keys").field(keys).finish(),
            PrincipalSource::None => f.write_str("None"),
        }
    }
}

/// floe's AWS environment: its principal and the SDK configuration the server's environment
/// gives (region, endpoint overrides, FIPS and dual-stack, the HTTP client, retries),
/// loaded once, on first use.
pub struct AwsEnvironment {
    source: PrincipalSource,
    http: HttpSettings,
    config: OnceCell<SdkConfig>,
}

impl fmt::Debug for AwsEnvironment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsEnvironment")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl AwsEnvironment {
    pub fn new(source: PrincipalSource, http: &HttpSettings) -> AwsEnvironment {
        AwsEnvironment {
            source,
            http: http.clone(),
            config: OnceCell::new(),
        }
    }

    /// Whether floe may have a principal to assume roles from (the chain may still find
    /// nothing when it is asked).
    pub fn has_principal(&self) -> bool {
        !matches!(self.source, PrincipalSource::None)
    }

    /// The SDK configuration, loaded on first use.
    async fn config(&self) -> Result<&SdkConfig, SinkError> {
        self.config.get_or_try_init(|| self.load()).await
    }

    async fn load(&self) -> Result<SdkConfig, SinkError> {
        let settings = &self.http;
        let retries = RetryConfig::standard()
            .with_max_attempts(settings.max_retries.saturating_add(1))
            .with_initial_backoff(settings.initial_backoff)
            .with_max_backoff(settings.max_backoff);
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(settings.connect_timeout)
            .operation_attempt_timeout(settings.request_timeout)
            .build();
        let loader = aws_config::defaults(BehaviorVersion::latest())
            .http_client(sdk_http_client(settings)?)
            .retry_config(retries)
            .timeout_config(timeouts);
        let loader = match &self.source {
            PrincipalSource::Chain => loader,
            PrincipalSource::Keys(keys) => {
                loader.credentials_provider(aws_credential_types::Credentials::from(keys))
            }
            PrincipalSource::None => loader.no_credentials(),
        };
        Ok(loader.load().await)
    }

    /// An STS client signing with floe's principal, at the connection's `endpoint` and
    /// `region` (else the environment's).
    pub async fn sts(
        &self,
        endpoint: Option<&str>,
        region: Option<&str>,
    ) -> Result<StsClient, SinkError> {
        StsClient::new(self.config().await?, endpoint, region, None)
    }

    /// An STS client signing with `keys` (a connection's own), at the connection's
    /// `endpoint` and `region` (else the environment's).
    pub async fn sts_with_keys(
        &self,
        endpoint: Option<&str>,
        region: Option<&str>,
        keys: &AwsKeys,
    ) -> Result<StsClient, SinkError> {
        StsClient::new(self.config().await?, endpoint, region, Some(keys))
    }

    /// Who floe's principal is (`GetCallerIdentity` at the environment's STS endpoint).
    pub async fn caller_identity(&self) -> Result<CallerIdentity, SinkError> {
        let client = self.sts(None, None).await?;
        client.get_caller_identity().await.map_err(|failure| {
            failure
                .principal_error()
                .unwrap_or_else(|| unavailable("STS GetCallerIdentity failed", &failure))
        })
    }
}

/// The SDK's HTTPS client: rustls with the ring provider, the system's roots plus the
/// extra CA bundle of `settings`.
fn sdk_http_client(settings: &HttpSettings) -> Result<SharedHttpClient, SinkError> {
    let mut trust = TrustStore::default();
    if let Some(path) = &settings.extra_ca_bundle {
        let pem = std::fs::read(path).context(ErrorKind::InvalidConfig, || {
            format!("cannot read extra CA bundle {}", path.display())
        })?;
        trust = trust.with_pem_certificate(pem);
    }
    let context = TlsContext::builder()
        .with_trust_store(trust)
        .build()
        .context(ErrorKind::InvalidConfig, || {
            "cannot build the TLS settings of the AWS client".into()
        })?;
    Ok(aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::Ring,
        ))
        .tls_context(context)
        .build_https())
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

/// Who a set of credentials belongs to (`GetCallerIdentity`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerIdentity {
    pub arn: String,
    pub account: Option<String>,
}

/// Why floe's own credentials could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrincipalProblem {
    /// No source of the chain had credentials.
    Missing,
    /// A source was found but failed (a refused web identity token, an unreachable
    /// container endpoint).
    Failed,
}

/// A failed STS call: STS's error answer, or why none came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StsFailure {
    /// `None` when no HTTP answer came back.
    pub status: Option<u16>,
    pub code: Option<String>,
    pub message: String,
    /// Set when the call failed because floe's own credentials could not be loaded.
    pub principal: Option<PrincipalProblem>,
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

    /// The error when floe's own credentials were the problem.
    fn principal_error(&self) -> Option<SinkError> {
        match self.principal? {
            PrincipalProblem::Missing => Some(missing_principal_error()),
            PrincipalProblem::Failed => Some(
                SinkError::new(
                    ErrorKind::Unavailable,
                    format!(
                        "floe's AWS credentials could not be loaded: {}",
                        self.message
                    ),
                )
                .with_hint(
                    "Check the source of floe's AWS identity: the web identity token file and \
                     AWS_ROLE_ARN, the container credentials endpoint, or the instance profile.",
                ),
            ),
        }
    }
}

/// An STS client of one endpoint and region, signing with one identity.
#[derive(Clone)]
pub struct StsClient {
    client: aws_sdk_sts::Client,
    /// The endpoint requests go to, for messages.
    endpoint: String,
    /// Secrets to scrub from STS's answers (the keys of a connection being validated).
    secrets: Vec<String>,
}

impl fmt::Debug for StsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StsClient")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl StsClient {
    /// A client from the environment's `base` configuration: `endpoint` (a connection's
    /// `ENDPOINT`, for a local STS) overrides the environment's, `region` too; `keys`
    /// replace floe's principal.
    pub fn new(
        base: &SdkConfig,
        endpoint: Option<&str>,
        region: Option<&str>,
        keys: Option<&AwsKeys>,
    ) -> Result<StsClient, SinkError> {
        let mut builder = aws_sdk_sts::config::Builder::from(base);
        let region = region
            .filter(|r| !r.is_empty())
            .map(str::to_string)
            .or_else(|| base.region().map(|r| r.to_string()))
            .unwrap_or_else(|| DEFAULT_REGION.to_string());
        builder = builder.region(Region::new(region.clone()));
        let endpoint = endpoint.filter(|e| !e.is_empty());
        if let Some(endpoint) = endpoint {
            check_endpoint(endpoint)?;
            builder = builder.endpoint_url(endpoint.trim_end_matches('/'));
        }
        let mut secrets = Vec::new();
        if let Some(keys) = keys {
            builder = builder.credentials_provider(aws_credential_types::Credentials::from(keys));
            secrets.push(keys.secret_access_key.clone());
            secrets.extend(keys.session_token.clone());
        }
        let shown = match endpoint {
            Some(endpoint) => display_url_str(endpoint).trim_end_matches('/').to_string(),
            None => environment_endpoint(base, &region),
        };
        Ok(StsClient {
            client: aws_sdk_sts::Client::from_conf(builder.build()),
            endpoint: shown,
            secrets,
        })
    }

    /// Where requests go.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// `AssumeRole` of `role_arn`, with `ExternalId` when given.
    pub async fn assume_role(
        &self,
        role_arn: &str,
        session_name: &str,
        external_id: Option<&str>,
        duration: Duration,
    ) -> Result<AssumedCredentials, StsFailure> {
        let seconds = duration.max(MIN_SESSION_DURATION).as_secs();
        let output = self
            .client
            .assume_role()
            .role_arn(role_arn)
            .role_session_name(session_name)
            .set_external_id(external_id.map(str::to_string))
            .duration_seconds(i32::try_from(seconds).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|err| self.failure(err))?;
        let credentials = output
            .credentials()
            .ok_or_else(|| malformed("AssumeRole", "no credentials"))?;
        let expires_at = SystemTime::try_from(*credentials.expiration())
            .map_err(|_| malformed("AssumeRole", "an unreadable expiration"))?;
        Ok(AssumedCredentials {
            keys: AwsKeys {
                access_key_id: credentials.access_key_id().to_string(),
                secret_access_key: credentials.secret_access_key().to_string(),
                session_token: Some(credentials.session_token().to_string()),
            },
            expires_at,
        })
    }

    /// `GetCallerIdentity`.
    pub async fn get_caller_identity(&self) -> Result<CallerIdentity, StsFailure> {
        let output = self
            .client
            .get_caller_identity()
            .send()
            .await
            .map_err(|err| self.failure(err))?;
        let arn = output
            .arn()
            .ok_or_else(|| malformed("GetCallerIdentity", "no Arn"))?;
        Ok(CallerIdentity {
            arn: arn.to_string(),
            account: output.account().map(str::to_string),
        })
    }

    /// What a failed call means: STS's error answer, floe's own credentials missing or
    /// failing, or no answer at all.
    fn failure<E>(&self, err: SdkError<E, HttpResponse>) -> StsFailure
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let secrets: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        if let SdkError::ServiceError(context) = &err {
            let error = context.err();
            return StsFailure {
                status: status_of(&err),
                code: error.code().map(str::to_string),
                message: redact(error.message().unwrap_or("no message"), &secrets),
                principal: None,
            };
        }
        let text = redact(&error_chain(&err), &secrets);
        match credentials_error(&err) {
            Some(CredentialsError::CredentialsNotLoaded(_)) => StsFailure {
                status: None,
                code: None,
                message: text,
                principal: Some(PrincipalProblem::Missing),
            },
            Some(_) => StsFailure {
                status: None,
                code: None,
                message: text,
                principal: Some(PrincipalProblem::Failed),
            },
            None => StsFailure {
                status: status_of(&err),
                code: None,
                message: format!("STS unreachable at {}: {text}", self.endpoint),
                principal: None,
            },
        }
    }
}

/// The HTTP status of the answer an SDK error carries, if one came.
fn status_of<E>(err: &SdkError<E, HttpResponse>) -> Option<u16> {
    err.raw_response()
        .map(|response| response.status().as_u16())
}

/// The credentials error somewhere in an SDK error's chain of causes.
fn credentials_error<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a CredentialsError> {
    let mut cause = Some(err);
    while let Some(current) = cause {
        if let Some(found) = current.downcast_ref::<CredentialsError>() {
            return Some(found);
        }
        cause = current.source();
    }
    None
}

fn malformed(action: &str, what: &str) -> StsFailure {
    StsFailure {
        status: Some(200),
        code: None,
        message: format!("the {action} answer has {what}"),
        principal: None,
    }
}

fn check_endpoint(endpoint: &str) -> Result<(), SinkError> {
    match reqwest::Url::parse(endpoint) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(()),
        _ => Err(SinkError::new(
            ErrorKind::InvalidConfig,
            format!(
                "invalid AWS ENDPOINT {}: not an http or https URL",
                display_url_str(endpoint)
            ),
        )),
    }
}

/// The STS endpoint of the environment for messages: an `AWS_ENDPOINT_URL_STS` /
/// `AWS_ENDPOINT_URL` override, else the SDK's endpoint for the region (regional, FIPS or
/// dual-stack as configured).
fn environment_endpoint(base: &SdkConfig, region: &str) -> String {
    let configured = std::env::var("AWS_ENDPOINT_URL_STS")
        .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
        .ok()
        .filter(|url| !url.is_empty())
        .filter(|_| !ignore_configured_endpoints());
    if let Some(url) = configured {
        return display_url_str(&url).trim_end_matches('/').to_string();
    }
    resolve_endpoint(
        region,
        base.use_fips().unwrap_or(false),
        base.use_dual_stack().unwrap_or(false),
    )
}

fn ignore_configured_endpoints() -> bool {
    std::env::var("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
        .is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The SDK's STS endpoint for a region: `https://sts.<region>.amazonaws.com`, with FIPS
/// (`sts-fips`) or dual-stack (`.api.aws`) variants.
pub fn resolve_endpoint(region: &str, fips: bool, dual_stack: bool) -> String {
    let params = Params::builder()
        .region(region)
        .use_fips(fips)
        .use_dual_stack(dual_stack)
        .use_global_endpoint(false)
        .build();
    let resolver = DefaultResolver::new();
    let resolved = params.ok().and_then(|params| {
        let endpoint = resolver.resolve_endpoint(&params);
        futures::FutureExt::now_or_never(endpoint)?.ok()
    });
    match resolved {
        Some(endpoint) => endpoint.url().trim_end_matches('/').to_string(),
        None => format!("the STS endpoint of {region}"),
    }
}

/// A role session assumed with an external id, cached and assumed again when it expires
/// within the refresh margin. Concurrent callers share one `AssumeRole`.
pub struct AssumeRoleProvider {
    environment: Arc<AwsEnvironment>,
    /// The AWS connection's `ENDPOINT` and `REGION`.
    endpoint: Option<String>,
    region: Option<String>,
    /// Built on first use (the environment loads asynchronously).
    client: OnceCell<StsClient>,
    role_arn: String,
    session_name: String,
    external_id: String,
    settings: StsSettings,
    session: Mutex<Option<AssumedSession>>,
    assumed: AtomicU64,
}

struct AssumedSession {
    credentials: AssumedCredentials,
    /// When to assume the role again.
    refresh_at: SystemTime,
}

impl fmt::Debug for AssumeRoleProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AssumeRoleProvider")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("role_arn", &self.role_arn)
            .field("session_name", &self.session_name)
            .field("external_id", &self.external_id)
            .finish_non_exhaustive()
    }
}

impl AssumeRoleProvider {
    /// A provider of `role`'s sessions, assumed from floe's principal in `environment` at
    /// `aws`'s endpoint and region.
    fn new(
        environment: Arc<AwsEnvironment>,
        aws: &AwsConfig,
        role: RoleToAssume,
        settings: StsSettings,
    ) -> AssumeRoleProvider {
        AssumeRoleProvider {
            environment,
            endpoint: aws.endpoint.clone(),
            region: aws.region.clone(),
            client: OnceCell::new(),
            role_arn: role.arn,
            session_name: role.session_name,
            external_id: role.external_id,
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
        let client = self
            .client
            .get_or_try_init(|| {
                self.environment
                    .sts(self.endpoint.as_deref(), self.region.as_deref())
            })
            .await?;
        let credentials = client
            .assume_role(
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

/// The role of an assume-role AWS connection.
struct RoleToAssume {
    arn: String,
    session_name: String,
    external_id: String,
}

/// When a session obtained `now` and expiring at `expires_at` is assumed again: `margin`
/// before it expires, but no sooner than a few seconds after it was obtained (a margin
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
        *session = Some(AssumedSession {
            credentials,
            refresh_at,
        });
        Ok(answer)
    }
}

/// An error and its sources' messages, joined: what went wrong in one sentence,
/// without the debug dump of the request and response (headers, bodies) that the SDK's
/// `DisplayErrorContext` appends and that floe's log and errors have no use for.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let message = cause.to_string();
        // Some errors repeat their source's message in their own.
        if !text.ends_with(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        source = cause.source();
    }
    text
}

fn unavailable(what: &str, failure: &StsFailure) -> SinkError {
    SinkError::new(
        ErrorKind::Unavailable,
        format!("{what}: {}", failure.text()),
    )
}

fn assume_error(role_arn: &str, failure: &StsFailure) -> SinkError {
    if let Some(err) = failure.principal_error() {
        return err;
    }
    let what = format!("failed to assume role {role_arn}");
    if failure.status.is_none() || failure.status.is_some_and(|s| s >= 500 || s == 429) {
        return unavailable(&what, failure);
    }
    SinkError::new(
        ErrorKind::Authentication,
        format!("{what}: {}", failure.text()),
    )
    .with_hint(
        "Check that the role's trust policy names floe's AWS principal and requires the \
         external ID shown in mz_internal.mz_aws_connections.",
    )
    // A trust policy being fixed is worth retrying for a running sink.
    .with_retryable(true)
}

/// The error when an assume-role connection is used but floe has no AWS identity.
pub fn missing_principal_error() -> SinkError {
    SinkError::new(
        ErrorKind::InvalidConfig,
        "cannot assume an AWS role: floe has no AWS credentials of its own",
    )
    .with_hint(
        "Give floe an AWS identity the role's trust policy names: AWS_ACCESS_KEY_ID and \
         AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), a profile (AWS_PROFILE), a web \
         identity (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, as on EKS), an ECS task \
         role or an EC2 instance profile.",
    )
}

/// How an AWS connection authenticates, read once for providing and for validating its
/// credentials: static keys, or a role assumed from floe's principal.
enum Authentication<'a> {
    Keys(&'a AwsKeys),
    Role(RoleToAssume),
}

impl<'a> Authentication<'a> {
    /// An error when the connection assumes a role and floe has no principal to assume it
    /// from.
    fn of(config: &'a AwsConfig, environment: &AwsEnvironment) -> Result<Self, SinkError> {
        match &config.auth {
            AwsAuthConfig::Keys(keys) => Ok(Authentication::Keys(keys)),
            AwsAuthConfig::AssumeRole {
                arn,
                session_name,
                external_id,
            } => {
                if !environment.has_principal() {
                    return Err(missing_principal_error());
                }
                Ok(Authentication::Role(RoleToAssume {
                    arn: arn.clone(),
                    session_name: session_name.clone(),
                    external_id: external_id.clone(),
                }))
            }
        }
    }
}

/// The credentials provider of an AWS connection: static keys, or a role assumed from
/// floe's principal in `environment` with the connection's external id.
pub fn aws_credentials_provider(
    config: &AwsConfig,
    environment: &Arc<AwsEnvironment>,
    sts: &StsSettings,
) -> Result<Arc<dyn AwsCredentialsProvider>, SinkError> {
    match Authentication::of(config, environment)? {
        Authentication::Keys(keys) => Ok(Arc::new(StaticAwsCredentials::new(keys.clone()))),
        Authentication::Role(role) => Ok(Arc::new(AssumeRoleProvider::new(
            environment.clone(),
            config,
            role,
            sts.clone(),
        ))),
    }
}

/// Validates an AWS connection. Static keys: `GetCallerIdentity` succeeds. An assumed role:
/// it can be assumed with the connection's external id, and it can NOT be assumed without
/// one (else any AWS customer of the same principal could assume it).
pub async fn validate_aws_connection(
    config: &AwsConfig,
    environment: &AwsEnvironment,
) -> Result<(), SinkError> {
    let (endpoint, region) = (config.endpoint.as_deref(), config.region.as_deref());
    match Authentication::of(config, environment)? {
        Authentication::Keys(keys) => {
            let client = environment.sts_with_keys(endpoint, region, keys).await?;
            client.get_caller_identity().await.map_err(|failure| {
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
        Authentication::Role(role) => {
            let client = environment.sts(endpoint, region).await?;
            validate_role(&client, &role.arn, &role.session_name, &role.external_id).await
        }
    }
}

/// The role can be assumed with `external_id`, and not without it.
async fn validate_role(
    client: &StsClient,
    arn: &str,
    session_name: &str,
    external_id: &str,
) -> Result<(), SinkError> {
    client
        .assume_role(arn, session_name, Some(external_id), MIN_SESSION_DURATION)
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
        .assume_role(arn, session_name, None, MIN_SESSION_DURATION)
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
        Err(failure) => Err(unavailable(
            &format!("cannot check that role {arn} requires an external ID"),
            &failure,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error whose source says why, twice nested, like the SDK's credential errors.
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1
                .as_deref()
                .map(|l| l as &(dyn std::error::Error + 'static))
        }
    }

    #[test]
    fn errors_read_as_their_chain_of_causes_without_debug_dumps() {
        let err = Layer(
            "dispatch failure",
            Some(Box::new(Layer(
                "failed to load IMDS session token",
                Some(Box::new(Layer("request forbidden", None))),
            ))),
        );
        assert_eq!(
            error_chain(&err),
            "dispatch failure: failed to load IMDS session token: request forbidden"
        );
        // A message that already ends with its source's is not repeated.
        let repeated = Layer("io error: refused", Some(Box::new(Layer("refused", None))));
        assert_eq!(error_chain(&repeated), "io error: refused");
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

    /// The SDK's endpoints: regional by default, FIPS and dual-stack when asked for.
    #[test]
    fn regional_fips_and_dual_stack_endpoints() {
        let cases = [
            (
                ("eu-west-1", false, false),
                "https://sts.eu-west-1.amazonaws.com",
            ),
            (
                ("us-east-1", false, false),
                "https://sts.us-east-1.amazonaws.com",
            ),
            (
                ("us-west-2", true, false),
                "https://sts-fips.us-west-2.amazonaws.com",
            ),
            (("eu-west-1", false, true), "https://sts.eu-west-1.api.aws"),
            (
                ("us-gov-west-1", true, true),
                "https://sts-fips.us-gov-west-1.api.aws",
            ),
            (
                ("cn-north-1", false, false),
                "https://sts.cn-north-1.amazonaws.com.cn",
            ),
        ];
        for ((region, fips, dual_stack), endpoint) in cases {
            assert_eq!(resolve_endpoint(region, fips, dual_stack), endpoint);
        }
    }

    #[test]
    fn failures() {
        let denied = StsFailure {
            status: Some(403),
            code: Some("AccessDenied".into()),
            message: "no".into(),
            principal: None,
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
            principal: None,
        };
        assert!(!down.is_access_denied());
        assert_eq!(assume_error("r", &down).kind, ErrorKind::Unavailable);
        let nobody = StsFailure {
            principal: Some(PrincipalProblem::Missing),
            ..down.clone()
        };
        assert_eq!(assume_error("r", &nobody), missing_principal_error());
        let refused = StsFailure {
            principal: Some(PrincipalProblem::Failed),
            message: "InvalidIdentityToken: not trusted".into(),
            ..down
        };
        let err = assume_error("r", &refused);
        assert_eq!(
            err.message,
            "floe's AWS credentials could not be loaded: InvalidIdentityToken: not trusted"
        );
        assert!(err.retryable);
    }

    fn environment(source: PrincipalSource) -> AwsEnvironment {
        let settings = HttpSettings {
            max_retries: 0,
            ..HttpSettings::default()
        };
        AwsEnvironment::new(source, &settings)
    }

    /// An unreachable STS fails the validation with the endpoint named, not a hang; a role
    /// without a principal fails before any request.
    #[tokio::test]
    async fn unreachable_sts() {
        let config = AwsConfig {
            endpoint: Some("http://127.0.0.1:9".into()),
            region: Some("us-east-1".into()),
            auth: AwsAuthConfig::Keys(AwsKeys {
                access_key_id: "AKID".into(),
                secret_access_key: "very-secret-value".into(),
                session_token: None,
            }),
        };
        let none = environment(PrincipalSource::None);
        let err = validate_aws_connection(&config, &none).await.unwrap_err();
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
        let err = validate_aws_connection(&role, &none).await.unwrap_err();
        assert_eq!(
            err.message,
            "cannot assume an AWS role: floe has no AWS credentials of its own"
        );
        let bad = AwsConfig {
            endpoint: Some("ftp://x".into()),
            ..role
        };
        let keys = environment(PrincipalSource::Keys(AwsKeys {
            access_key_id: "AKID".into(),
            secret_access_key: "secret".into(),
            session_token: None,
        }));
        let err = validate_aws_connection(&bad, &keys).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidConfig, "{err:?}");
    }

    /// The endpoint messages name: a connection's, else the region's.
    #[tokio::test]
    async fn endpoints_of_clients() {
        let keys = environment(PrincipalSource::None);
        let client = keys.sts(Some("http://127.0.0.1:9/"), None).await.unwrap();
        assert_eq!(client.endpoint(), "http://127.0.0.1:9");
        if std::env::var_os("AWS_ENDPOINT_URL_STS").is_none()
            && std::env::var_os("AWS_ENDPOINT_URL").is_none()
        {
            let client = keys.sts(None, Some("eu-west-1")).await.unwrap();
            assert_eq!(client.endpoint(), "https://sts.eu-west-1.amazonaws.com");
        }
    }
}
