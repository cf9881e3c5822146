//! Logins of roles: the verifier source backed by the durable catalog. Only a role
//! with LOGIN and a password has a verifier, so with a password authenticator a
//! NOLOGIN role cannot log in; without authentication any name but a NOLOGIN
//! role's connects (`Coordinator::start_session`), and `crate::rbac` decides
//! what it may do.

use std::sync::Arc;

use async_trait::async_trait;

use crate::auth::{SUPERUSER, ScramVerifier, VerifierSource};
use crate::coordinator::Coordinator;

/// Verifiers of the superuser (from `FLOE_SUPERUSER_PASSWORD`) and of the roles
/// created with `LOGIN PASSWORD '...'` (their SCRAM verifiers in the catalog).
pub struct CatalogVerifiers {
    superuser: Option<ScramVerifier>,
    coordinator: Arc<Coordinator>,
}

impl CatalogVerifiers {
    pub fn new(superuser: Option<ScramVerifier>, coordinator: Arc<Coordinator>) -> Self {
        CatalogVerifiers {
            superuser,
            coordinator,
        }
    }
}

#[async_trait]
impl VerifierSource for CatalogVerifiers {
    async fn verifier(&self, role: &str) -> Option<ScramVerifier> {
        if role == SUPERUSER {
            return self.superuser.clone();
        }
        let catalog = self.coordinator.catalog.lock().await;
        match catalog.login_verifier(role) {
            Ok(stored) => stored.as_deref().and_then(ScramVerifier::parse),
            Err(e) => {
                tracing::error!(error = %e, "reading a role's verifier failed: the login is refused");
                None
            }
        }
    }
}
