//! A throw-away test certificate authority (made by `peers/certs.py` with the venv's
//! `cryptography`), with a server certificate for 127.0.0.1, ::1 and localhost, and a
//! client certificate for the user `materialize`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// PEM files of a test CA and a server certificate it signed. Removed when dropped.
pub struct TestCa {
    dir: tempfile::TempDir,
}

impl TestCa {
    /// Generates a new CA and server certificate (EC P-256, valid 2 days).
    pub fn generate() -> TestCa {
        let dir = tempfile::Builder::new()
            .prefix("floe-test-ca-")
            .tempdir()
            .expect("temp dir");
        let script = crate::scripts_dir().join("certs.py");
        let out = std::process::Command::new(crate::python())
            .arg(&script)
            .arg(dir.path())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        if !out.status.success() {
            panic!("certs.py failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        TestCa { dir }
    }

    /// The CA certificate (PEM): the bundle an HTTPS client must trust.
    pub fn ca_bundle_path(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The server certificate chain (PEM: server certificate, then the CA).
    pub fn server_cert_path(&self) -> PathBuf {
        self.dir.path().join("server.pem")
    }

    /// The server's private key (PEM, PKCS#8).
    pub fn server_key_path(&self) -> PathBuf {
        self.dir.path().join("server.key")
    }

    /// A client certificate for the user `materialize`, signed by the CA (PEM).
    pub fn client_cert_path(&self) -> PathBuf {
        self.dir.path().join("client.pem")
    }

    /// The client certificate's private key (PEM, PKCS#8, mode 0600).
    pub fn client_key_path(&self) -> PathBuf {
        self.dir.path().join("client.key")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A rustls server configuration presenting the server certificate.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(self.server_cert_path())
                .expect("server.pem")
                .collect::<Result<_, _>>()
                .expect("server.pem certificates");
        let key = PrivateKeyDer::from_pem_file(self.server_key_path()).expect("server.key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("server certificate");
        Arc::new(config)
    }
}
