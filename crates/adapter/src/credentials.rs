//! The server's credentials for connections: HTTP settings (extra CA bundle, refresh
//! margins), the AWS principal floe assumes roles from, and one cached, refreshing
//! assumed-role provider per AWS connection.
//!
//! The principal comes from the AWS SDK's standard credential chain of the server's
//! environment (environment variables, profile files, web identity, container credentials,
//! instance metadata; see `floe_sink::sts`). When `--aws-principal` is not set, floe asks
//! STS `GetCallerIdentity` once at start-up (at `AWS_ENDPOINT_URL_STS`, else
//! `AWS_ENDPOINT_URL`, else the regional endpoint of `AWS_REGION`) and shows the answer as
//! the principal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use floe_sink::MaintenanceSettings;
use floe_sink::sink::{SinkConnection, SinkSettings};
use floe_sink::sts::{
    AwsEnvironment, PrincipalSource, StsSettings, aws_credentials_provider, validate_aws_connection,
};
use floe_sink::{
    AwsAuthConfig, AwsConfig, AwsCredentialsProvider, AwsKeys, CatalogConfig, HttpSettings,
    SinkError,
};
use tracing::{info, warn};

/// Refresh margins and session lifetimes (server settings, so tests can use short ones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialSettings {
    /// An OAuth2 token is exchanged again this long before it expires.
    pub token_refresh_margin: Duration,
    /// Vended storage credentials and assumed-role sessions are renewed this long before
    /// they expire.
    pub credential_refresh_margin: Duration,
    /// Vended storage credentials without an expiry are renewed this often.
    pub credential_refresh_interval: Duration,
    /// The lifetime floe asks STS for when it assumes a role (at least 900 s).
    pub aws_session_duration: Duration,
    /// How often a sink's maintenance looks at its table (a compaction step at most this
    /// often). Not a credential: the one other setting of the flags sink tasks run with.
    pub sink_maintenance_period: Duration,
}

impl Default for CredentialSettings {
    fn default() -> CredentialSettings {
        CredentialSettings {
            token_refresh_margin: HttpSettings::default().token_refresh_margin,
            credential_refresh_margin: SinkSettings::default().credential_refresh_margin,
            credential_refresh_interval: HttpSettings::default().credential_refresh_interval,
            aws_session_duration: StsSettings::default().session_duration,
            sink_maintenance_period: MaintenanceSettings::default().min_period,
        }
    }
}

/// What identifies an assumed-role session: one provider (and one cached session) each.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RoleKey {
    endpoint: Option<String>,
    region: Option<String>,
    arn: String,
    session_name: String,
    external_id: String,
}

/// Credentials and settings shared by validation, purification and the sink tasks.
pub struct Credentials {
    http: HttpSettings,
    sink: SinkSettings,
    sts: StsSettings,
    /// floe's own AWS identity and the SDK configuration of its environment.
    aws: Arc<AwsEnvironment>,
    /// The principal ARN: `--aws-principal`, else what GetCallerIdentity answered.
    principal: OnceLock<String>,
    roles: Mutex<HashMap<RoleKey, Arc<dyn AwsCredentialsProvider>>>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("http", &self.http)
            .field("sts", &self.sts)
            .field("principal", &self.principal.get())
            .field("aws", &self.aws)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// Settings from the server's flags; the principal from the standard AWS chain.
    pub fn new(
        extra_ca_bundle: Option<std::path::PathBuf>,
        aws_principal: Option<String>,
        settings: &CredentialSettings,
    ) -> Arc<Credentials> {
        Credentials::with_principal(
            extra_ca_bundle,
            aws_principal,
            settings,
            PrincipalSource::Chain,
        )
    }

    /// [`Credentials::new`] with fixed principal keys, or none.
    pub fn with_principal_keys(
        extra_ca_bundle: Option<std::path::PathBuf>,
        aws_principal: Option<String>,
        settings: &CredentialSettings,
        principal_keys: Option<AwsKeys>,
    ) -> Arc<Credentials> {
        let source = match principal_keys {
            Some(keys) => PrincipalSource::Keys(keys),
            None => PrincipalSource::None,
        };
        Credentials::with_principal(extra_ca_bundle, aws_principal, settings, source)
    }

    fn with_principal(
        extra_ca_bundle: Option<std::path::PathBuf>,
        aws_principal: Option<String>,
        settings: &CredentialSettings,
        source: PrincipalSource,
    ) -> Arc<Credentials> {
        let http = HttpSettings {
            extra_ca_bundle,
            token_refresh_margin: settings.token_refresh_margin,
            credential_refresh_interval: settings.credential_refresh_interval,
            ..HttpSettings::default()
        };
        let sink = SinkSettings {
            http: http.clone(),
            credential_refresh_margin: settings.credential_refresh_margin,
            maintenance: MaintenanceSettings {
                min_period: settings.sink_maintenance_period,
                ..MaintenanceSettings::default()
            },
            ..SinkSettings::default()
        };
        let sts = StsSettings {
            session_duration: settings
                .aws_session_duration
                .max(floe_sink::sts::MIN_SESSION_DURATION),
            refresh_margin: settings.credential_refresh_margin,
        };
        let principal = OnceLock::new();
        if let Some(arn) = aws_principal.filter(|a| !a.is_empty()) {
            let _ = principal.set(arn);
        }
        let aws = Arc::new(AwsEnvironment::new(source, &http));
        Arc::new(Credentials {
            http,
            sink,
            sts,
            aws,
            principal,
            roles: Mutex::new(HashMap::new()),
        })
    }

    pub fn http(&self) -> &HttpSettings {
        &self.http
    }

    /// The settings sink tasks run with.
    pub fn sink_settings(&self) -> SinkSettings {
        self.sink.clone()
    }

    /// The AWS principal floe assumes roles from, if known.
    pub fn principal(&self) -> Option<&str> {
        self.principal.get().map(String::as_str)
    }

    /// Asks STS who floe's own identity is, once, when no principal was configured.
    pub async fn discover_principal(self: Arc<Self>) {
        if self.principal.get().is_some() {
            return;
        }
        if !self.aws.has_principal() {
            info!("no AWS identity: the AWS principal stays unknown");
            return;
        }
        match self.aws.caller_identity().await {
            Ok(identity) => {
                info!(principal = %identity.arn, "AWS principal from STS GetCallerIdentity");
                let _ = self.principal.set(identity.arn);
            }
            Err(err) => {
                warn!(error = %err.message, "the AWS principal stays unknown");
            }
        }
    }

    /// The credentials of an AWS connection: its static keys, or the (cached, refreshing)
    /// session of the role it assumes.
    pub fn aws_provider(
        &self,
        config: &AwsConfig,
    ) -> Result<Arc<dyn AwsCredentialsProvider>, SinkError> {
        let AwsAuthConfig::AssumeRole {
            arn,
            session_name,
            external_id,
        } = &config.auth
        else {
            return aws_credentials_provider(config, &self.aws, &self.sts);
        };
        let key = RoleKey {
            endpoint: config.endpoint.clone(),
            region: config.region.clone(),
            arn: arn.clone(),
            session_name: session_name.clone(),
            external_id: external_id.clone(),
        };
        let mut roles = self.roles.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(provider) = roles.get(&key) {
            return Ok(provider.clone());
        }
        let provider = aws_credentials_provider(config, &self.aws, &self.sts)?;
        roles.insert(key, provider.clone());
        Ok(provider)
    }

    /// The assumed-role credentials a catalog connection needs (`None` when its AWS
    /// connection, if any, has static keys: the sink crate uses those directly).
    pub fn catalog_aws_provider(
        &self,
        catalog: &CatalogConfig,
    ) -> Result<Option<Arc<dyn AwsCredentialsProvider>>, SinkError> {
        match catalog.aws() {
            Some(aws) if matches!(aws.auth, AwsAuthConfig::AssumeRole { .. }) => {
                self.aws_provider(aws).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// What a sink task (or CREATE SINK's check) connects with.
    pub fn sink_connection(&self, catalog: CatalogConfig) -> Result<SinkConnection, SinkError> {
        let aws_credentials = self.catalog_aws_provider(&catalog)?;
        Ok(SinkConnection {
            catalog,
            aws_credentials,
        })
    }

    /// Validates an Iceberg catalog connection: connect and list namespaces.
    pub async fn validate_catalog(&self, catalog: &CatalogConfig) -> Result<(), SinkError> {
        let provider = self.catalog_aws_provider(catalog)?;
        floe_sink::validate_catalog_with_credentials(catalog, &self.http, provider)
            .await
            .map(|_| ())
    }

    /// Validates an AWS connection (see [`validate_aws_connection`]).
    pub async fn validate_aws(&self, config: &AwsConfig) -> Result<(), SinkError> {
        validate_aws_connection(config, &self.aws).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(external_id: &str) -> AwsConfig {
        AwsConfig {
            endpoint: Some("http://127.0.0.1:9".into()),
            region: Some("us-east-1".into()),
            auth: AwsAuthConfig::AssumeRole {
                arn: "arn:aws:iam::1:role/r".into(),
                session_name: "floe".into(),
                external_id: external_id.into(),
            },
        }
    }

    #[test]
    fn settings_reach_http_sinks_and_sts() {
        let settings = CredentialSettings {
            token_refresh_margin: Duration::from_secs(7),
            credential_refresh_margin: Duration::from_secs(890),
            credential_refresh_interval: Duration::from_secs(42),
            aws_session_duration: Duration::from_secs(60),
            sink_maintenance_period: Duration::from_secs(5),
        };
        let credentials = Credentials::with_principal_keys(None, None, &settings, None);
        assert_eq!(
            credentials.http().token_refresh_margin,
            Duration::from_secs(7)
        );
        assert_eq!(
            credentials.sink_settings().credential_refresh_margin,
            Duration::from_secs(890)
        );
        assert_eq!(
            credentials.sink_settings().http.credential_refresh_interval,
            Duration::from_secs(42)
        );
        assert_eq!(credentials.sts.session_duration, Duration::from_secs(900));
        assert_eq!(
            credentials.sink_settings().maintenance.min_period,
            Duration::from_secs(5)
        );
        assert_eq!(credentials.principal(), None);
        let credentials = Credentials::with_principal_keys(
            None,
            Some("arn:aws:iam::1:user/floe".into()),
            &settings,
            None,
        );
        assert_eq!(credentials.principal(), Some("arn:aws:iam::1:user/floe"));
    }

    #[test]
    fn roles_need_principal_keys_and_share_sessions() {
        let settings = CredentialSettings::default();
        let without = Credentials::with_principal_keys(None, None, &settings, None);
        let err = without.aws_provider(&role("mz_e_u1")).unwrap_err();
        assert!(
            err.message.contains("no AWS credentials"),
            "{}",
            err.message
        );
        let keys = AwsKeys {
            access_key_id: "AKID".into(),
            secret_access_key: "secret-of-the-principal".into(),
            session_token: None,
        };
        let with = Credentials::with_principal_keys(None, None, &settings, Some(keys));
        let a = with.aws_provider(&role("mz_e_u1")).unwrap();
        let b = with.aws_provider(&role("mz_e_u1")).unwrap();
        let c = with.aws_provider(&role("mz_e_u2")).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert!(!format!("{with:?}").contains("secret-of-the-principal"));
    }
}
