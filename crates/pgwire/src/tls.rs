//! TLS on the wire, spelled as Materialize self-managed spells it: `--tls-mode`,
//! `--tls-cert`, `--tls-key` (and `--tls-ca` for client certificates). The
//! certificate files are read again on [`ServerTls::reload`] (SIGHUP), so a renewed
//! certificate is served to new connections without a restart; established
//! connections keep the one they negotiated.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use pgwire::tokio::TlsAcceptor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

/// What the server demands of a connection's transport (`--tls-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// No TLS: an SSLRequest is refused and the client goes on in plain text.
    Disable,
    /// TLS is required: a client that does not ask for it is refused with
    /// `FATAL 28000: TLS is required`.
    Require,
    /// `require`, and the client presents a certificate signed by `--tls-ca`.
    VerifyCa,
    /// `verify-ca`, and the certificate's common name is the user name.
    VerifyFull,
}

impl TlsMode {
    pub fn uses_tls(self) -> bool {
        self != TlsMode::Disable
    }

    pub fn verifies_clients(self) -> bool {
        matches!(self, TlsMode::VerifyCa | TlsMode::VerifyFull)
    }
}

impl std::str::FromStr for TlsMode {
    type Err = String;

    fn from_str(text: &str) -> Result<TlsMode, String> {
        match text.to_ascii_lowercase().as_str() {
            "disable" => Ok(TlsMode::Disable),
            "require" => Ok(TlsMode::Require),
            "verify-ca" => Ok(TlsMode::VerifyCa),
            "verify-full" => Ok(TlsMode::VerifyFull),
            other => Err(format!(
                "invalid TLS mode {other:?}: use disable, require, verify-ca or verify-full"
            )),
        }
    }
}

/// The files a TLS configuration is read from.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// PEM: the server certificate, then its chain.
    pub cert: PathBuf,
    /// PEM: the server's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM: the authorities client certificates must chain to (`verify-ca`/`verify-full`).
    pub client_ca: Option<PathBuf>,
}

/// One loaded configuration: what new connections negotiate with.
pub struct TlsState {
    pub acceptor: TlsAcceptor,
    /// The server certificate chain as PEM, for SCRAM channel binding
    /// (`tls-server-end-point` hashes the certificate the client saw).
    pub cert_pem: Vec<u8>,
}

/// The server's TLS configuration, reloadable.
pub struct ServerTls {
    files: TlsFiles,
    current: RwLock<Arc<TlsState>>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Reads the files; an error names the file and what is wrong with it.
    pub fn load(files: TlsFiles) -> Result<ServerTls, String> {
        let state = load_state(&files)?;
        Ok(ServerTls {
            files,
            current: RwLock::new(Arc::new(state)),
        })
    }

    /// Reads the files again. On error the previous configuration stays in force.
    pub fn reload(&self) -> Result<(), String> {
        let state = load_state(&self.files)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(state);
        Ok(())
    }

    /// The configuration a new connection negotiates with.
    pub fn current(&self) -> Arc<TlsState> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn files(&self) -> &TlsFiles {
        &self.files
    }
}

fn load_state(files: &TlsFiles) -> Result<TlsState, String> {
    let cert_pem = read(&files.cert)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--tls-cert {}: {e}", files.cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "--tls-cert {}: no PEM certificate in the file",
            files.cert.display()
        ));
    }
    let key_pem = read(&files.key)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| format!("--tls-key {}: {e}", files.key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS protocol versions: {e}"))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            let pem = read(path)?;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| format!("--tls-ca {}: {e}", path.display()))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("--tls-ca {}: {e}", path.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("--tls-ca {}: {e}", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        format!(
            "--tls-cert {} and --tls-key {}: {e}",
            files.cert.display(),
            files.key.display()
        )
    })?;
    // PostgreSQL 17's direct TLS negotiation requires this protocol name.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(TlsState {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        cert_pem,
    })
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// The common name of a DER certificate's subject, if it has one.
pub fn certificate_common_name(der: &[u8]) -> Option<String> {
    let certificate = x509_certificate::X509Certificate::from_der(der).ok()?;
    certificate.subject_common_name()
}
