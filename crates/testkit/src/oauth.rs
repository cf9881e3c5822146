//! OAuth2 client-credentials server (Node `oauth2-mock-server@8`, driven by
//! `peers/oauth_server.mjs`): rejects unknown clients and wrong secrets (401
//! `invalid_client`), records every grant, and issues RS256 JWTs whose lifetime the
//! test sets.
//!
//! ```no_run
//! let oauth = floe_testkit::OAuthServer::builder()
//!     .token_path("/oidc/v1/token")
//!     .token_ttl(std::time::Duration::from_secs(5))
//!     .start();
//! // floe uses oauth.token_url(), oauth.client_id(), oauth.client_secret() ...
//! let grants = oauth.grants();
//! ```

use crate::http;
use crate::process::{PeerProcess, START_TIMEOUT, launch_with_retry};
use serde_json::json;
use std::time::Duration;

/// One request to the token endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub client_id: Option<String>,
    pub scope: Option<String>,
    pub grant_type: Option<String>,
    /// `"basic"` (HTTP Basic) or `"body"` (form fields).
    pub auth: String,
    pub granted: bool,
    /// The OAuth error when refused (`invalid_client`, ...).
    pub error: Option<String>,
    /// The lifetime given, when granted.
    pub expires_in: Option<u64>,
}

pub(crate) fn parse_grants(value: &serde_json::Value) -> Vec<Grant> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .map(|g| Grant {
                    client_id: g["client_id"].as_str().map(str::to_string),
                    scope: g["scope"].as_str().map(str::to_string),
                    grant_type: g["grant_type"].as_str().map(str::to_string),
                    auth: g["auth"].as_str().unwrap_or("body").to_string(),
                    granted: g["granted"].as_bool().unwrap_or(false),
                    error: g["error"].as_str().map(str::to_string),
                    expires_in: g["expires_in"].as_u64(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Options. Defaults: token path `/oidc/v1/token`, one client `floe` with a random
/// secret, tokens live 3600 s.
#[derive(Clone)] // no Debug: it holds secrets
pub struct OAuthServerBuilder {
    token_path: String,
    clients: Vec<(String, String)>,
    token_ttl: Duration,
}

impl OAuthServerBuilder {
    /// The token endpoint's path (must start with `/`).
    pub fn token_path(mut self, path: &str) -> Self {
        assert!(path.starts_with('/'), "token path must start with /");
        self.token_path = path.to_string();
        self
    }
    /// Adds a client. Without any, one client `floe` with a random secret is made.
    pub fn client(mut self, id: &str, secret: &str) -> Self {
        self.clients.push((id.to_string(), secret.to_string()));
        self
    }
    /// Lifetime of issued tokens (`expires_in` and the JWT's `exp`), whole seconds.
    pub fn token_ttl(mut self, ttl: Duration) -> Self {
        self.token_ttl = ttl;
        self
    }
    pub fn start(self) -> OAuthServer {
        OAuthServer::launch(self)
    }
}

/// A running OAuth2 server. Killed when dropped.
pub struct OAuthServer {
    process: PeerProcess,
    port: u16,
    token_path: String,
    clients: Vec<(String, String)>,
    _dir: tempfile::TempDir,
}

impl OAuthServer {
    pub fn builder() -> OAuthServerBuilder {
        OAuthServerBuilder {
            token_path: "/oidc/v1/token".into(),
            clients: Vec::new(),
            token_ttl: Duration::from_secs(3600),
        }
    }

    /// Default settings.
    pub fn start() -> OAuthServer {
        Self::builder().start()
    }

    fn launch(mut opts: OAuthServerBuilder) -> OAuthServer {
        if opts.clients.is_empty() {
            opts.clients.push(("floe".into(), crate::random_hex(16)));
        }
        launch_with_retry(|| Self::try_launch(&opts))
    }

    fn try_launch(opts: &OAuthServerBuilder) -> Result<OAuthServer, (String, bool)> {
        let module = crate::require_peer(
            "node/node_modules/oauth2-mock-server/dist/index.mjs",
            "oauth2-mock-server (npm)",
        );
        let dir = tempfile::Builder::new()
            .prefix("floe-oauth-")
            .tempdir()
            .expect("temp dir");
        let port = crate::free_port();
        let clients: serde_json::Map<String, serde_json::Value> = opts
            .clients
            .iter()
            .map(|(id, secret)| (id.clone(), json!(secret)))
            .collect();
        let cfg = dir.path().join("oauth.json");
        std::fs::write(
            &cfg,
            serde_json::to_vec(&json!({
                "port": port,
                "token_path": opts.token_path,
                "clients": clients,
                "token_ttl": opts.token_ttl.as_secs(),
                "module": module,
            }))
            .expect("json"),
        )
        .expect("write oauth config");
        let node = which("node").unwrap_or_else(|| {
            panic!("node is not on PATH: the OAuth2 server needs Node.js 20 (see scripts/install-peers)")
        });
        let script = crate::scripts_dir().join("oauth_server.mjs");
        let mut process = PeerProcess::spawn(
            "oauth2",
            &node,
            &[script.display().to_string(), cfg.display().to_string()],
            &[],
            dir.path(),
        );
        let base = format!("http://127.0.0.1:{port}");
        let ready = process.try_wait_until(START_TIMEOUT, || {
            http::get(&format!("{base}/.well-known/openid-configuration"))
                .timeout(Duration::from_secs(2))
                .send()
                .map_err(|e| e.to_string())
                .and_then(|r| {
                    if r.status == 200 {
                        Ok(())
                    } else {
                        Err(format!("status {}", r.status))
                    }
                })
        });
        if let Err(message) = ready {
            return Err((message, process.port_conflict()));
        }
        Ok(OAuthServer {
            process,
            port,
            token_path: opts.token_path.clone(),
            clients: opts.clients.clone(),
            _dir: dir,
        })
    }

    /// Base URL (issuer), e.g. `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
    /// The token endpoint.
    pub fn token_url(&self) -> String {
        format!("{}{}", self.url(), self.token_path)
    }
    /// The first client's id.
    pub fn client_id(&self) -> &str {
        &self.clients[0].0
    }
    /// The first client's secret.
    pub fn client_secret(&self) -> &str {
        &self.clients[0].1
    }
    /// Every token request so far, in order.
    pub fn grants(&self) -> Vec<Grant> {
        parse_grants(
            &http::get(&format!("{}/_testkit/grants", self.url()))
                .send()
                .expect("oauth grants")
                .json(),
        )
    }
    /// Lifetime of tokens issued from now on.
    pub fn set_token_ttl(&self, ttl: Duration) {
        let resp = http::post(&format!(
            "{}/_testkit/token-ttl?seconds={}",
            self.url(),
            ttl.as_secs()
        ))
        .send()
        .expect("set token ttl");
        assert_eq!(resp.status, 200);
    }
    /// A client-credentials token request (form body) for the first client.
    pub fn request_token(&self, scope: Option<&str>) -> http::Response {
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("client_id", self.client_id()),
            ("client_secret", self.client_secret()),
        ];
        if let Some(scope) = scope {
            form.push(("scope", scope));
        }
        http::post(&self.token_url())
            .form(&form)
            .send()
            .expect("token request")
    }
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(program))
            .find(|p| p.is_file())
    })
}
