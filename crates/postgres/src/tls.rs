//! TLS for both kinds of connection (queries through tokio-postgres, replication through
//! floe's own client), with libpq's meaning of the SSL modes:
//! - `require`: encrypted, the server's certificate is not checked;
//! - `verify-ca`: the certificate must chain to a trusted CA (the connection's
//!   `SSL CERTIFICATE AUTHORITY`, else the system's roots), any host name;
//! - `verify-full`: as `verify-ca`, and the certificate must name the host.
//!
//! A client certificate (`SSL CERTIFICATE` + `SSL KEY`) is presented when configured.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use floe_repr::SqlState;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientConfig, WebPkiServerVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::config::{PgConnectionConfig, SslMode};
use crate::error::{ErrorKind, PgError};

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_error(message: impl Into<String>) -> PgError {
    PgError::new(
        ErrorKind::Tls,
        SqlState::SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
        message,
    )
}

/// The rustls configuration of a connection, or `None` for `SSL MODE 'disable'`.
pub(crate) fn client_config(
    config: &PgConnectionConfig,
) -> Result<Option<Arc<ClientConfig>>, PgError> {
    let verifier: Arc<dyn ServerCertVerifier> = match config.ssl_mode {
        SslMode::Disable => return Ok(None),
        SslMode::Require => Arc::new(LenientVerifier {
            algorithms: provider().signature_verification_algorithms,
            chain: None,
        }),
        SslMode::VerifyCa => Arc::new(LenientVerifier {
            algorithms: provider().signature_verification_algorithms,
            chain: Some(webpki_verifier(config)?),
        }),
        SslMode::VerifyFull => webpki_verifier(config)?,
    };
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(format!("TLS setup failed: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let tls = match (&config.ssl_certificate, &config.ssl_key) {
        (Some(certificate), Some(key)) => {
            let chain = parse_certificates(certificate, "SSL CERTIFICATE")?;
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes())
                .map_err(|_| invalid_pem("SSL KEY", "a private key"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| tls_error(format!("invalid SSL CERTIFICATE or SSL KEY: {e}")))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => {
            return Err(PgError::new(
                ErrorKind::InvalidConfig,
                SqlState::INVALID_PARAMETER_VALUE,
                "SSL CERTIFICATE and SSL KEY must be specified together",
            ));
        }
    };
    Ok(Some(Arc::new(tls)))
}

fn invalid_pem(option: &str, what: &str) -> PgError {
    PgError::new(
        ErrorKind::InvalidConfig,
        SqlState::INVALID_PARAMETER_VALUE,
        format!("invalid {option}: expected {what} in PEM format"),
    )
}

fn parse_certificates(pem: &str, option: &str) -> Result<Vec<CertificateDer<'static>>, PgError> {
    let certificates = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| invalid_pem(option, "certificates"))?;
    if certificates.is_empty() {
        return Err(invalid_pem(option, "certificates"));
    }
    Ok(certificates)
}

/// Verifies chains against the connection's CA, else the system's roots.
fn webpki_verifier(config: &PgConnectionConfig) -> Result<Arc<WebPkiServerVerifier>, PgError> {
    let mut roots = RootCertStore::empty();
    match &config.ssl_root_certificate {
        Some(pem) => {
            for certificate in parse_certificates(pem, "SSL CERTIFICATE AUTHORITY")? {
                roots
                    .add(certificate)
                    .map_err(|e| tls_error(format!("invalid SSL CERTIFICATE AUTHORITY: {e}")))?;
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(native.certs);
        }
    }
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| tls_error(format!("TLS setup failed: {e}")))
}

/// `require` and `verify-ca`, one verifier as they differ only in the certificate they
/// accept; the handshake's signatures are always checked.
#[derive(Debug)]
struct LenientVerifier {
    /// The crypto provider's algorithms (what a `WebPkiServerVerifier` checks with too).
    algorithms: WebPkiSupportedAlgorithms,
    /// `verify-ca`: the chain must verify, a certificate for another host name is
    /// accepted. `None` for `require`: any certificate.
    chain: Option<Arc<WebPkiServerVerifier>>,
}

impl ServerCertVerifier for LenientVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        // webpki checks the chain before the name, so a name error means the chain held.
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The name TLS uses for `host` (an IP address or a DNS name).
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, PgError> {
    ServerName::try_from(host.to_string())
        .map_err(|_| tls_error(format!("invalid host name for TLS: {host}")))
}

/// tokio-postgres' hook for TLS: one connector per connection.
#[derive(Clone)]
pub(crate) struct MakeRustls {
    pub config: Arc<ClientConfig>,
}

impl<S> tokio_postgres::tls::MakeTlsConnect<S> for MakeRustls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, io::Error> {
        let name = ServerName::try_from(domain.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(RustlsConnect {
            connector: tokio_rustls::TlsConnector::from(self.config.clone()),
            name,
        })
    }
}

pub(crate) struct RustlsConnect {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

type ConnectFuture<S> = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

impl<S> tokio_postgres::tls::TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = ConnectFuture<S>;

    fn connect(self, stream: S) -> ConnectFuture<S> {
        Box::pin(async move {
            let stream = self.connector.connect(self.name, stream).await?;
            Ok(RustlsStream(stream))
        })
    }
}

/// A TLS stream tokio-postgres can use (no channel binding: SCRAM without `-PLUS`).
pub(crate) struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for RustlsStream<S> {
    fn channel_binding(&self) -> tokio_postgres::tls::ChannelBinding {
        tokio_postgres::tls::ChannelBinding::none()
    }
}
