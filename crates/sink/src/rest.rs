//! floe's thin Iceberg REST catalog client.
//!
//! It exists because the `iceberg` crate's REST client fetches its OAuth2 token once, never
//! retries a 401, cannot sign with SigV4 and drops vended credentials. This client does the
//! transport (authentication, retries, error mapping) and hands back JSON; the Iceberg
//! payload types come from elsewhere.
//!
//! Every request: is authenticated by the connection's [`AuthSession`] (a bearer token or
//! a SigV4 signature), adds `X-Iceberg-Access-Delegation` when configured, goes through
//! floe's retrying HTTP client (whose rules, in [`crate::http`], never re-send a request
//! whose outcome is unknown: the caller reloads and decides), and with OAuth2 is tried
//! once more with a fresh token after a 401.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::json;

use crate::auth::{AuthSession, AuthUsed, OAuth2Session, SigV4Session};
use crate::config::{AwsAuthConfig, CatalogConfig, ClientCredentials};
use crate::error::{ErrorKind, ResultExt, SinkError};
use crate::http::{
    HttpClient, HttpSettings, SendError, display_url, display_url_str, encode_component, redact,
    transport_error_text,
};
use crate::namespace::Namespace;
pub use crate::oauth::ClientAuthMethod;
use crate::oauth::TokenSource;
use crate::sigv4::{AwsCredentialsProvider, SigV4Signer, StaticAwsCredentials, region_from_arn};

/// The header that asks the catalog to vend storage credentials with `loadTable`.
pub const ACCESS_DELEGATION_HEADER: &str = "X-Iceberg-Access-Delegation";

/// The signing name of S3 Tables' Iceberg REST endpoint.
pub const S3TABLES_SIGNING_NAME: &str = "s3tables";

/// What a request was for, to turn a failure into an error the user can act on.
#[derive(Debug, Clone)]
enum Operation<'a> {
    Config,
    ListNamespaces,
    LoadNamespace(&'a Namespace),
    CreateNamespace(&'a Namespace),
    LoadTable(&'a Namespace, &'a str),
    CreateTable(&'a Namespace, &'a str),
    CommitTable(&'a Namespace, &'a str),
    LoadCredentials(&'a Namespace, &'a str),
}

impl Operation<'_> {
    fn describe(&self) -> String {
        match self {
            Operation::Config => "reading the catalog configuration".into(),
            Operation::ListNamespaces => "listing namespaces".into(),
            Operation::LoadNamespace(ns) => format!("loading namespace \"{ns}\""),
            Operation::CreateNamespace(ns) => format!("creating namespace \"{ns}\""),
            Operation::LoadTable(ns, table) => format!("loading table \"{ns}.{table}\""),
            Operation::CreateTable(ns, table) => format!("creating table \"{ns}.{table}\""),
            Operation::CommitTable(ns, table) => format!("committing to table \"{ns}.{table}\""),
            Operation::LoadCredentials(ns, table) => {
                format!("loading storage credentials of table \"{ns}.{table}\"")
            }
        }
    }
}

/// A table as `loadTable` returns it.
#[derive(Clone, Deserialize)]
pub struct LoadTableResponse {
    /// The current metadata file; absent only for staged tables.
    #[serde(rename = "metadata-location", default)]
    pub metadata_location: Option<String>,
    /// The table metadata, as JSON.
    pub metadata: serde_json::Value,
    /// Table-specific client settings, including vended storage credentials.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// Vended credentials per storage prefix (the longest matching prefix applies).
    #[serde(rename = "storage-credentials", default)]
    pub storage_credentials: Vec<StorageCredential>,
}

/// Credentials for the objects under one storage prefix.
#[derive(Clone, Deserialize)]
pub struct StorageCredential {
    pub prefix: String,
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

/// What the table's credentials endpoint answered.
#[derive(Debug, Clone)]
pub enum TableCredentials {
    /// Fresh credentials per storage prefix (`{"storage-credentials": [...]}`).
    Vended(Vec<StorageCredential>),
    /// The catalog has no credentials endpoint (404, 405 or 501): reload the table instead.
    Unsupported,
}

/// `GET .../tables/{t}/credentials`'s answer.
#[derive(Deserialize)]
struct LoadCredentialsResponse {
    #[serde(rename = "storage-credentials", default)]
    storage_credentials: Vec<StorageCredential>,
}

/// Whether a refused credentials request means the catalog lacks the endpoint (rather than
/// the table or namespace missing).
fn credentials_endpoint_missing(status: StatusCode, remote: &RemoteError) -> bool {
    match status.as_u16() {
        405 | 501 => true,
        404 => !remote.error_type.as_deref().is_some_and(|t| {
            t.eq_ignore_ascii_case("NoSuchTableException")
                || t.eq_ignore_ascii_case("NoSuchNamespaceException")
        }),
        _ => false,
    }
}

/// Whether a REST catalog URL is Databricks Unity Catalog's Iceberg endpoint.
pub fn is_unity_url(url: &str) -> bool {
    url.split(['?', '#']).next().is_some_and(|u| {
        u.trim_end_matches('/')
            .ends_with("/api/2.1/unity-catalog/iceberg-rest")
    })
}

/// Whether a client property holds a secret (vended keys and tokens).
pub fn is_sensitive_property(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "secret",
        "token",
        "password",
        "sas",
        "credential",
        "private",
    ]
    .iter()
    .any(|word| key.contains(word))
}

/// Properties with sensitive values replaced, for Debug output.
struct RedactedProperties<'a>(&'a BTreeMap<String, String>);

impl fmt::Debug for RedactedProperties<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(key, value)| {
                let value = if is_sensitive_property(key) {
                    "********"
                } else {
                    value.as_str()
                };
                (key, value)
            }))
            .finish()
    }
}

impl fmt::Debug for LoadTableResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadTableResponse")
            .field("metadata_location", &self.metadata_location)
            .field("config", &RedactedProperties(&self.config))
            .field("storage_credentials", &self.storage_credentials)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for StorageCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageCredential")
            .field("prefix", &self.prefix)
            .field("config", &RedactedProperties(&self.config))
            .finish()
    }
}

/// `GET /v1/config`'s answer.
#[derive(Debug, Deserialize, Default)]
struct ConfigResponse {
    #[serde(default)]
    defaults: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    overrides: BTreeMap<String, serde_json::Value>,
}

/// The route prefix and merged properties of a catalog configuration: defaults, then the
/// client's own (`warehouse`), then overrides, which win.
fn merge_config(
    config: ConfigResponse,
    warehouse: Option<&str>,
) -> (Option<String>, BTreeMap<String, String>) {
    let text = |value: serde_json::Value| match value {
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    };
    let mut properties = BTreeMap::new();
    for (key, value) in config.defaults {
        properties.insert(key, text(value));
    }
    if let Some(warehouse) = warehouse {
        properties.insert("warehouse".to_string(), warehouse.to_string());
    }
    for (key, value) in config.overrides {
        properties.insert(key, text(value));
    }
    let prefix = properties
        .get("prefix")
        .map(|p| p.trim_matches('/').to_string())
        .filter(|p| !p.is_empty());
    (prefix, properties)
}

/// The Iceberg REST error model: `{"error": {"message", "type", "code"}}`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct RemoteError {
    message: Option<String>,
    error_type: Option<String>,
}

fn parse_remote_error(body: &[u8]) -> RemoteError {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        let text = String::from_utf8_lossy(body).trim().to_string();
        return RemoteError {
            // A short plain-text body is usually the reason; HTML pages are not worth it.
            message: (!text.is_empty() && text.len() <= 300 && !text.starts_with('<'))
                .then_some(text),
            error_type: None,
        };
    };
    let error = value.get("error").unwrap_or(&value);
    let field = |name: &str| error.get(name).and_then(|v| v.as_str()).map(str::to_string);
    match error {
        serde_json::Value::String(s) => RemoteError {
            message: Some(s.clone()),
            error_type: None,
        },
        _ => RemoteError {
            message: field("message").or_else(|| field("error_description")),
            error_type: field("type"),
        },
    }
}

/// Maps a failed catalog response to an error naming its cause.
fn map_error(
    status: StatusCode,
    remote: &RemoteError,
    operation: &Operation<'_>,
    method: &Method,
    url: &str,
    auth: AuthUsed,
) -> SinkError {
    let what = operation.describe();
    let answer = match &remote.message {
        Some(message) => format!("{status}: {message}"),
        None => status.to_string(),
    };
    let is_type = |name: &str| {
        remote
            .error_type
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case(name))
    };
    match status.as_u16() {
        401 | 403 => {
            let hint = match auth {
                AuthUsed::SigV4 => {
                    "Check the AWS connection's keys and REGION: the catalog refused the SigV4 \
                     signature or the identity lacks permission."
                }
                AuthUsed::Bearer => {
                    "The token endpoint issued a token, but the catalog refused it: check that \
                     the client has access to the catalog, WAREHOUSE and the namespace."
                }
                AuthUsed::UnityBearer => {
                    "Unity Catalog issued a token but refused the request: enable External data \
                     access on the metastore, and grant the service principal READ METADATA on \
                     the metastore and EXTERNAL USE SCHEMA on the schema."
                }
                AuthUsed::Anonymous => {
                    "The catalog requires authentication: set CREDENTIAL on the connection."
                }
            };
            SinkError::new(
                ErrorKind::Authentication,
                format!("authentication failed {what}: {method} {url}: {answer}"),
            )
            .with_hint(hint)
        }
        404 => match operation {
            Operation::LoadTable(ns, table)
            | Operation::CommitTable(ns, table)
            | Operation::LoadCredentials(ns, table)
                if !is_type("NoSuchNamespaceException") =>
            {
                SinkError::new(
                    ErrorKind::TableNotFound,
                    format!("Iceberg table \"{ns}.{table}\" does not exist"),
                )
                .with_detail(answer)
            }
            Operation::LoadNamespace(ns)
            | Operation::CreateNamespace(ns)
            | Operation::LoadTable(ns, _)
            | Operation::CreateTable(ns, _)
            | Operation::CommitTable(ns, _)
            | Operation::LoadCredentials(ns, _) => SinkError::new(
                ErrorKind::NamespaceNotFound,
                format!("namespace \"{ns}\" not found in the catalog"),
            )
            .with_detail(answer)
            .with_hint(
                "Create the namespace in the catalog, and check that the client may see it: \
                 floe does not create namespaces.",
            ),
            Operation::Config | Operation::ListNamespaces => SinkError::new(
                ErrorKind::InvalidConfig,
                format!("catalog not found {what}: {method} {url}: {answer}"),
            )
            .with_hint("Check the connection's URL and WAREHOUSE."),
        },
        409 if is_type("AlreadyExistsException")
            || matches!(
                operation,
                Operation::CreateNamespace(_) | Operation::CreateTable(..)
            ) =>
        {
            let subject = match operation {
                Operation::CreateNamespace(ns) | Operation::LoadNamespace(ns) => {
                    format!("namespace \"{ns}\"")
                }
                Operation::LoadTable(ns, table)
                | Operation::CreateTable(ns, table)
                | Operation::CommitTable(ns, table)
                | Operation::LoadCredentials(ns, table) => {
                    format!("Iceberg table \"{ns}.{table}\"")
                }
                Operation::Config | Operation::ListNamespaces => "object".into(),
            };
            SinkError::new(
                ErrorKind::AlreadyExists,
                format!("{subject} already exists"),
            )
            .with_detail(answer)
        }
        409 => SinkError::new(
            ErrorKind::CommitConflict,
            format!("catalog reported a conflict {what}: {answer}"),
        ),
        429 | 503 => SinkError::new(
            ErrorKind::Unavailable,
            format!("catalog unavailable {what}: {method} {url}: {answer}"),
        ),
        500..=599 => SinkError::new(
            ErrorKind::Unavailable,
            format!("catalog failed {what}: {method} {url}: {answer}"),
        ),
        400 | 406 | 422 => SinkError::new(
            ErrorKind::UnexpectedResponse,
            format!("catalog rejected the request {what}: {method} {url}: {answer}"),
        ),
        _ => SinkError::new(
            ErrorKind::UnexpectedResponse,
            format!("unexpected catalog answer {what}: {method} {url}: {answer}"),
        ),
    }
}

/// An Iceberg REST catalog client for one connection.
pub struct RestCatalogClient {
    http: HttpClient,
    /// The connection's URL without a trailing slash; routes are `{base}/v1/...`.
    base_url: String,
    warehouse: Option<String>,
    /// The route prefix from `/v1/config`, inserted as given (servers send it encoded).
    prefix: Option<String>,
    /// The merged configuration properties.
    properties: BTreeMap<String, String>,
    auth: Box<dyn AuthSession>,
    /// Whether to ask for vended storage credentials.
    vended_credentials: bool,
}

/// A catalog answer other than success, and the error it means.
struct Refusal {
    status: StatusCode,
    remote: RemoteError,
    error: SinkError,
}

impl fmt::Debug for RestCatalogClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RestCatalogClient")
            .field("base_url", &display_url_str(&self.base_url))
            .field("warehouse", &self.warehouse)
            .field("prefix", &self.prefix)
            .field("properties", &RedactedProperties(&self.properties))
            .field("auth", &self.auth)
            .field("vended_credentials", &self.vended_credentials)
            .finish_non_exhaustive()
    }
}

impl RestCatalogClient {
    /// Connects to a `rest` or `s3tablesrest` catalog: builds the HTTP client and reads
    /// `/v1/config` (which, with OAuth2, also exchanges the credentials for a token).
    /// Assumed-role `s3tablesrest` connections need [`RestCatalogClient::connect_with_provider`].
    pub async fn connect(
        config: &CatalogConfig,
        settings: &HttpSettings,
    ) -> Result<RestCatalogClient, SinkError> {
        RestCatalogClient::connect_inner(config, settings, None).await
    }

    /// Like [`RestCatalogClient::connect`], with the AWS credentials of an `s3tablesrest`
    /// catalog taken from `provider` instead of the connection's static keys.
    pub async fn connect_with_provider(
        config: &CatalogConfig,
        settings: &HttpSettings,
        provider: Arc<dyn AwsCredentialsProvider>,
    ) -> Result<RestCatalogClient, SinkError> {
        RestCatalogClient::connect_inner(config, settings, Some(provider)).await
    }

    async fn connect_inner(
        config: &CatalogConfig,
        settings: &HttpSettings,
        provider: Option<Arc<dyn AwsCredentialsProvider>>,
    ) -> Result<RestCatalogClient, SinkError> {
        let (url, warehouse, auth, vended_credentials): (_, _, Box<dyn AuthSession>, _) =
            match config {
                CatalogConfig::Rest {
                    url,
                    warehouse,
                    credentials,
                    scope,
                    oauth2_server_url,
                    vended_credentials,
                    aws: _,
                } => {
                    check_url("URL", url)?;
                    check_url("OAUTH2 SERVER URL", oauth2_server_url)?;
                    let source = TokenSource::new(
                        oauth2_server_url.clone(),
                        scope.clone(),
                        credentials.clone(),
                    );
                    (
                        url,
                        warehouse.clone(),
                        Box::new(OAuth2Session::new(source, is_unity_url(url))),
                        *vended_credentials,
                    )
                }
                CatalogConfig::S3TablesRest {
                    url,
                    warehouse,
                    aws,
                } => {
                    check_url("URL", url)?;
                    let region = aws
                        .region
                        .clone()
                        .or_else(|| region_from_arn(warehouse).map(str::to_string))
                        .ok_or_else(|| {
                            SinkError::new(
                                ErrorKind::InvalidConfig,
                                "s3tablesrest connections need a REGION on their AWS connection",
                            )
                        })?;
                    let provider = match (provider, &aws.auth) {
                        (Some(provider), _) => provider,
                        (None, AwsAuthConfig::Keys(keys)) => {
                            Arc::new(StaticAwsCredentials::new(keys.clone()))
                        }
                        (None, AwsAuthConfig::AssumeRole { .. }) => {
                            // The caller builds the assumed-role provider (it needs floe's
                            // principal credentials): see `crate::sts::aws_credentials_provider`.
                            return Err(SinkError::new(
                                ErrorKind::InvalidConfig,
                                "the AWS connection assumes a role, but no assumed-role credentials were supplied",
                            ));
                        }
                    };
                    let signer = SigV4Signer::new(S3TABLES_SIGNING_NAME, region, provider);
                    let session = SigV4Session::new(signer);
                    (url, Some(warehouse.clone()), Box::new(session), false)
                }
                CatalogConfig::Local { .. } => {
                    return Err(SinkError::new(
                        ErrorKind::InvalidConfig,
                        "local catalogs are not REST catalogs",
                    ));
                }
            };
        let mut client = RestCatalogClient {
            http: HttpClient::new(settings)?,
            base_url: url.trim_end_matches('/').to_string(),
            warehouse,
            prefix: None,
            properties: BTreeMap::new(),
            auth,
            vended_credentials,
        };
        client.load_config().await?;
        Ok(client)
    }

    /// Reads `GET /v1/config?warehouse=W` and keeps its route prefix and properties.
    async fn load_config(&mut self) -> Result<(), SinkError> {
        let mut url = format!("{}/v1/config", self.base_url);
        if let Some(warehouse) = &self.warehouse {
            url.push_str("?warehouse=");
            url.push_str(&encode_component(warehouse));
        }
        let body = self
            .request(Method::GET, &url, None, &Operation::Config)
            .await?;
        let config: ConfigResponse = parse_json(&body, &Operation::Config, &url)?;
        let (prefix, properties) = merge_config(config, self.warehouse.as_deref());
        tracing::debug!(url = %display_url_str(&self.base_url), prefix = ?prefix, "loaded catalog configuration");
        self.prefix = prefix;
        self.properties = properties;
        Ok(())
    }

    /// The route prefix the catalog configured, if any.
    pub fn prefix(&self) -> Option<&str> {
        self.prefix.as_deref()
    }

    /// The merged catalog configuration (defaults, warehouse, overrides).
    pub fn properties(&self) -> &BTreeMap<String, String> {
        &self.properties
    }

    /// Replaces the OAuth2 client credentials (after ALTER SECRET) and drops the cached
    /// token, so the next request exchanges the new ones.
    pub async fn set_credentials(
        &self,
        credentials: Option<ClientCredentials>,
    ) -> Result<(), SinkError> {
        self.auth.set_client_credentials(credentials).await
    }

    /// Replaces where the AWS credentials of a SigV4-signed catalog come from.
    pub fn set_aws_credentials_provider(
        &self,
        provider: Arc<dyn AwsCredentialsProvider>,
    ) -> Result<(), SinkError> {
        self.auth.set_aws_credentials(provider)
    }

    /// How many token exchanges this client made (0 for SigV4 catalogs).
    pub async fn token_exchanges(&self) -> u64 {
        self.auth.token_exchanges().await
    }

    /// The client authentication the token endpoint accepted last.
    pub async fn client_auth_method(&self) -> Option<ClientAuthMethod> {
        self.auth.client_auth_method().await
    }

    /// Every namespace at the top level (following pagination).
    pub async fn list_namespaces(&self) -> Result<Vec<Namespace>, SinkError> {
        #[derive(Deserialize)]
        struct ListNamespacesResponse {
            namespaces: Vec<Vec<String>>,
            #[serde(rename = "next-page-token", default)]
            next_page_token: Option<String>,
        }
        let mut namespaces = Vec::new();
        let mut page_token: Option<String> = None;
        // A bound, so a server that repeats its page token cannot loop us forever.
        for _ in 0..10_000 {
            let mut url = self.route(&["namespaces"]);
            if let Some(token) = &page_token {
                url.push_str("?pageToken=");
                url.push_str(&encode_component(token));
            }
            let operation = Operation::ListNamespaces;
            let body = self.request(Method::GET, &url, None, &operation).await?;
            let page: ListNamespacesResponse = parse_json(&body, &operation, &url)?;
            for levels in page.namespaces {
                namespaces.push(Namespace::new(levels).map_err(|_| {
                    unexpected(&operation, &url, "a namespace with an empty level")
                })?);
            }
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(token) => page_token = Some(token),
                None => return Ok(namespaces),
            }
        }
        Err(unexpected(
            &Operation::ListNamespaces,
            &self.route(&["namespaces"]),
            "more than 10000 pages",
        ))
    }

    /// Whether the namespace exists (and the client may see it).
    pub async fn namespace_exists(&self, namespace: &Namespace) -> Result<bool, SinkError> {
        let url = self.route(&["namespaces", &namespace.rest_segment()]);
        match self
            .request(
                Method::GET,
                &url,
                None,
                &Operation::LoadNamespace(namespace),
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(err) if err.kind == ErrorKind::NamespaceNotFound => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Creates a namespace with no properties.
    pub async fn create_namespace(&self, namespace: &Namespace) -> Result<(), SinkError> {
        let url = self.route(&["namespaces"]);
        let body = json!({ "namespace": namespace.levels(), "properties": {} });
        self.request(
            Method::POST,
            &url,
            Some(body),
            &Operation::CreateNamespace(namespace),
        )
        .await?;
        Ok(())
    }

    /// Loads a table: its metadata location, metadata and (vended) client configuration.
    pub async fn load_table(
        &self,
        namespace: &Namespace,
        table: &str,
    ) -> Result<LoadTableResponse, SinkError> {
        let url = self.route(&["namespaces", &namespace.rest_segment(), "tables", table]);
        let operation = Operation::LoadTable(namespace, table);
        let body = self.request(Method::GET, &url, None, &operation).await?;
        parse_json(&body, &operation, &url)
    }

    /// Creates a table (`POST .../namespaces/{ns}/tables`) from a `CreateTableRequest` body
    /// and returns it as `loadTable` would.
    pub async fn create_table(
        &self,
        namespace: &Namespace,
        table: &str,
        request: serde_json::Value,
    ) -> Result<LoadTableResponse, SinkError> {
        let url = self.route(&["namespaces", &namespace.rest_segment(), "tables"]);
        let operation = Operation::CreateTable(namespace, table);
        let body = self
            .request(Method::POST, &url, Some(request), &operation)
            .await?;
        parse_json(&body, &operation, &url)
    }

    /// Commits updates to a table (`POST .../namespaces/{ns}/tables/{t}`) from a
    /// `CommitTableRequest` body and returns the new metadata location and metadata. A
    /// refused requirement is [`ErrorKind::CommitConflict`]; a lost answer, a timeout or a
    /// 5xx is [`ErrorKind::Unavailable`], whose outcome is unknown: the caller must reload
    /// the table and look.
    pub async fn commit_table(
        &self,
        namespace: &Namespace,
        table: &str,
        request: serde_json::Value,
    ) -> Result<LoadTableResponse, SinkError> {
        let url = self.route(&["namespaces", &namespace.rest_segment(), "tables", table]);
        let operation = Operation::CommitTable(namespace, table);
        let body = self
            .request(Method::POST, &url, Some(request), &operation)
            .await?;
        parse_json(&body, &operation, &url)
    }

    /// Fresh storage credentials for a table from its credentials endpoint
    /// (`GET .../namespaces/{ns}/tables/{t}/credentials`), or [`TableCredentials::Unsupported`]
    /// when the catalog has no such endpoint.
    pub async fn load_credentials(
        &self,
        namespace: &Namespace,
        table: &str,
    ) -> Result<TableCredentials, SinkError> {
        let url = self.route(&[
            "namespaces",
            &namespace.rest_segment(),
            "tables",
            table,
            "credentials",
        ]);
        let operation = Operation::LoadCredentials(namespace, table);
        match self.send(Method::GET, &url, None, &operation).await? {
            Ok(body) => {
                let response: LoadCredentialsResponse = parse_json(&body, &operation, &url)?;
                Ok(TableCredentials::Vended(response.storage_credentials))
            }
            Err(refusal) if credentials_endpoint_missing(refusal.status, &refusal.remote) => {
                Ok(TableCredentials::Unsupported)
            }
            Err(refusal) => Err(refusal.error),
        }
    }

    /// `{base}/v1/{prefix}/{segments...}` with each segment percent-encoded.
    fn route(&self, segments: &[&str]) -> String {
        let mut url = format!("{}/v1", self.base_url);
        if let Some(prefix) = &self.prefix {
            url.push('/');
            url.push_str(prefix);
        }
        for segment in segments {
            url.push('/');
            url.push_str(&encode_component(segment));
        }
        url
    }

    /// Sends one catalog request and returns the body of its successful answer.
    async fn request(
        &self,
        method: Method,
        url: &str,
        body: Option<serde_json::Value>,
        operation: &Operation<'_>,
    ) -> Result<bytes::Bytes, SinkError> {
        self.send(method, url, body, operation)
            .await?
            .map_err(|refusal| refusal.error)
    }

    /// Sends one catalog request: the body of a successful answer, or the catalog's refusal
    /// (with the error it maps to). Failures without an answer are the outer error.
    async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<serde_json::Value>,
        operation: &Operation<'_>,
    ) -> Result<Result<bytes::Bytes, Refusal>, SinkError> {
        let parsed_url = reqwest::Url::parse(url).context(ErrorKind::InvalidConfig, || {
            format!("invalid catalog URL {}", display_url_str(url))
        })?;
        let shown_url = display_url(&parsed_url);
        let body = body.map(|b| serde_json::to_vec(&b).expect("JSON values serialize"));
        let mut reauthenticated = false;
        loop {
            let answer = match self
                .http
                .send(|| self.prepare(&method, &parsed_url, &body))
                .await
            {
                Ok(answer) => answer,
                Err(SendError::Prepare(err)) => return Err(err),
                Err(SendError::Unanswered { text, error }) => {
                    return Err(SinkError::new(
                        ErrorKind::Unavailable,
                        format!(
                            "catalog unreachable {}: {method} {shown_url}: {text}",
                            operation.describe()
                        ),
                    )
                    .with_source(error));
                }
            };
            let status = answer.response.status();
            let token = answer.prepared.as_deref();
            if status == StatusCode::UNAUTHORIZED
                && !reauthenticated
                && let Some(token) = token
                && self.auth.reauthenticate(token).await
            {
                reauthenticated = true;
                continue;
            }
            let gave_up = answer.gave_up();
            let used = self.auth.used(token);
            let mut secrets = self.auth.secrets().await;
            secrets.extend(answer.prepared.clone());
            let bytes = answer.response.bytes().await.map_err(|err| {
                SinkError::new(
                    ErrorKind::Unavailable,
                    format!(
                        "reading the catalog's answer to {method} {shown_url} failed: {}",
                        transport_error_text(&err.without_url())
                    ),
                )
            })?;
            if status.is_success() {
                return Ok(Ok(bytes));
            }
            let remote = parse_remote_error(&bytes);
            let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
            let remote = RemoteError {
                message: remote.message.map(|m| redact(&m, &secrets)),
                error_type: remote.error_type,
            };
            let mut error = map_error(status, &remote, operation, &method, &shown_url, used);
            if let Some(gave_up) = gave_up {
                error = error.with_detail(gave_up);
            }
            return Ok(Err(Refusal {
                status,
                remote,
                error,
            }));
        }
    }

    /// One attempt's request: headers, body, and the session's authentication. Returns the
    /// bearer token it presented, if any.
    async fn prepare(
        &self,
        method: &Method,
        url: &reqwest::Url,
        body: &Option<Vec<u8>>,
    ) -> Result<(reqwest::Request, Option<String>), SinkError> {
        let mut request = self
            .http
            .client()
            .request(method.clone(), url.clone())
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
        }
        if self.vended_credentials {
            request = request.header(ACCESS_DELEGATION_HEADER, "vended-credentials");
        }
        let mut request = request.build().map_err(|err| {
            SinkError::new(
                ErrorKind::InvalidConfig,
                format!(
                    "cannot build catalog request {method} {}: {}",
                    display_url(url),
                    transport_error_text(&err.without_url())
                ),
            )
        })?;
        let token = self.auth.authenticate(&self.http, &mut request).await?;
        Ok((request, token))
    }
}

fn check_url(option: &str, url: &str) -> Result<(), SinkError> {
    match reqwest::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => Ok(()),
        Ok(_) => Err(SinkError::new(
            ErrorKind::InvalidConfig,
            format!(
                "{option} must be an http or https URL: {}",
                display_url_str(url)
            ),
        )),
        Err(err) => Err(SinkError::new(
            ErrorKind::InvalidConfig,
            format!("invalid {option} {}: {err}", display_url_str(url)),
        )),
    }
}

fn unexpected(operation: &Operation<'_>, url: &str, what: &str) -> SinkError {
    SinkError::new(
        ErrorKind::UnexpectedResponse,
        format!(
            "unexpected catalog answer {} at {}: {what}",
            operation.describe(),
            display_url_str(url)
        ),
    )
}

fn parse_json<T: serde::de::DeserializeOwned>(
    body: &[u8],
    operation: &Operation<'_>,
    url: &str,
) -> Result<T, SinkError> {
    serde_json::from_slice(body).map_err(|err| unexpected(operation, url, &err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_prefers_overrides() {
        let config: ConfigResponse = serde_json::from_value(json!({
            "defaults": {"prefix": "from-defaults", "a": "1", "b": "1"},
            "overrides": {"prefix": "from-overrides", "b": "2", "n": 3}
        }))
        .unwrap();
        let (prefix, properties) = merge_config(config, Some("wh"));
        assert_eq!(prefix.as_deref(), Some("from-overrides"));
        assert_eq!(properties["a"], "1");
        assert_eq!(properties["b"], "2");
        assert_eq!(properties["n"], "3");
        assert_eq!(properties["warehouse"], "wh");
    }

    #[test]
    fn prefix_falls_back_to_defaults_then_none() {
        let config: ConfigResponse =
            serde_json::from_value(json!({"defaults": {"prefix": "/d/"}, "overrides": {}}))
                .unwrap();
        assert_eq!(merge_config(config, None).0.as_deref(), Some("d"));
        let config: ConfigResponse = serde_json::from_value(json!({})).unwrap();
        assert_eq!(merge_config(config, None).0, None);
        let config: ConfigResponse =
            serde_json::from_value(json!({"overrides": {"prefix": ""}})).unwrap();
        assert_eq!(merge_config(config, None).0, None);
        // The warehouse given by the server wins over the one asked for.
        let config: ConfigResponse =
            serde_json::from_value(json!({"overrides": {"warehouse": "s3://x"}})).unwrap();
        assert_eq!(merge_config(config, Some("wh")).1["warehouse"], "s3://x");
    }

    #[test]
    fn remote_errors_parse() {
        let body = br#"{"error": {"message": "Namespace does not exist: x", "type": "NoSuchNamespaceException", "code": 404}}"#;
        assert_eq!(
            parse_remote_error(body),
            RemoteError {
                message: Some("Namespace does not exist: x".into()),
                error_type: Some("NoSuchNamespaceException".into()),
            }
        );
        assert_eq!(
            parse_remote_error(b"Forbidden\n").message.as_deref(),
            Some("Forbidden")
        );
        assert_eq!(parse_remote_error(b"<html>nope</html>").message, None);
        assert_eq!(
            parse_remote_error(br#"{"error": "invalid_token"}"#)
                .message
                .as_deref(),
            Some("invalid_token")
        );
    }

    fn error_for(status: u16, error_type: Option<&str>, operation: &Operation<'_>) -> SinkError {
        map_error(
            StatusCode::from_u16(status).unwrap(),
            &RemoteError {
                message: Some("server says".into()),
                error_type: error_type.map(str::to_string),
            },
            operation,
            &Method::GET,
            "http://catalog/v1/p/namespaces",
            AuthUsed::Bearer,
        )
    }

    #[test]
    fn error_mapping() {
        let ns = Namespace::parse("sales").unwrap();
        let err = error_for(401, None, &Operation::ListNamespaces);
        assert_eq!(err.kind, ErrorKind::Authentication);
        assert_eq!(
            err.message,
            "authentication failed listing namespaces: GET http://catalog/v1/p/namespaces: 401 Unauthorized: server says"
        );
        assert!(!err.retryable);
        assert_eq!(
            error_for(403, None, &Operation::Config).kind,
            ErrorKind::Authentication
        );

        let err = error_for(
            404,
            Some("NoSuchNamespaceException"),
            &Operation::LoadTable(&ns, "orders"),
        );
        assert_eq!(err.kind, ErrorKind::NamespaceNotFound);
        assert_eq!(err.message, "namespace \"sales\" not found in the catalog");
        let err = error_for(
            404,
            Some("NoSuchTableException"),
            &Operation::LoadTable(&ns, "orders"),
        );
        assert_eq!(err.kind, ErrorKind::TableNotFound);
        assert_eq!(err.message, "Iceberg table \"sales.orders\" does not exist");
        let err = error_for(404, None, &Operation::LoadNamespace(&ns));
        assert_eq!(err.kind, ErrorKind::NamespaceNotFound);
        assert_eq!(
            error_for(404, None, &Operation::Config).kind,
            ErrorKind::InvalidConfig
        );

        let err = error_for(409, None, &Operation::CreateNamespace(&ns));
        assert_eq!(err.kind, ErrorKind::AlreadyExists);
        assert_eq!(err.message, "namespace \"sales\" already exists");
        assert_eq!(
            error_for(
                409,
                Some("CommitFailedException"),
                &Operation::LoadTable(&ns, "t")
            )
            .kind,
            ErrorKind::CommitConflict
        );

        for status in [429, 500, 502, 503, 504] {
            let err = error_for(status, None, &Operation::ListNamespaces);
            assert_eq!(err.kind, ErrorKind::Unavailable, "{status}");
            assert!(err.retryable, "{status}");
        }
        assert_eq!(
            error_for(400, None, &Operation::ListNamespaces).kind,
            ErrorKind::UnexpectedResponse
        );
    }

    #[test]
    fn sensitive_properties_are_redacted() {
        let response: LoadTableResponse = serde_json::from_value(json!({
            "metadata-location": "s3://b/m.json",
            "metadata": {},
            "config": {
                "s3.access-key-id": "AKID",
                "s3.secret-access-key": "vended-secret",
                "s3.session-token": "vended-token",
                "s3.endpoint": "http://127.0.0.1:8333"
            },
            "storage-credentials": [
                {"prefix": "s3://b/", "config": {"s3.secret-access-key": "vended-secret"}}
            ]
        }))
        .unwrap();
        let debug = format!("{response:?}");
        assert!(!debug.contains("vended-secret"), "{debug}");
        assert!(!debug.contains("vended-token"), "{debug}");
        assert!(debug.contains("AKID"), "{debug}");
        assert!(debug.contains("http://127.0.0.1:8333"), "{debug}");
        assert_eq!(response.storage_credentials[0].prefix, "s3://b/");

        // The credentials endpoint's answer, as parsed and as handed on.
        let answer: LoadCredentialsResponse = serde_json::from_value(json!({
            "storage-credentials": [{"prefix": "s3://b/t", "config": {
                "s3.access-key-id": "ASIAFRESH",
                "s3.secret-access-key": "fresh-secret",
                "s3.session-token": "fresh-token",
                "s3.session-token-expires-at-ms": "1764460800000"
            }}]
        }))
        .unwrap();
        let credentials = TableCredentials::Vended(answer.storage_credentials);
        let debug = format!("{credentials:?}");
        assert!(!debug.contains("fresh-secret"), "{debug}");
        assert!(!debug.contains("fresh-token"), "{debug}");
        assert!(
            debug.contains("ASIAFRESH") && debug.contains("s3://b/t"),
            "{debug}"
        );
    }

    #[test]
    fn a_missing_credentials_endpoint_is_told_from_a_missing_table() {
        let remote = |error_type: Option<&str>| RemoteError {
            message: Some("no".into()),
            error_type: error_type.map(str::to_string),
        };
        let status = |code| StatusCode::from_u16(code).unwrap();
        // SeaweedFS: 404 NotFound for a route it does not know.
        assert!(credentials_endpoint_missing(
            status(404),
            &remote(Some("NotFound"))
        ));
        assert!(credentials_endpoint_missing(status(404), &remote(None)));
        assert!(credentials_endpoint_missing(status(405), &remote(None)));
        assert!(credentials_endpoint_missing(status(501), &remote(None)));
        assert!(!credentials_endpoint_missing(
            status(404),
            &remote(Some("NoSuchTableException"))
        ));
        assert!(!credentials_endpoint_missing(
            status(404),
            &remote(Some("NoSuchNamespaceException"))
        ));
        for code in [401, 403, 500, 503] {
            assert!(
                !credentials_endpoint_missing(status(code), &remote(None)),
                "{code}"
            );
        }
        let ns = Namespace::parse("sales").unwrap();
        let err = error_for(
            404,
            Some("NoSuchTableException"),
            &Operation::LoadCredentials(&ns, "orders"),
        );
        assert_eq!(err.kind, ErrorKind::TableNotFound);
    }

    #[test]
    fn unity_refusals_name_the_grants() {
        let ns = Namespace::parse("sales").unwrap();
        let err = map_error(
            StatusCode::FORBIDDEN,
            &RemoteError {
                message: Some(
                    "PERMISSION_DENIED: External data access is not enabled for metastore 'm'."
                        .into(),
                ),
                error_type: Some("PermissionDeniedException".into()),
            },
            &Operation::LoadTable(&ns, "orders"),
            &Method::GET,
            "https://w.cloud.databricks.com/api/2.1/unity-catalog/iceberg-rest/v1/catalogs/main/namespaces/sales/tables/orders",
            AuthUsed::UnityBearer,
        );
        assert_eq!(err.kind, ErrorKind::Authentication);
        assert!(
            err.message.starts_with("authentication failed loading table \"sales.orders\"")
                && err.message.ends_with(
                    "403 Forbidden: PERMISSION_DENIED: External data access is not enabled for metastore 'm'."
                ),
            "{}",
            err.message
        );
        let hint = err.hint.unwrap();
        for grant in [
            "External data access",
            "READ METADATA",
            "EXTERNAL USE SCHEMA",
        ] {
            assert!(hint.contains(grant), "{hint}");
        }
        assert!(is_unity_url(
            "https://w.cloud.databricks.com/api/2.1/unity-catalog/iceberg-rest"
        ));
        assert!(is_unity_url(
            "http://127.0.0.1:1/api/2.1/unity-catalog/iceberg-rest/"
        ));
        assert!(!is_unity_url("http://127.0.0.1:8181"));
    }
}
