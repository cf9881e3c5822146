//! OAuth2 client credentials (RFC 6749 §4.4): exchanging a client id and secret for a
//! bearer token at the catalog's token endpoint, caching it, and refreshing it before it
//! expires.
//!
//! The exchange itself is the `oauth2` crate's (the request, client authentication, the
//! token and error answers), sent through floe's retrying HTTP client ([`HttpClient`]:
//! 429/503 waited out, the extra CA bundle, no redirects). floe adds what the crate leaves
//! to its users: the cache and its refresh margin, one exchange shared by concurrent
//! requests, a lenient reading of `expires_in`, and errors that name the HTTP status.
//!
//! Client authentication: floe first sends the id and secret in the form body (what the
//! Iceberg REST clients do). Some servers accept only HTTP Basic (RFC 6749 §2.3.1 makes
//! Basic the one every server must support). When the endpoint answers `invalid_client`
//! (status 400 or 401) to one method, floe tries the other method once; the method that
//! worked is remembered for later exchanges. When both fail, the error reports the first
//! method's answer.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use oauth2::basic::{
    BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse,
    BasicTokenType,
};
use oauth2::{
    AccessToken, AuthType, ClientId, ClientSecret, RefreshToken, RequestTokenError, Scope,
    StandardRevocableToken, TokenUrl,
};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::config::ClientCredentials;
use crate::error::{ErrorKind, SinkError};
use crate::http::{HttpClient, SendError, display_url_str, redact, transport_error_text};

/// How the client authenticates to the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuthMethod {
    /// `client_id` and `client_secret` in the form body.
    FormBody,
    /// `Authorization: Basic base64(client_id:client_secret)`.
    Basic,
}

impl ClientAuthMethod {
    fn other(self) -> ClientAuthMethod {
        match self {
            ClientAuthMethod::FormBody => ClientAuthMethod::Basic,
            ClientAuthMethod::Basic => ClientAuthMethod::FormBody,
        }
    }
}

/// A bearer token and when to stop using it.
struct CachedToken {
    value: String,
    /// When floe fetches a new one (expiry minus the refresh margin); `None` when the
    /// endpoint gave no `expires_in`, in which case only a 401 replaces it.
    refresh_at: Option<Instant>,
    /// When the endpoint says it expires.
    expires_at: Option<Instant>,
}

struct TokenState {
    credentials: Option<ClientCredentials>,
    token: Option<CachedToken>,
    /// The client authentication the endpoint accepted last.
    method: ClientAuthMethod,
    /// Token exchanges made, successful or not (for tests and statistics).
    exchanges: u64,
}

/// A cached, refreshing source of bearer tokens for one token endpoint.
pub(crate) struct TokenSource {
    token_url: String,
    scope: String,
    /// One lock around the whole exchange, so concurrent requests share one refresh.
    state: Mutex<TokenState>,
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSource")
            .field("token_url", &display_url_str(&self.token_url))
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// A token endpoint's answer. Not the crate's `StandardTokenResponse`: servers send
/// `expires_in` as a string too, and some leave out `token_type` (floe sends every token
/// as a bearer token).
#[derive(Debug, Serialize, Deserialize)]
struct TokenResponse {
    access_token: AccessToken,
    #[serde(skip, default = "bearer")]
    token_type: BasicTokenType,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
}

fn bearer() -> BasicTokenType {
    BasicTokenType::Bearer
}

impl oauth2::TokenResponse for TokenResponse {
    type TokenType = BasicTokenType;

    fn access_token(&self) -> &AccessToken {
        &self.access_token
    }

    fn token_type(&self) -> &BasicTokenType {
        &self.token_type
    }

    fn expires_in(&self) -> Option<Duration> {
        self.expires_in
            .as_ref()
            .and_then(expires_in_seconds)
            .map(Duration::from_secs)
    }

    fn refresh_token(&self) -> Option<&RefreshToken> {
        None
    }

    fn scopes(&self) -> Option<&Vec<Scope>> {
        None
    }
}

/// Why one exchange attempt failed.
#[derive(Default)]
struct ExchangeFailure {
    status: Option<reqwest::StatusCode>,
    /// The OAuth error code (`invalid_client`, `invalid_scope`, ...).
    code: Option<String>,
    description: Option<String>,
    /// A transport failure (no HTTP answer).
    transport: Option<String>,
}

impl ExchangeFailure {
    /// What the `oauth2` crate's error says, with the status of the answer it was about.
    fn of(
        err: RequestTokenError<SinkError, BasicErrorResponse>,
        status: Option<reqwest::StatusCode>,
    ) -> ExchangeFailure {
        let not_a_token = |what: String| ExchangeFailure {
            status,
            // An answer that is neither a token nor an OAuth2 error says nothing more.
            description: status
                .is_some_and(|s| s.is_success())
                .then(|| format!("response is not an OAuth2 token: {what}")),
            ..ExchangeFailure::default()
        };
        match err {
            RequestTokenError::ServerResponse(answer) => ExchangeFailure {
                status,
                code: Some(answer.error().as_ref().to_string()),
                description: answer.error_description().cloned(),
                transport: None,
            },
            RequestTokenError::Request(err) => ExchangeFailure {
                transport: Some(err.message),
                ..ExchangeFailure::default()
            },
            RequestTokenError::Parse(err, _body) => not_a_token(err.to_string()),
            RequestTokenError::Other(what) => not_a_token(what),
        }
    }

    fn is_invalid_client(&self) -> bool {
        matches!(self.status.map(|s| s.as_u16()), Some(400 | 401))
            && self.code.as_deref() == Some("invalid_client")
    }
}

impl TokenSource {
    pub(crate) fn new(
        token_url: String,
        scope: String,
        credentials: Option<ClientCredentials>,
    ) -> TokenSource {
        TokenSource {
            token_url,
            scope,
            state: Mutex::new(TokenState {
                credentials,
                token: None,
                method: ClientAuthMethod::FormBody,
                exchanges: 0,
            }),
        }
    }

    /// Replaces the credentials (ALTER SECRET) and drops the cached token.
    pub(crate) async fn set_credentials(&self, credentials: Option<ClientCredentials>) {
        let mut state = self.state.lock().await;
        state.credentials = credentials;
        state.token = None;
    }

    /// Drops the cached token if it is still `stale` (a 401 answered a request that carried
    /// it); a token another request fetched meanwhile is kept.
    pub(crate) async fn invalidate(&self, stale: &str) {
        let mut state = self.state.lock().await;
        if state.token.as_ref().is_some_and(|t| t.value == stale) {
            state.token = None;
        }
    }

    pub(crate) async fn exchanges(&self) -> u64 {
        self.state.lock().await.exchanges
    }

    pub(crate) async fn client_auth_method(&self) -> ClientAuthMethod {
        self.state.lock().await.method
    }

    /// Secrets to scrub from any text a server sends back.
    pub(crate) async fn secrets(&self) -> Vec<String> {
        let state = self.state.lock().await;
        let mut secrets = Vec::new();
        if let Some(credentials) = &state.credentials {
            secrets.push(credentials.client_secret.clone());
        }
        if let Some(token) = &state.token {
            secrets.push(token.value.clone());
        }
        secrets
    }

    /// A bearer token: the cached one while it is fresh, else a new one. `None` when the
    /// connection has no credentials (requests then go unauthenticated).
    pub(crate) async fn token(&self, http: &HttpClient) -> Result<Option<String>, SinkError> {
        let mut state = self.state.lock().await;
        let Some(credentials) = state.credentials.clone() else {
            return Ok(None);
        };
        let now = Instant::now();
        if let Some(token) = &state.token
            && token.refresh_at.is_none_or(|at| now < at)
        {
            return Ok(Some(token.value.clone()));
        }
        let first = state.method;
        state.exchanges += 1;
        let result = match self.exchange(http, &credentials, first).await {
            Ok(response) => Ok(response),
            Err(failure) if failure.is_invalid_client() => {
                tracing::debug!(
                    token_url = %display_url_str(&self.token_url),
                    "token endpoint refused {first:?} client authentication, trying {:?}",
                    first.other()
                );
                state.exchanges += 1;
                match self.exchange(http, &credentials, first.other()).await {
                    Ok(response) => {
                        state.method = first.other();
                        Ok(response)
                    }
                    Err(_second) => Err(failure),
                }
            }
            Err(failure) => Err(failure),
        };
        match result {
            Ok(response) => {
                let lifetime = response.expires_in.as_ref().and_then(expires_in_seconds);
                let value = response.access_token.secret().clone();
                let fetched = Instant::now();
                // An absurd `expires_in` (past what an Instant can hold) means "no expiry".
                let expires_at =
                    lifetime.and_then(|secs| fetched.checked_add(Duration::from_secs(secs)));
                let refresh_at = lifetime.and_then(|secs| {
                    fetched.checked_add(
                        Duration::from_secs(secs)
                            .saturating_sub(http.settings().token_refresh_margin),
                    )
                });
                tracing::debug!(
                    token_url = %display_url_str(&self.token_url),
                    expires_in = ?lifetime,
                    "fetched OAuth2 token"
                );
                state.token = Some(CachedToken {
                    value: value.clone(),
                    refresh_at,
                    expires_at,
                });
                Ok(Some(value))
            }
            Err(failure) => {
                // A token that has not expired yet still works: use it, and try the
                // refresh again on the next request.
                if let Some(token) = &state.token
                    && token.expires_at.is_some_and(|at| Instant::now() < at)
                    && failure
                        .status
                        .is_none_or(|s| s.is_server_error() || s.as_u16() == 429)
                {
                    tracing::warn!(
                        token_url = %display_url_str(&self.token_url),
                        "token refresh failed, using the current token until it expires"
                    );
                    return Ok(Some(token.value.clone()));
                }
                let secrets = [credentials.client_secret.as_str()];
                Err(self.failure_error(failure, &secrets))
            }
        }
    }

    /// One exchange with one client authentication method: the `oauth2` crate's request,
    /// sent through floe's retrying HTTP client.
    async fn exchange(
        &self,
        http: &HttpClient,
        credentials: &ClientCredentials,
        method: ClientAuthMethod,
    ) -> Result<TokenResponse, ExchangeFailure> {
        let token_url = TokenUrl::new(self.token_url.clone()).map_err(|err| ExchangeFailure {
            transport: Some(format!("invalid token endpoint URL: {err}")),
            ..ExchangeFailure::default()
        })?;
        let client = oauth2::Client::<
            BasicErrorResponse,
            TokenResponse,
            BasicTokenIntrospectionResponse,
            StandardRevocableToken,
            BasicRevocationErrorResponse,
        >::new(ClientId::new(credentials.client_id.clone()))
        .set_client_secret(ClientSecret::new(credentials.client_secret.clone()))
        .set_token_uri(token_url)
        .set_auth_type(match method {
            ClientAuthMethod::FormBody => AuthType::RequestBody,
            ClientAuthMethod::Basic => AuthType::BasicAuth,
        });
        let mut request = client.exchange_client_credentials();
        if !self.scope.is_empty() {
            request = request.add_scope(Scope::new(self.scope.clone()));
        }
        let sender = TokenRequestSender {
            http,
            status: std::sync::Mutex::new(None),
        };
        let result = request.request_async(&sender).await;
        let status = sender.status.lock().map_or(None, |status| *status);
        result.map_err(|err| ExchangeFailure::of(err, status))
    }

    fn failure_error(&self, failure: ExchangeFailure, secrets: &[&str]) -> SinkError {
        let url = display_url_str(&self.token_url);
        let cause = match (&failure.transport, failure.status, &failure.code) {
            (Some(transport), _, _) => transport.clone(),
            (None, Some(status), Some(code)) => format!("{} {}", status.as_u16(), code),
            (None, Some(status), None) => status.to_string(),
            (None, None, _) => "no answer".to_string(),
        };
        let message = redact(&format!("token exchange failed at {url}: {cause}"), secrets);
        let mut err = SinkError::new(ErrorKind::TokenExchange, message);
        if let Some(description) = &failure.description {
            err = err.with_detail(redact(description, secrets));
        }
        let retryable = match failure.status {
            None => true,
            Some(status) => status.is_server_error() || status.as_u16() == 429,
        };
        let hint = if retryable {
            "The token endpoint is unreachable or failing; floe retries."
        } else {
            "Check OAUTH2 SERVER URL and SCOPE, and that CREDENTIAL holds a valid \
             client_id:client_secret (after rotating the secret, ALTER SECRET)."
        };
        err.with_hint(hint).with_retryable(retryable)
    }
}

/// `expires_in` as seconds; some servers send it as a string.
fn expires_in_seconds(value: &serde_json::Value) -> Option<u64> {
    match value {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The HTTP client of the `oauth2` crate: floe's retrying client, noting the status of the
/// answer (the crate's errors do not carry it).
struct TokenRequestSender<'a> {
    http: &'a HttpClient,
    status: std::sync::Mutex<Option<reqwest::StatusCode>>,
}

impl<'c> oauth2::AsyncHttpClient<'c> for TokenRequestSender<'_> {
    type Error = SinkError;
    type Future =
        Pin<Box<dyn Future<Output = Result<oauth2::HttpResponse, SinkError>> + Send + 'c>>;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        Box::pin(send_token_request(self.http, request, &self.status))
    }
}

/// Sends one token request of the `oauth2` crate through floe's retrying client, and notes
/// the status of the answer in `status`.
async fn send_token_request(
    http: &HttpClient,
    request: oauth2::HttpRequest,
    status: &std::sync::Mutex<Option<reqwest::StatusCode>>,
) -> Result<oauth2::HttpResponse, SinkError> {
    let transport =
        |err: &reqwest::Error| SinkError::new(ErrorKind::TokenExchange, transport_error_text(err));
    let request = reqwest::Request::try_from(request).map_err(|err| transport(&err))?;
    let prepare = || async {
        request
            .try_clone()
            .map(|request| (request, ()))
            .ok_or_else(|| {
                SinkError::new(
                    ErrorKind::TokenExchange,
                    "the token request has a streamed body",
                )
            })
    };
    let answer = match http.send(prepare).await {
        Ok(answer) => answer,
        Err(SendError::Prepare(err)) => return Err(err),
        Err(SendError::Unanswered { error, .. }) => return Err(transport(&error)),
    };
    let code = answer.response.status();
    if let Ok(mut status) = status.lock() {
        *status = Some(code);
    }
    let headers = answer.response.headers().clone();
    let body = answer.response.bytes().await.unwrap_or_default();
    let mut response = oauth2::HttpResponse::new(body.to_vec());
    *response.status_mut() = code;
    *response.headers_mut() = headers;
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_in_forms() {
        assert_eq!(expires_in_seconds(&serde_json::json!(3600)), Some(3600));
        assert_eq!(expires_in_seconds(&serde_json::json!("60")), Some(60));
        assert_eq!(expires_in_seconds(&serde_json::json!(-1)), None);
        assert_eq!(expires_in_seconds(&serde_json::json!(null)), None);
    }

    #[test]
    fn failure_messages() {
        let source = TokenSource::new(
            "https://user:pw@auth.example.com/oidc/v1/token".into(),
            "all-apis".into(),
            None,
        );
        let err = source.failure_error(
            ExchangeFailure {
                status: Some(reqwest::StatusCode::UNAUTHORIZED),
                code: Some("invalid_client".into()),
                description: Some("client secret s3cr3t is wrong".into()),
                transport: None,
            },
            &["s3cr3t"],
        );
        assert_eq!(err.kind, ErrorKind::TokenExchange);
        assert_eq!(
            err.message,
            "token exchange failed at https://auth.example.com/oidc/v1/token: 401 invalid_client"
        );
        assert_eq!(
            err.detail.as_deref(),
            Some("client secret ******** is wrong")
        );
        assert!(!err.retryable);

        let err = source.failure_error(
            ExchangeFailure {
                status: Some(reqwest::StatusCode::NOT_FOUND),
                code: None,
                description: None,
                transport: None,
            },
            &[],
        );
        assert!(err.message.ends_with(": 404 Not Found"), "{}", err.message);

        let err = source.failure_error(
            ExchangeFailure {
                status: None,
                code: None,
                description: None,
                transport: Some("cannot connect (connection refused)".into()),
            },
            &[],
        );
        assert_eq!(err.kind, ErrorKind::TokenExchange);
        assert!(err.retryable);
        assert!(err.message.contains("cannot connect"), "{}", err.message);
    }

    #[test]
    fn invalid_client_detection() {
        let failure = |status: u16, code: Option<&str>| ExchangeFailure {
            status: Some(reqwest::StatusCode::from_u16(status).unwrap()),
            code: code.map(str::to_string),
            description: None,
            transport: None,
        };
        assert!(failure(401, Some("invalid_client")).is_invalid_client());
        assert!(failure(400, Some("invalid_client")).is_invalid_client());
        assert!(!failure(400, Some("invalid_scope")).is_invalid_client());
        assert!(!failure(500, Some("invalid_client")).is_invalid_client());
        assert!(!failure(401, None).is_invalid_client());
    }
}
