//! A Unity-Catalog-shaped front for SeaweedFS's Iceberg REST catalog
//! (`peers/fronts.py unity`).
//!
//! - REST base: `url()` = `http://127.0.0.1:PORT/api/2.1/unity-catalog/iceberg-rest`
//!   (then `/v1/config?warehouse=<catalog name>` answers `overrides.prefix =
//!   catalogs/<name>`, and `/v1/catalogs/<name>/namespaces/...` reaches SeaweedFS's
//!   table bucket).
//! - OAuth2 at `token_url()` (`/oidc/v1/token`): client credentials, form or Basic; only
//!   scope `all-apis` (else 400 `invalid_scope`); wrong secret 401 `invalid_client`.
//!   The front's tokens are its own; it holds SeaweedFS's key pair itself.
//! - Vended credentials only: storage credentials come back only to a request with
//!   `X-Iceberg-Access-Delegation: vended-credentials`.
//! - The table credentials endpoint (`GET .../tables/{t}/credentials`, which SeaweedFS
//!   lacks) answers `{"storage-credentials": [...]}` with fresh credentials, as Unity does;
//!   [`UnityFront::credentials_served`] counts its answers.
//! - Short-lived credentials ([`UnityFrontBuilder::credential_ttl`]): SeaweedFS vends for at
//!   least 900 s, so the front declares a shorter expiry and enforces it on its own S3 port,
//!   which the vended `s3.endpoint` names: keys past their declared expiry get 403
//!   `ExpiredToken` there.
//! - Grants: [`UnityFront::set_external_data_access`] (the metastore toggle) and
//!   [`UnityFront::set_external_use_schema`] make catalog requests fail with 403
//!   `PERMISSION_DENIED`, as Unity does when the service principal lacks them.
//!
//! ```no_run
//! let sw = floe_testkit::seaweedfs_shared();
//! let uc = floe_testkit::UnityFront::start(sw);
//! // CREATE CONNECTION ... URL uc.url(), OAUTH2 SERVER URL uc.token_url(),
//! // CLIENT ID uc.client_id(), SECRET uc.client_secret(), SCOPE 'all-apis',
//! // WAREHOUSE uc.catalog_name()
//! ```

use crate::http;
use crate::oauth::{Grant, parse_grants};
use crate::process::{PeerProcess, launch_with_retry, start_front};
use crate::seaweedfs::SeaweedFs;
use serde_json::{Value, json};
use std::time::Duration;

pub const BASE_PATH: &str = "/api/2.1/unity-catalog/iceberg-rest";
/// The only scope the token endpoint grants.
pub const SCOPE: &str = "all-apis";

/// Options. Defaults: catalog `main`, generated client id and secret, tokens live 3600 s.
#[derive(Clone)] // no Debug: it holds secrets
pub struct UnityFrontBuilder {
    /// The front's port (a free one when `None`).
    port: Option<u16>,
    catalog_name: String,
    client_id: String,
    client_secret: String,
    token_ttl: Duration,
    credential_ttl: Option<Duration>,
    omit_credential_expiry: bool,
}

impl UnityFrontBuilder {
    /// Listens on `port` instead of a free port (for `scripts/peers`, whose printed
    /// statements name it).
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }
    /// The catalog name (the warehouse clients ask for).
    pub fn catalog_name(mut self, name: &str) -> Self {
        self.catalog_name = name.to_string();
        self
    }
    pub fn client(mut self, id: &str, secret: &str) -> Self {
        self.client_id = id.to_string();
        self.client_secret = secret.to_string();
        self
    }
    pub fn token_ttl(mut self, ttl: Duration) -> Self {
        self.token_ttl = ttl;
        self
    }
    /// Vended credentials are declared to expire `ttl` after they are handed out, and the
    /// front's S3 port refuses them afterwards (SeaweedFS's own last at least 900 s).
    pub fn credential_ttl(mut self, ttl: Duration) -> Self {
        self.credential_ttl = Some(ttl);
        self
    }
    /// Vended credentials come without `s3.session-token-expires-at-ms`.
    pub fn omit_credential_expiry(mut self) -> Self {
        self.omit_credential_expiry = true;
        self
    }
    /// Starts the front in front of `seaweedfs` (which must outlive it).
    pub fn start(self, seaweedfs: &SeaweedFs) -> UnityFront {
        UnityFront::launch(self, seaweedfs)
    }
}

/// A running Unity-shaped front. Killed when dropped.
pub struct UnityFront {
    process: PeerProcess,
    port: u16,
    /// The S3 port enforcing short credential lifetimes, with `credential_ttl`.
    s3_port: Option<u16>,
    catalog_name: String,
    client_id: String,
    client_secret: String,
    _dir: tempfile::TempDir,
}

impl UnityFront {
    pub fn builder() -> UnityFrontBuilder {
        UnityFrontBuilder {
            port: None,
            catalog_name: "main".into(),
            client_id: format!("uc-client-{}", crate::random_hex(4)),
            client_secret: crate::random_hex(16),
            token_ttl: Duration::from_secs(3600),
            credential_ttl: None,
            omit_credential_expiry: false,
        }
    }

    /// Default settings, in front of `seaweedfs`.
    pub fn start(seaweedfs: &SeaweedFs) -> UnityFront {
        Self::builder().start(seaweedfs)
    }

    fn launch(opts: UnityFrontBuilder, sw: &SeaweedFs) -> UnityFront {
        launch_with_retry(|| Self::try_launch(&opts, sw))
    }

    fn try_launch(opts: &UnityFrontBuilder, sw: &SeaweedFs) -> Result<UnityFront, (String, bool)> {
        let dir = tempfile::Builder::new()
            .prefix("floe-unity-")
            .tempdir()
            .expect("temp dir");
        let port = opts.port.unwrap_or_else(crate::free_port);
        let s3_port = opts.credential_ttl.map(|_| crate::free_port());
        let process = start_front(
            "unity",
            "unity-front",
            &json!({
                "port": port,
                "upstream": sw.catalog_url(),
                "upstream_client_id": sw.access_key(),
                "upstream_client_secret": sw.secret_key(),
                "client_id": opts.client_id,
                "client_secret": opts.client_secret,
                "token_ttl": opts.token_ttl.as_secs(),
                "credential_ttl": opts.credential_ttl.map(|ttl| ttl.as_secs_f64()),
                "omit_credential_expiry": opts.omit_credential_expiry,
                "s3_port": s3_port,
                "s3_upstream": sw.s3_endpoint(),
                "catalogs": {opts.catalog_name.clone(): sw.table_bucket()},
            }),
            dir.path(),
            &format!("http://127.0.0.1:{port}/_testkit/grants"),
        )?;
        Ok(UnityFront {
            process,
            port,
            s3_port,
            catalog_name: opts.catalog_name.clone(),
            client_id: opts.client_id.clone(),
            client_secret: opts.client_secret.clone(),
            _dir: dir,
        })
    }

    fn root(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
    /// The Iceberg REST base URL (`.../api/2.1/unity-catalog/iceberg-rest`).
    pub fn url(&self) -> String {
        format!("{}{BASE_PATH}", self.root())
    }
    /// The OAuth2 token endpoint (`/oidc/v1/token`).
    pub fn token_url(&self) -> String {
        format!("{}/oidc/v1/token", self.root())
    }
    /// The catalog name, used as the warehouse.
    pub fn catalog_name(&self) -> &str {
        &self.catalog_name
    }
    /// The route prefix `GET /v1/config` answers (`catalogs/<name>`).
    pub fn prefix(&self) -> String {
        format!("catalogs/{}", self.catalog_name)
    }
    pub fn client_id(&self) -> &str {
        &self.client_id
    }
    pub fn client_secret(&self) -> &str {
        &self.client_secret
    }
    /// `all-apis`.
    pub fn scope(&self) -> &'static str {
        SCOPE
    }
    /// A token (scope `all-apis`) for this front.
    pub fn token(&self) -> String {
        let resp = http::post(&self.token_url())
            .form(&[
                ("grant_type", "client_credentials"),
                ("client_id", &self.client_id),
                ("client_secret", &self.client_secret),
                ("scope", SCOPE),
            ])
            .send()
            .expect("unity token");
        assert_eq!(resp.status, 200, "unity token: {}", resp.text());
        resp.json()["access_token"]
            .as_str()
            .expect("access_token")
            .to_string()
    }
    /// Every token request so far.
    pub fn grants(&self) -> Vec<Grant> {
        parse_grants(
            &http::get(&format!("{}/_testkit/grants", self.root()))
                .send()
                .expect("unity grants")
                .json(),
        )
    }
    /// Every catalog request so far: `{"method", "path" (after the base path),
    /// "access_delegation" (header value or null)}`.
    pub fn requests(&self) -> Vec<Value> {
        http::get(&format!("{}/_testkit/requests", self.root()))
            .send()
            .expect("unity requests")
            .json()
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
    /// Lifetime of tokens issued from now on.
    pub fn set_token_ttl(&self, ttl: Duration) {
        let resp = http::post(&format!(
            "{}/_testkit/token-ttl?seconds={}",
            self.root(),
            ttl.as_secs()
        ))
        .send()
        .expect("set token ttl");
        assert_eq!(resp.status, 200);
    }
    /// Invalidates every token issued so far: requests carrying one get 401 (a client
    /// must fetch a new token).
    pub fn revoke_tokens(&self) {
        let resp = http::post(&format!("{}/_testkit/revoke-tokens", self.root()))
            .send()
            .expect("revoke tokens");
        assert_eq!(resp.status, 200);
    }
    /// The front's S3 port (`http://127.0.0.1:P`), which vended credentials name when
    /// their lifetime is the front's ([`UnityFrontBuilder::credential_ttl`]).
    pub fn s3_endpoint(&self) -> Option<String> {
        self.s3_port.map(|port| format!("http://127.0.0.1:{port}"))
    }
    /// What the front counted so far.
    pub fn counters(&self) -> FrontCounters {
        let value = http::get(&format!("{}/_testkit/counters", self.root()))
            .send()
            .expect("unity counters")
            .json();
        serde_json::from_value(value).expect("unity counters")
    }
    /// Answers of the table credentials endpoint so far.
    pub fn credentials_served(&self) -> u64 {
        self.counters().credentials_served
    }
    /// The metastore's "External data access" toggle: while off, every catalog request
    /// gets 403 `PERMISSION_DENIED` (the token endpoint still grants tokens).
    pub fn set_external_data_access(&self, enabled: bool) {
        let resp = http::post(&format!(
            "{}/_testkit/external-access?enabled={enabled}",
            self.root()
        ))
        .send()
        .expect("set external data access");
        assert_eq!(resp.status, 200);
    }
    /// Grants or revokes the service principal's EXTERNAL USE SCHEMA on a schema: while
    /// revoked, every catalog request on it gets 403 `PERMISSION_DENIED`.
    pub fn set_external_use_schema(&self, namespace: &str, granted: bool) {
        let resp = http::post(&format!(
            "{}/_testkit/schema-grant?namespace={}&granted={granted}",
            self.root(),
            http::form_encode(namespace)
        ))
        .send()
        .expect("set schema grant");
        assert_eq!(resp.status, 200);
    }
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }
}

/// The front's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
pub struct FrontCounters {
    /// Answers of the table credentials endpoint.
    pub credentials_served: u64,
    /// Answers that carried vended credentials (loadTable and the credentials endpoint).
    pub credentials_vended: u64,
    /// Requests to the front's S3 port.
    pub s3_requests: u64,
    /// Requests the S3 port refused because their key was past its declared expiry.
    pub s3_expired_refused: u64,
    /// Catalog requests refused with `PERMISSION_DENIED` (grants).
    pub permission_denied: u64,
}
