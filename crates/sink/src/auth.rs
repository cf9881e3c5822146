//! How catalog requests are authenticated: one [`AuthSession`] per catalog connection (the
//! shape of iceberg-rust's and the Java client's `AuthSession`), so that the REST client
//! sends, retries and explains refusals the same way whatever the scheme.
//!
//! - [`OAuth2Session`]: a bearer token from the connection's client credentials, cached and
//!   refreshed ([`TokenSource`]); no credentials means anonymous requests.
//! - [`SigV4Session`]: a SigV4 signature with the AWS connection's credentials (S3 Tables).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::config::ClientCredentials;
use crate::error::{ErrorKind, SinkError};
use crate::http::HttpClient;
use crate::oauth::{ClientAuthMethod, TokenSource};
use crate::sigv4::{AwsCredentialsProvider, SigV4Signer};

/// How a refused request was authenticated, for the hint of an authentication error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthUsed {
    SigV4,
    Bearer,
    /// A bearer token at Databricks Unity Catalog, whose refusals have known causes.
    UnityBearer,
    /// A `rest` connection without CREDENTIAL.
    Anonymous,
}

/// Authenticates the requests of one catalog connection.
#[async_trait]
pub(crate) trait AuthSession: Send + Sync + fmt::Debug {
    /// Adds authentication to a built request; called for each attempt (tokens are renewed
    /// before they expire, signatures are bound to the time). Returns the bearer token it
    /// presented, if any.
    async fn authenticate(
        &self,
        http: &HttpClient,
        request: &mut reqwest::Request,
    ) -> Result<Option<String>, SinkError>;

    /// After a 401 to a request that presented `token`: forgets it, so that the next attempt
    /// authenticates afresh. Returns whether sending again may help.
    async fn reauthenticate(&self, _token: &str) -> bool {
        false
    }

    /// How a request that presented `token` was authenticated.
    fn used(&self, token: Option<&str>) -> AuthUsed;

    /// Secrets that must not appear in errors (client secret, token, AWS keys).
    async fn secrets(&self) -> Vec<String>;

    /// Replaces the OAuth2 client credentials (ALTER SECRET).
    async fn set_client_credentials(
        &self,
        _credentials: Option<ClientCredentials>,
    ) -> Result<(), SinkError> {
        Err(SinkError::new(
            ErrorKind::InvalidConfig,
            "SigV4-signed catalogs have no OAuth2 credentials",
        ))
    }

    /// Replaces where the AWS credentials of a SigV4-signed catalog come from.
    fn set_aws_credentials(
        &self,
        _provider: Arc<dyn AwsCredentialsProvider>,
    ) -> Result<(), SinkError> {
        Err(SinkError::new(
            ErrorKind::InvalidConfig,
            "OAuth2 catalogs do not sign requests with AWS credentials",
        ))
    }

    /// How many token exchanges this session made (0 without a token endpoint).
    async fn token_exchanges(&self) -> u64 {
        0
    }

    /// The client authentication the token endpoint accepted last.
    async fn client_auth_method(&self) -> Option<ClientAuthMethod> {
        None
    }
}

/// Bearer tokens from OAuth2 client credentials (or anonymous requests without them).
#[derive(Debug)]
pub(crate) struct OAuth2Session {
    source: TokenSource,
    /// Databricks Unity Catalog: its refusals get hints naming its grants.
    unity: bool,
}

impl OAuth2Session {
    pub(crate) fn new(source: TokenSource, unity: bool) -> OAuth2Session {
        OAuth2Session { source, unity }
    }
}

#[async_trait]
impl AuthSession for OAuth2Session {
    async fn authenticate(
        &self,
        http: &HttpClient,
        request: &mut reqwest::Request,
    ) -> Result<Option<String>, SinkError> {
        let token = self.source.token(http).await?;
        if let Some(token) = &token {
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| {
                    SinkError::new(
                        ErrorKind::UnexpectedResponse,
                        "the token endpoint issued a token that is not a valid header value",
                    )
                })?;
            value.set_sensitive(true);
            request
                .headers_mut()
                .insert(reqwest::header::AUTHORIZATION, value);
        }
        Ok(token)
    }

    async fn reauthenticate(&self, token: &str) -> bool {
        // The token may have been revoked or expired early: fetch a new one once.
        tracing::debug!("catalog answered 401, fetching a new token");
        self.source.invalidate(token).await;
        true
    }

    fn used(&self, token: Option<&str>) -> AuthUsed {
        match token {
            Some(_) if self.unity => AuthUsed::UnityBearer,
            Some(_) => AuthUsed::Bearer,
            None => AuthUsed::Anonymous,
        }
    }

    async fn secrets(&self) -> Vec<String> {
        self.source.secrets().await
    }

    async fn set_client_credentials(
        &self,
        credentials: Option<ClientCredentials>,
    ) -> Result<(), SinkError> {
        self.source.set_credentials(credentials).await;
        Ok(())
    }

    async fn token_exchanges(&self) -> u64 {
        self.source.exchanges().await
    }

    async fn client_auth_method(&self) -> Option<ClientAuthMethod> {
        Some(self.source.client_auth_method().await)
    }
}

/// SigV4 signatures (S3 Tables' REST endpoint, signing name `s3tables`).
#[derive(Debug)]
pub(crate) struct SigV4Session {
    signer: SigV4Signer,
}

impl SigV4Session {
    pub(crate) fn new(signer: SigV4Signer) -> SigV4Session {
        SigV4Session { signer }
    }
}

#[async_trait]
impl AuthSession for SigV4Session {
    async fn authenticate(
        &self,
        _http: &HttpClient,
        request: &mut reqwest::Request,
    ) -> Result<Option<String>, SinkError> {
        let keys = self.signer.credentials().await?;
        self.signer.sign(&keys, request)?;
        Ok(None)
    }

    fn used(&self, _token: Option<&str>) -> AuthUsed {
        AuthUsed::SigV4
    }

    async fn secrets(&self) -> Vec<String> {
        match self.signer.credentials().await {
            Ok(keys) => std::iter::once(keys.secret_access_key)
                .chain(keys.session_token)
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    fn set_aws_credentials(
        &self,
        provider: Arc<dyn AwsCredentialsProvider>,
    ) -> Result<(), SinkError> {
        self.signer.set_provider(provider);
        Ok(())
    }
}
