//! SeaweedFS (`weed mini`): Iceberg REST catalog + S3 + STS in one process.
//!
//! ```no_run
//! let sw = floe_testkit::seaweedfs_shared();          // one per test binary
//! let ns = sw.unique_namespace("sink");               // a fresh namespace per test
//! let token = sw.token();                             // OAuth2 bearer token
//! // a dedicated instance with short-lived vended credentials:
//! let own = floe_testkit::SeaweedFs::builder()
//!     .credential_duration(std::time::Duration::from_secs(900))
//!     .start();
//! ```
//!
//! - catalog: `catalog_url()` + `/v1/...`, warehouse `s3://iceberg-tables` (or the
//!   table-bucket ARN), route prefix `iceberg-tables`; OAuth2 client credentials at
//!   `/v1/oauth/tokens` (client id/secret = the S3 key pair); SigV4 with signing name
//!   `s3tables` is accepted instead of a bearer token; unsigned requests get 403.
//! - vended credentials (on by default): a loadTable with `X-Iceberg-Access-Delegation:
//!   vended-credentials` gets table-scoped temporary S3 credentials, minted through the
//!   role `role_arn()` and living `credential_duration` (SeaweedFS accepts 900..=43200 s).
//! - S3 and STS (`AssumeRole`, signing name `sts`) share `s3_endpoint()`.

use crate::aws::AwsCredentials;
use crate::http;
use crate::process::{PeerProcess, START_TIMEOUT, launch_with_retry};
use serde_json::{Value, json};
use std::sync::OnceLock;
use std::time::Duration;

/// The table bucket every instance serves (also the REST route prefix).
pub const TABLE_BUCKET: &str = "iceberg-tables";
/// The region SeaweedFS reports and signs with.
pub const REGION: &str = "us-east-1";
/// The account id in SeaweedFS's ARNs.
pub const ACCOUNT_ID: &str = "000000000000";
/// The role SeaweedFS assumes to vend table credentials.
pub const ROLE_ARN: &str = "arn:aws:iam::000000000000:role/sink";

/// Options for a dedicated instance. Defaults: vending on, credentials live 3600 s,
/// key pair `admin` / `adminsecret`.
#[derive(Clone)] // no Debug: it holds secrets
pub struct SeaweedFsBuilder {
    /// The Iceberg REST catalog's port (a free one when `None`).
    catalog_port: Option<u16>,
    credential_duration: Option<Duration>,
    vending: bool,
    access_key: String,
    secret_key: String,
    extra_args: Vec<String>,
}

impl SeaweedFsBuilder {
    /// Lifetime of vended credentials (`-s3.iceberg.credentialDurationSeconds`).
    /// SeaweedFS refuses less than 900 s (it then vends nothing), so this panics below.
    pub fn credential_duration(mut self, duration: Duration) -> Self {
        assert!(
            (900..=43200).contains(&duration.as_secs()),
            "SeaweedFS vends credentials for 900..=43200 s only (got {duration:?}); \
             test refresh with a large refresh margin instead"
        );
        self.credential_duration = Some(duration);
        self
    }

    /// No credential role: loadTable never returns storage credentials.
    pub fn without_vending(mut self) -> Self {
        self.vending = false;
        self
    }

    /// The S3 key pair (also the OAuth2 client id and secret).
    pub fn key_pair(mut self, access_key: &str, secret_key: &str) -> Self {
        self.access_key = access_key.to_string();
        self.secret_key = secret_key.to_string();
        self
    }

    /// Serves the Iceberg REST catalog on `port` instead of a free port (for
    /// `scripts/peers`, whose printed statements name it).
    pub fn catalog_port(mut self, port: u16) -> Self {
        self.catalog_port = Some(port);
        self
    }

    /// An extra `weed mini` flag, e.g. `-s3.allowDeleteBucketNotEmpty=true`.
    pub fn arg(mut self, arg: &str) -> Self {
        self.extra_args.push(arg.to_string());
        self
    }

    /// Starts the instance and waits until catalog, OAuth2 and S3 answer.
    pub fn start(self) -> SeaweedFs {
        SeaweedFs::launch(self)
    }
}

/// A running `weed mini`. Killed when dropped.
pub struct SeaweedFs {
    process: PeerProcess,
    s3_port: u16,
    catalog_port: u16,
    access_key: String,
    secret_key: String,
    vending: bool,
    credential_duration: Duration,
    // Dropped after `process` (fields drop in order): the data directory.
    _dir: tempfile::TempDir,
}

static SHARED: OnceLock<SeaweedFs> = OnceLock::new();

/// The instance shared by all tests of this test binary (default settings). Give each
/// test its own namespace ([`SeaweedFs::unique_namespace`]).
pub fn seaweedfs_shared() -> &'static SeaweedFs {
    SHARED.get_or_init(SeaweedFs::start)
}

impl SeaweedFs {
    pub fn builder() -> SeaweedFsBuilder {
        SeaweedFsBuilder {
            catalog_port: None,
            credential_duration: None,
            vending: true,
            access_key: "admin".into(),
            secret_key: "adminsecret".into(),
            extra_args: Vec::new(),
        }
    }

    /// A dedicated instance with default settings.
    pub fn start() -> SeaweedFs {
        Self::builder().start()
    }

    fn launch(opts: SeaweedFsBuilder) -> SeaweedFs {
        launch_with_retry(|| Self::try_launch(&opts))
    }

    fn try_launch(opts: &SeaweedFsBuilder) -> Result<SeaweedFs, (String, bool)> {
        let weed = crate::require_peer("venv/bin/weed", "SeaweedFS (weed)");
        let dir = tempfile::Builder::new()
            .prefix("floe-seaweedfs-")
            .tempdir()
            .expect("temp dir");
        let ports = crate::ports::free_ports(11);
        let (s3, s3_grpc) = (ports[0], ports[1]);
        let catalog = opts.catalog_port.unwrap_or(ports[2]);
        let iam_path = dir.path().join("iam.json");
        std::fs::write(
            &iam_path,
            serde_json::to_vec_pretty(&iam_config(&opts.access_key, &opts.secret_key))
                .expect("json"),
        )
        .expect("write iam.json");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).expect("data dir");
        let mut args: Vec<String> = vec![
            "mini".into(),
            format!("-dir={}", data.display()),
            "-ip=127.0.0.1".into(),
            "-ip.bind=127.0.0.1".into(),
            "-master.telemetry=false".into(),
            "-admin.ui=false".into(),
            "-webdav=false".into(),
            "-bucket=warehouse".into(),
            format!("-tableBucket={TABLE_BUCKET}"),
            format!("-s3.port={s3}"),
            format!("-s3.port.grpc={s3_grpc}"),
            format!("-s3.port.iceberg={catalog}"),
            "-s3.port.lance=0".into(),
            format!("-master.port={}", ports[3]),
            format!("-master.port.grpc={}", ports[4]),
            format!("-filer.port={}", ports[5]),
            format!("-filer.port.grpc={}", ports[6]),
            format!("-volume.port={}", ports[7]),
            format!("-volume.port.grpc={}", ports[8]),
            format!("-admin.port={}", ports[9]),
            format!("-admin.port.grpc={}", ports[10]),
            format!("-s3.config={}", iam_path.display()),
            format!("-s3.iam.config={}", iam_path.display()),
        ];
        let duration = opts
            .credential_duration
            .unwrap_or(Duration::from_secs(3600));
        if opts.vending {
            args.push(format!("-s3.iceberg.credentialRole={ROLE_ARN}"));
            args.push(format!(
                "-s3.iceberg.credentialDurationSeconds={}",
                duration.as_secs()
            ));
        }
        args.extend(opts.extra_args.iter().cloned());
        let envs = [
            ("AWS_ACCESS_KEY_ID", opts.access_key.clone()),
            ("AWS_SECRET_ACCESS_KEY", opts.secret_key.clone()),
        ];
        let process = PeerProcess::spawn("seaweedfs", &weed, &args, &envs, dir.path());
        let mut sw = SeaweedFs {
            process,
            s3_port: s3,
            catalog_port: catalog,
            access_key: opts.access_key.clone(),
            secret_key: opts.secret_key.clone(),
            vending: opts.vending,
            credential_duration: duration,
            _dir: dir,
        };
        let (catalog_url, s3_url) = (sw.catalog_url(), sw.s3_endpoint());
        let (ak, sk) = (sw.access_key.clone(), sw.secret_key.clone());
        let ready = sw.process.try_wait_until(START_TIMEOUT, || {
            let tok = http::post(&format!("{catalog_url}/v1/oauth/tokens"))
                .form(&[
                    ("grant_type", "client_credentials"),
                    ("client_id", &ak),
                    ("client_secret", &sk),
                ])
                .timeout(Duration::from_secs(2))
                .send()
                .map_err(|e| format!("token: {e}"))?;
            if tok.status != 200 {
                return Err(format!("token: {} {}", tok.status, tok.text()));
            }
            let token = tok.json()["access_token"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let ns = http::get(&format!("{catalog_url}/v1/{TABLE_BUCKET}/namespaces"))
                .bearer(&token)
                .timeout(Duration::from_secs(2))
                .send()
                .map_err(|e| format!("namespaces: {e}"))?;
            if ns.status != 200 {
                return Err(format!("list namespaces: {} {}", ns.status, ns.text()));
            }
            http::get(&format!("{s3_url}/"))
                .timeout(Duration::from_secs(2))
                .send()
                .map_err(|e| format!("s3: {e}"))?;
            Ok(())
        });
        match ready {
            Ok(()) => Ok(sw),
            Err(message) => Err((message, sw.process.port_conflict())),
        }
    }

    /// Base URL of the Iceberg REST catalog (routes are `/v1/...`; no `/iceberg` suffix).
    pub fn catalog_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.catalog_port)
    }
    /// OAuth2 token endpoint of the catalog.
    pub fn oauth_token_url(&self) -> String {
        format!("{}/v1/oauth/tokens", self.catalog_url())
    }
    /// S3 endpoint (path-style).
    pub fn s3_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.s3_port)
    }
    /// STS endpoint (`AssumeRole` with SigV4 signing name `sts`): the S3 port.
    pub fn sts_endpoint(&self) -> String {
        self.s3_endpoint()
    }
    /// `s3://iceberg-tables`.
    pub fn warehouse(&self) -> String {
        format!("s3://{TABLE_BUCKET}")
    }
    /// `arn:aws:s3tables:us-east-1:000000000000:bucket/iceberg-tables` (also accepted).
    pub fn warehouse_arn(&self) -> String {
        format!("arn:aws:s3tables:{REGION}:{ACCOUNT_ID}:bucket/{TABLE_BUCKET}")
    }
    /// The route prefix of `GET /v1/config` (`iceberg-tables`).
    pub fn prefix(&self) -> &'static str {
        TABLE_BUCKET
    }
    pub fn table_bucket(&self) -> &'static str {
        TABLE_BUCKET
    }
    pub fn region(&self) -> &'static str {
        REGION
    }
    /// The role vended credentials are minted from (also assumable with `AssumeRole`).
    pub fn role_arn(&self) -> &'static str {
        ROLE_ARN
    }
    pub fn access_key(&self) -> &str {
        &self.access_key
    }
    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }
    /// The S3 key pair as AWS credentials.
    pub fn credentials(&self) -> AwsCredentials {
        AwsCredentials::new(&self.access_key, &self.secret_key)
    }
    /// Whether loadTable vends credentials.
    pub fn vending(&self) -> bool {
        self.vending
    }
    /// Lifetime of vended credentials.
    pub fn credential_duration(&self) -> Duration {
        self.credential_duration
    }
    /// The last lines of the server log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }
    /// CPU seconds SeaweedFS has used so far.
    pub fn cpu_seconds(&self) -> f64 {
        self.process.cpu_seconds()
    }
    pub fn log_path(&self) -> std::path::PathBuf {
        self.process.log_path().to_path_buf()
    }

    /// A fresh OAuth2 bearer token (client credentials = the key pair).
    pub fn token(&self) -> String {
        let resp = http::post(&self.oauth_token_url())
            .form(&[
                ("grant_type", "client_credentials"),
                ("client_id", &self.access_key),
                ("client_secret", &self.secret_key),
            ])
            .send()
            .expect("SeaweedFS token request");
        assert_eq!(resp.status, 200, "SeaweedFS token: {}", resp.text());
        resp.json()["access_token"]
            .as_str()
            .expect("access_token")
            .to_string()
    }

    fn rest(&self, method: &str, path: &str, body: Option<&Value>, vended: bool) -> http::Response {
        let mut req =
            http::request(method, &format!("{}{path}", self.catalog_url())).bearer(&self.token());
        if let Some(body) = body {
            req = req.json(body);
        }
        if vended {
            req = req.header("X-Iceberg-Access-Delegation", "vended-credentials");
        }
        req.send()
            .unwrap_or_else(|e| panic!("SeaweedFS {method} {path}: {e}"))
    }

    /// Creates a namespace (panics unless the catalog says 200).
    pub fn create_namespace(&self, namespace: &str) {
        let resp = self.rest(
            "POST",
            &format!("/v1/{TABLE_BUCKET}/namespaces"),
            Some(&json!({"namespace": [namespace], "properties": {}})),
            false,
        );
        assert_eq!(
            resp.status,
            200,
            "create namespace {namespace}: {}",
            resp.text()
        );
    }

    /// Creates and returns a namespace named `<prefix>_<unique suffix>`.
    pub fn unique_namespace(&self, prefix: &str) -> String {
        let ns = crate::unique_name(prefix);
        self.create_namespace(&ns);
        ns
    }

    /// Creates an unpartitioned v2 table with an Iceberg JSON schema; returns the
    /// LoadTableResult.
    pub fn create_table(&self, namespace: &str, table: &str, schema: &Value) -> Value {
        let resp = self.rest(
            "POST",
            &format!("/v1/{TABLE_BUCKET}/namespaces/{namespace}/tables"),
            Some(&json!({"name": table, "schema": schema, "properties": {"format-version": "2"}})),
            false,
        );
        assert_eq!(
            resp.status,
            200,
            "create table {namespace}.{table}: {}",
            resp.text()
        );
        resp.json()
    }

    /// Upgrades a table to Iceberg format version `version` with a commit of its own
    /// (panics unless the catalog says 200).
    pub fn upgrade_format_version(&self, namespace: &str, table: &str, version: u8) {
        let resp = self.rest(
            "POST",
            &format!("/v1/{TABLE_BUCKET}/namespaces/{namespace}/tables/{table}"),
            Some(&json!({
                "requirements": [],
                "updates": [{"action": "upgrade-format-version", "format-version": version}],
            })),
            false,
        );
        assert_eq!(
            resp.status,
            200,
            "upgrade {namespace}.{table} to format version {version}: {}",
            resp.text()
        );
    }

    /// loadTable, optionally asking for vended credentials; panics unless 200.
    pub fn load_table(&self, namespace: &str, table: &str, vended: bool) -> Value {
        self.try_load_table(namespace, table, vended)
            .unwrap_or_else(|| panic!("load table {namespace}.{table}: no such table"))
    }

    /// loadTable: `None` while the table does not exist (404); panics on any other
    /// answer but 200.
    pub fn try_load_table(&self, namespace: &str, table: &str, vended: bool) -> Option<Value> {
        let resp = self.rest(
            "GET",
            &format!("/v1/{TABLE_BUCKET}/namespaces/{namespace}/tables/{table}"),
            None,
            vended,
        );
        if resp.status == 404 {
            return None;
        }
        assert_eq!(
            resp.status,
            200,
            "load table {namespace}.{table}: {}",
            resp.text()
        );
        Some(resp.json())
    }

    /// Sets the table bucket's resource policy (S3 Tables `PutTableBucketPolicy`, signed
    /// with the key pair). SeaweedFS shows a table bucket to the identity that owns it and
    /// to the principals its policy allows; an assumed-role session is its own identity
    /// whose name changes with every session, so only `"Principal": "*"` reaches them all.
    pub fn put_table_bucket_policy(&self, policy: &Value) {
        let url = format!(
            "{}/buckets/{}/policy",
            self.s3_endpoint(),
            http::form_encode(&self.warehouse_arn())
        );
        let body = json!({"resourcePolicy": policy.to_string()});
        let req = crate::aws::sign(
            http::put(&url).json(&body),
            &self.credentials(),
            REGION,
            "s3tables",
        );
        let resp = req.send().expect("PutTableBucketPolicy");
        assert_eq!(
            resp.status,
            200,
            "PutTableBucketPolicy: {} {}",
            resp.status,
            resp.text()
        );
    }

    /// Lets every authenticated principal use the table bucket through the catalog
    /// (`s3tables:*`), so that assumed-role sessions can sign catalog requests.
    pub fn allow_table_bucket_to_all_principals(&self) {
        let arn = self.warehouse_arn();
        self.put_table_bucket_policy(&json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Effect": "Allow",
                "Principal": "*",
                "Action": ["s3tables:*"],
                "Resource": [arn.clone(), format!("{arn}/*")]
            }]
        }));
    }

    /// The objects under `prefix` (an `s3://bucket/key-prefix` URI), as `s3://` URIs,
    /// from S3 ListObjectsV2 signed with the key pair (every page).
    pub fn list_objects(&self, prefix: &str) -> Vec<String> {
        let rest = prefix
            .strip_prefix("s3://")
            .unwrap_or_else(|| panic!("not an s3:// URI: {prefix}"));
        let (bucket, key_prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut query = format!("list-type=2&prefix={}", http::form_encode(key_prefix));
            if let Some(token) = &token {
                query.push_str(&format!("&continuation-token={}", http::form_encode(token)));
            }
            let url = format!("{}/{bucket}?{query}", self.s3_endpoint());
            let resp = crate::aws::sign(http::get(&url), &self.credentials(), REGION, "s3")
                .send()
                .expect("ListObjectsV2");
            let body = resp.text();
            assert_eq!(resp.status, 200, "ListObjectsV2 {prefix}: {body}");
            keys.extend(
                body.split("<Key>")
                    .skip(1)
                    .filter_map(|part| part.split_once("</Key>"))
                    .map(|(key, _)| format!("s3://{bucket}/{}", xml_unescape(key))),
            );
            token = crate::aws::xml_value(&body, "NextContinuationToken");
            if token.is_none() {
                return keys;
            }
        }
    }

    /// The table's current `metadata-location`.
    pub fn metadata_location(&self, namespace: &str, table: &str) -> String {
        self.load_table(namespace, table, false)["metadata-location"]
            .as_str()
            .expect("metadata-location")
            .to_string()
    }
}

/// The IAM configuration: the key pair as an admin identity, an STS signing key, and the
/// credential role whose trust policy allows both `sts:AssumeRole` and the catalog's
/// `sts:AssumeRoleWithCredentials` (without the latter SeaweedFS vends nothing).
fn iam_config(access_key: &str, secret_key: &str) -> Value {
    use base64::Engine;
    let signing_key = base64::engine::general_purpose::STANDARD.encode(crate::random_hex(32));
    json!({
        "identities": [{
            "name": "admin",
            "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"]
        }],
        "sts": {
            "tokenDuration": "12h",
            "maxSessionLength": "12h",
            "issuer": "seaweedfs-sts",
            "signingKey": signing_key
        },
        "policy": {"defaultEffect": "Deny", "storeType": "memory"},
        "policies": [{
            "name": "FullAccess",
            "document": {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": ["s3:*"], "Resource": ["*"]}]
            }
        }],
        "roles": [{
            "roleName": "sink",
            "roleArn": ROLE_ARN,
            "attachedPolicies": ["FullAccess"],
            "trustPolicy": {
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Principal": "*", "Action": ["sts:AssumeRole"]},
                    {"Effect": "Allow", "Principal": {"Federated": "iceberg-catalog"},
                     "Action": ["sts:AssumeRoleWithCredentials"]}
                ]
            }
        }]
    })
}

/// The text of an XML element with its five predefined entities resolved.
fn xml_unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}
