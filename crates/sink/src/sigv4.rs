//! AWS credentials providers and SigV4 signing of catalog requests (S3 Tables' REST
//! endpoint signs with the name `s3tables`).

use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use async_trait::async_trait;
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;

use crate::config::AwsKeys;
use crate::error::{ErrorKind, SinkError};

/// Where AWS credentials come from: static keys, or an assumed role
/// ([`crate::sts::AssumeRoleProvider`], which caches and refreshes its session).
#[async_trait]
pub trait AwsCredentialsProvider: Send + Sync + fmt::Debug {
    /// Credentials valid for at least the next request.
    async fn credentials(&self) -> Result<AwsKeys, SinkError>;

    /// Credentials and when they expire (`None`: they do not).
    async fn credentials_with_expiry(&self) -> Result<(AwsKeys, Option<SystemTime>), SinkError> {
        Ok((self.credentials().await?, None))
    }
}

/// Fixed keys from the AWS connection.
#[derive(Debug, Clone)]
pub struct StaticAwsCredentials {
    keys: AwsKeys,
}

impl StaticAwsCredentials {
    pub fn new(keys: AwsKeys) -> StaticAwsCredentials {
        StaticAwsCredentials { keys }
    }
}

#[async_trait]
impl AwsCredentialsProvider for StaticAwsCredentials {
    async fn credentials(&self) -> Result<AwsKeys, SinkError> {
        Ok(self.keys.clone())
    }
}

/// Signs requests with SigV4 for one service and region.
pub(crate) struct SigV4Signer {
    /// The signing name, `s3tables` for S3 Tables' REST endpoint.
    service: &'static str,
    region: String,
    /// Replaceable so a rotated secret or a new role session can be swapped in.
    provider: RwLock<Arc<dyn AwsCredentialsProvider>>,
}

impl fmt::Debug for SigV4Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigV4Signer")
            .field("service", &self.service)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl SigV4Signer {
    pub(crate) fn new(
        service: &'static str,
        region: String,
        provider: Arc<dyn AwsCredentialsProvider>,
    ) -> SigV4Signer {
        SigV4Signer {
            service,
            region,
            provider: RwLock::new(provider),
        }
    }

    pub(crate) fn set_provider(&self, provider: Arc<dyn AwsCredentialsProvider>) {
        *self.provider.write().expect("provider lock poisoned") = provider;
    }

    /// The current credentials of the provider.
    pub(crate) async fn credentials(&self) -> Result<AwsKeys, SinkError> {
        let provider = self
            .provider
            .read()
            .expect("provider lock poisoned")
            .clone();
        provider.credentials().await
    }

    /// Adds the SigV4 headers (`authorization`, `x-amz-date`, `x-amz-security-token`) to a
    /// built request. Call it on each attempt: signatures are bound to the time.
    pub(crate) fn sign(
        &self,
        keys: &AwsKeys,
        request: &mut reqwest::Request,
    ) -> Result<(), SinkError> {
        let identity: Identity = Credentials::from(keys).into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(self.service)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|err| signing_error(&err.to_string()))?
            .into();
        let mut headers = Vec::with_capacity(request.headers().len());
        for (name, value) in request.headers() {
            let value = value
                .to_str()
                .map_err(|_| signing_error(&format!("header {name} is not text")))?;
            headers.push((name.as_str(), value));
        }
        let body = match request.body() {
            None => SignableBody::Bytes(&[]),
            Some(body) => match body.as_bytes() {
                Some(bytes) => SignableBody::Bytes(bytes),
                // floe only sends buffered bodies; a streamed one cannot be hashed here.
                None => return Err(signing_error("request body is streamed")),
            },
        };
        let signable = SignableRequest::new(
            request.method().as_str(),
            request.url().as_str(),
            headers.into_iter(),
            body,
        )
        .map_err(|err| signing_error(&err.to_string()))?;
        let (instructions, _signature) = sign(signable, &params)
            .map_err(|err| signing_error(&err.to_string()))?
            .into_parts();
        let (signed_headers, _params) = instructions.into_parts();
        for header in signed_headers {
            let name = reqwest::header::HeaderName::from_static(header.name());
            let mut value = reqwest::header::HeaderValue::from_str(header.value())
                .map_err(|_| signing_error("signature header is not a valid header value"))?;
            value.set_sensitive(header.sensitive());
            request.headers_mut().insert(name, value);
        }
        Ok(())
    }
}

fn signing_error(cause: &str) -> SinkError {
    SinkError::new(
        ErrorKind::InvalidConfig,
        format!("cannot sign catalog request with SigV4: {cause}"),
    )
}

/// The region in an ARN (`arn:aws:s3tables:us-east-1:...`), if it names one.
pub(crate) fn region_from_arn(arn: &str) -> Option<&str> {
    let mut parts = arn.split(':');
    if parts.next()? != "arn" {
        return None;
    }
    let _partition = parts.next()?;
    let _service = parts.next()?;
    let region = parts.next()?;
    (!region.is_empty()).then_some(region)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arn_region() {
        assert_eq!(
            region_from_arn("arn:aws:s3tables:eu-west-1:000000000000:bucket/b"),
            Some("eu-west-1")
        );
        assert_eq!(region_from_arn("arn:aws:iam::000000000000:role/r"), None);
        assert_eq!(region_from_arn("s3://bucket"), None);
    }

    #[test]
    fn signing_adds_headers_and_hides_secret() {
        let signer = SigV4Signer::new(
            "s3tables",
            "us-east-1".into(),
            Arc::new(StaticAwsCredentials::new(AwsKeys {
                access_key_id: "AKID".into(),
                secret_access_key: "very-secret-key".into(),
                session_token: Some("session-token-value".into()),
            })),
        );
        let keys = AwsKeys {
            access_key_id: "AKID".into(),
            secret_access_key: "very-secret-key".into(),
            session_token: Some("session-token-value".into()),
        };
        let client = reqwest::Client::new();
        let mut request = client
            .post("http://127.0.0.1:8181/v1/p/namespaces")
            .header("content-type", "application/json")
            .body("{}")
            .build()
            .unwrap();
        signer.sign(&keys, &mut request).unwrap();
        let authorization = request.headers()["authorization"].to_str().unwrap();
        assert!(
            authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKID/"),
            "{authorization}"
        );
        assert!(authorization.contains("/us-east-1/s3tables/aws4_request"));
        assert!(authorization.contains("SignedHeaders=content-type;host;x-amz-date"));
        assert!(!authorization.contains("very-secret-key"));
        assert_eq!(
            request.headers()["x-amz-security-token"],
            "session-token-value"
        );
        assert!(request.headers().contains_key("x-amz-date"));
        assert!(!format!("{signer:?}").contains("secret"));
    }
}
