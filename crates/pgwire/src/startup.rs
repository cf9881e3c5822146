//! Connection start-up: TLS enforcement, client certificates, authentication
//! (none, cleartext password, SCRAM-SHA-256), then the session and its parameters.
//!
//! pgwire's [`AuthDriver`] runs the mechanisms; this handler decides around it:
//! a client without TLS under `--tls-mode require` is refused before any
//! authentication, every failed login is answered the same way (`28P01`, whether
//! or not the role exists) after the throttle's delay, and only a verified client
//! gets a session.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use futures::Sink;
use pgwire::api::auth::cleartext::CleartextPasswordAuth;
use pgwire::api::auth::driver::AuthOutcome;
use pgwire::api::auth::mechanism::{AuthMechanism, AuthMechanismFactory};
use pgwire::api::auth::sasl::scram::{ScramAuth, ScramSecret};
use pgwire::api::auth::{
    AuthDriver, AuthSource, DefaultServerParameterProvider, LoginInfo, Password,
    ServerParameterProvider, StartupHandler,
};
use pgwire::api::{ClientInfo, ConnectionManager};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use tokio::sync::Mutex;

use floe_adapter::Session;
use floe_adapter::auth::{AuthMethod, Authenticator};
use floe_adapter::metrics::AdapterMetrics;

use crate::tls::{TlsMode, TlsState, certificate_common_name};

/// How the wire admits clients.
#[derive(Debug, Clone)]
pub struct WireSecurity {
    pub tls_mode: TlsMode,
    /// The certificates, when `tls_mode` uses TLS.
    pub tls: Option<Arc<crate::tls::ServerTls>>,
    pub authenticator: Arc<Authenticator>,
}

impl WireSecurity {
    /// Any client, no TLS: the default on loopback.
    pub fn open() -> WireSecurity {
        WireSecurity {
            tls_mode: TlsMode::Disable,
            tls: None,
            authenticator: Arc::new(Authenticator::new(
                AuthMethod::None,
                Arc::new(floe_adapter::auth::SuperuserOnly(None)),
            )),
        }
    }
}

/// The start-up handler of one connection: the TLS configuration it was accepted
/// with (for SCRAM channel binding) and the server's shared state.
pub struct ConnectionStartup {
    pub(crate) security: WireSecurity,
    pub(crate) tls: Option<Arc<TlsState>>,
    pub(crate) driver: AuthDriver<SessionParameters>,
    pub(crate) metrics: Arc<AdapterMetrics>,
    /// Binds each admitted session to its role.
    pub(crate) coordinator: Arc<floe_adapter::Coordinator>,
}

impl ConnectionStartup {
    pub(crate) fn new(
        security: WireSecurity,
        tls: Option<Arc<TlsState>>,
        manager: Arc<ConnectionManager>,
        coordinator: Arc<floe_adapter::Coordinator>,
    ) -> ConnectionStartup {
        ConnectionStartup {
            security,
            tls,
            driver: AuthDriver::new(SessionParameters).with_connection_manager(manager),
            metrics: coordinator.metrics().clone(),
            coordinator,
        }
    }
}

/// The parameters a new session reports: pgwire's defaults, overridden by the
/// session's own (server_version, DateStyle, ...).
pub struct SessionParameters;

impl ServerParameterProvider for SessionParameters {
    fn server_parameters<C>(&self, client: &C) -> Option<HashMap<String, String>>
    where
        C: ClientInfo,
    {
        let mut parameters = DefaultServerParameterProvider::default()
            .server_parameters(client)
            .unwrap_or_default();
        let user = client.metadata().get("user").cloned().unwrap_or_default();
        for (name, value) in Session::new(user).startup_parameters() {
            parameters.insert(name.to_string(), value);
        }
        Some(parameters)
    }
}

/// Verifies passwords and supplies SCRAM verifiers from the server's authenticator.
#[derive(Debug)]
struct VerifierAuthSource(Arc<Authenticator>);

#[async_trait]
impl AuthSource for VerifierAuthSource {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        // Passwords are never kept: only the methods below are used.
        Err(PgWireError::InvalidPassword(
            login.user().unwrap_or_default().to_string(),
        ))
    }

    async fn verify_password(
        &self,
        login: &LoginInfo,
        presented: &[u8],
    ) -> PgWireResult<Option<()>> {
        let user = login.user().unwrap_or_default();
        let password = std::str::from_utf8(presented).unwrap_or_default();
        if self.0.check_password(user, password).await {
            Ok(None)
        } else {
            Err(PgWireError::InvalidPassword(user.to_string()))
        }
    }

    async fn get_scram_secret(&self, login: &LoginInfo) -> PgWireResult<(ScramSecret, Option<()>)> {
        let verifier = self
            .0
            .scram_verifier(login.user().unwrap_or_default())
            .await;
        Ok((
            ScramSecret::Verifier {
                salt: verifier.salt,
                iterations: verifier.iterations as usize,
                stored_key: verifier.stored_key,
                server_key: verifier.server_key,
            },
            None,
        ))
    }
}

fn fatal(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "FATAL".to_string(),
        code.to_string(),
        message,
    )))
}

fn password_failed(user: &str) -> PgWireError {
    fatal(
        floe_repr::SqlState::INVALID_PASSWORD.code(),
        format!("password authentication failed for user \"{user}\""),
    )
}

impl ConnectionStartup {
    /// The mechanism of this server's authenticator, or `None` when clients are
    /// not authenticated.
    fn mechanism<C: ClientInfo>(&self, client: &C) -> PgWireResult<Option<Box<dyn AuthMechanism>>> {
        let source = Arc::new(VerifierAuthSource(self.security.authenticator.clone()));
        Ok(match self.security.authenticator.method {
            AuthMethod::None => None,
            AuthMethod::Password => Some(CleartextPasswordAuth::new(source).create()),
            AuthMethod::Sasl => {
                let mut scram = ScramAuth::new(source);
                // Channel binding (SCRAM-SHA-256-PLUS) binds the exchange to the
                // certificate this connection's TLS session presented.
                if client.is_secure()
                    && let Some(tls) = &self.tls
                {
                    scram.configure_certificate(&tls.cert_pem)?;
                }
                Some(scram.create())
            }
        })
    }

    /// Refuses a connection the TLS mode does not admit.
    fn check_transport<C: ClientInfo>(&self, client: &C, user: &str) -> PgWireResult<()> {
        let mode = self.security.tls_mode;
        if mode.uses_tls() && !client.is_secure() {
            return Err(fatal(
                floe_repr::SqlState::INVALID_AUTHORIZATION_SPECIFICATION.code(),
                "TLS is required".into(),
            ));
        }
        if mode == TlsMode::VerifyFull {
            // rustls verified the chain; the certificate must also name the user.
            let name = client
                .client_certificates()
                .and_then(|certs| certs.first())
                .and_then(|cert| certificate_common_name(cert));
            if name.as_deref() != Some(user) {
                return Err(fatal(
                    floe_repr::SqlState::INVALID_AUTHORIZATION_SPECIFICATION.code(),
                    format!("certificate authentication failed for user \"{user}\""),
                ));
            }
        }
        Ok(())
    }

    /// The client is who it says: open its session and finish the start-up.
    async fn admit<C>(
        &self,
        client: &mut C,
        user: &str,
        final_message: Option<pgwire::messages::startup::Authentication>,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.security
            .authenticator
            .login_succeeded(user, client.socket_addr().ip());
        let mut session = Session::new(user.to_string());
        // A password or a verified certificate proved the name: it must be a role.
        let authenticated = self.security.authenticator.method.requires_password()
            || self.security.tls_mode == TlsMode::VerifyFull;
        if let Err(e) = self
            .coordinator
            .start_session(&mut session, authenticated)
            .await
        {
            return Err(fatal(e.code().code(), e.to_string()));
        }
        client.session_extensions().insert(Mutex::new(session));
        client
            .session_extensions()
            .insert(self.metrics.session_started());
        self.driver
            .complete_authentication(client, final_message)
            .await
    }
}

#[async_trait]
impl StartupHandler for ConnectionStartup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match message {
            PgWireFrontendMessage::Startup(ref startup) => {
                pgwire::api::auth::protocol_negotiation(client, startup).await?;
                pgwire::api::auth::save_startup_parameters_to_metadata(client, startup);
                let user = client_user(&*client);
                self.check_transport(client, &user)?;
                match self.mechanism(client)? {
                    None => self.admit(client, &user, None).await,
                    Some(mechanism) => {
                        let outcome = self.driver.begin_authentication(client, mechanism).await;
                        self.after_step(client, &user, outcome).await
                    }
                }
            }
            PgWireFrontendMessage::PasswordMessageFamily(message) => {
                let user = client_user(&*client);
                let outcome = self.driver.advance_authentication(client, message).await;
                self.after_step(client, &user, outcome).await
            }
            _ => Ok(()),
        }
    }
}

impl ConnectionStartup {
    async fn after_step<C>(
        &self,
        client: &mut C,
        user: &str,
        outcome: PgWireResult<AuthOutcome>,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match outcome {
            Ok(AuthOutcome::InProgress) => Ok(()),
            Ok(AuthOutcome::Authenticated { final_message, .. }) => {
                self.admit(client, user, final_message).await
            }
            // A wrong password, or a proof that does not verify (SCRAM): the same
            // answer either way, after the delay repeated failures earn.
            Err(PgWireError::InvalidPassword(_) | PgWireError::InvalidScramMessage(_)) => {
                self.security
                    .authenticator
                    .login_failed(user, client.socket_addr().ip())
                    .await;
                Err(password_failed(user))
            }
            Err(other) => Err(other),
        }
    }
}

/// The user name of the start-up message (`materialize` when the client sent none).
fn client_user<C: ClientInfo + ?Sized>(client: &C) -> String {
    client
        .metadata()
        .get("user")
        .cloned()
        .unwrap_or_else(|| floe_adapter::auth::SUPERUSER.to_string())
}
