//! A Postgres connection's settings (what `CREATE CONNECTION ... TO POSTGRES` holds, with
//! its secrets resolved) and opening query connections with them.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use floe_repr::SqlState;
use serde::{Deserialize, Serialize};

use crate::error::{ErrorKind, PgError};
use crate::tls;

/// `SSL MODE`, with libpq's meaning (see [`crate::tls`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SslMode {
    #[default]
    Disable,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SslMode {
    type Err = PgError;

    /// Case-insensitive, as option values naming a kind are.
    fn from_str(s: &str) -> Result<SslMode, PgError> {
        match s.to_ascii_lowercase().as_str() {
            "disable" => Ok(SslMode::Disable),
            "require" => Ok(SslMode::Require),
            "verify-ca" | "verify_ca" => Ok(SslMode::VerifyCa),
            "verify-full" | "verify_full" => Ok(SslMode::VerifyFull),
            _ => Err(PgError::new(
                ErrorKind::InvalidConfig,
                SqlState::INVALID_PARAMETER_VALUE,
                format!("invalid SSL MODE: {s}"),
            )
            .with_hint("Use 'disable', 'require', 'verify-ca' or 'verify-full'.")),
        }
    }
}

/// Everything needed to connect. Secrets (password, key) are values here: the caller
/// resolves them just before connecting and never stores this struct.
#[derive(Clone, PartialEq, Eq)]
pub struct PgConnectionConfig {
    pub host: String,
    /// Default 5432.
    pub port: u16,
    pub user: String,
    pub password: Option<String>,
    /// Default `postgres`.
    pub database: String,
    pub ssl_mode: SslMode,
    /// `SSL CERTIFICATE AUTHORITY`: PEM certificates to trust (verify-ca, verify-full).
    pub ssl_root_certificate: Option<String>,
    /// `SSL CERTIFICATE` and `SSL KEY`: a client certificate chain and its key (PEM).
    pub ssl_certificate: Option<String>,
    pub ssl_key: Option<String>,
    /// How long to wait for the server to answer a connection attempt.
    pub connect_timeout: Duration,
}

impl PgConnectionConfig {
    /// A plain-text connection to `host` with the defaults of `CREATE CONNECTION`.
    pub fn new(host: impl Into<String>, user: impl Into<String>) -> PgConnectionConfig {
        PgConnectionConfig {
            host: host.into(),
            port: 5432,
            user: user.into(),
            password: None,
            database: "postgres".to_string(),
            ssl_mode: SslMode::Disable,
            ssl_root_certificate: None,
            ssl_certificate: None,
            ssl_key: None,
            connect_timeout: Duration::from_secs(30),
        }
    }

    /// `host:port/database` for messages (never the password).
    pub fn address(&self) -> String {
        format!("{}:{}/{}", self.host, self.port, self.database)
    }
}

impl fmt::Debug for PgConnectionConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The password and key are secrets: never printed.
        f.debug_struct("PgConnectionConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "********"))
            .field("database", &self.database)
            .field("ssl_mode", &self.ssl_mode)
            .field("ssl_root_certificate", &self.ssl_root_certificate.is_some())
            .field("ssl_certificate", &self.ssl_certificate.is_some())
            .field("ssl_key", &self.ssl_key.as_ref().map(|_| "********"))
            .finish()
    }
}

/// Session settings both kinds of connection use, so values print the same way in the
/// snapshot (COPY) and in the replication stream: an UPDATE's old row must decode to
/// exactly the row stored before, or its retraction would not match.
pub(crate) const SESSION_SETTINGS: &[(&str, &str)] = &[
    ("client_encoding", "UTF8"),
    ("DateStyle", "ISO, MDY"),
    ("IntervalStyle", "postgres"),
    ("TimeZone", "UTC"),
    ("extra_float_digits", "3"),
    ("bytea_output", "hex"),
];

/// The settings as a startup `options` value (`-c name=value ...`).
pub(crate) fn session_options() -> String {
    SESSION_SETTINGS
        .iter()
        .map(|(name, value)| format!("-c {name}={}", value.replace(' ', "\\ ")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Opens a query connection; its driver runs on a task of its own until the client is
/// dropped or the connection breaks.
pub async fn connect(
    config: &PgConnectionConfig,
    application_name: &str,
) -> Result<tokio_postgres::Client, PgError> {
    let mut pg = tokio_postgres::Config::new();
    pg.host(&config.host)
        .port(config.port)
        .user(&config.user)
        .dbname(&config.database)
        .application_name(application_name)
        .options(session_options())
        .connect_timeout(config.connect_timeout)
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(30));
    if let Some(password) = &config.password {
        pg.password(password);
    }
    let client = match tls::client_config(config)? {
        None => {
            pg.ssl_mode(tokio_postgres::config::SslMode::Disable);
            let (client, connection) = pg.connect(tokio_postgres::NoTls).await?;
            tokio::spawn(drive(connection));
            client
        }
        Some(tls_config) => {
            pg.ssl_mode(tokio_postgres::config::SslMode::Require);
            let (client, connection) = pg.connect(tls::MakeRustls { config: tls_config }).await?;
            tokio::spawn(drive(connection));
            client
        }
    };
    Ok(client)
}

/// Runs a connection's driver; its end (closed or broken) shows up as errors of the
/// client's next calls.
async fn drive<F>(connection: F)
where
    F: std::future::Future<Output = Result<(), tokio_postgres::Error>>,
{
    if let Err(error) = connection.await {
        tracing::debug!(%error, "postgres connection ended");
    }
}
