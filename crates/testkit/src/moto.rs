//! moto: STS (with `sts:ExternalId` conditions), IAM and a second S3, with IAM enforced,
//! behind a strict front that denies an `AssumeRole` without `ExternalId` when the role's
//! trust policy requires one (moto alone lets that through; AWS does not).
//!
//! ```no_run
//! let moto = floe_testkit::moto_shared();
//! let role = moto.create_role_with_external_id("ext-123");
//! // floe assumes role.role_arn with role.principal at moto.sts_endpoint() ...
//! assert!(moto.assumed_roles().iter().any(|r| r.external_id.as_deref() == Some("ext-123")));
//! ```

use crate::aws::{self, AwsCredentials};
use crate::http;
use crate::process::{PeerProcess, START_TIMEOUT, launch_with_retry, start_front};
use serde_json::{Value, json};
use std::sync::OnceLock;
use std::time::Duration;

/// moto's account id.
pub const ACCOUNT_ID: &str = "123456789012";
pub const REGION: &str = "us-east-1";
/// Calls moto serves without authentication: the bootstrap of the admin user.
const NO_AUTH_CALLS: usize = 3;

/// A role whose trust policy requires `sts:ExternalId` = `external_id`, and the IAM user
/// (with an access key) that may assume it.
#[derive(Clone, Debug)]
pub struct MotoRole {
    pub role_arn: String,
    pub role_name: String,
    pub external_id: String,
    pub principal_arn: String,
    pub principal: AwsCredentials,
}

/// A role for a web identity: its sessions come from `AssumeRoleWithWebIdentity`.
#[derive(Clone, Debug)]
pub struct WebIdentityRole {
    pub role_arn: String,
    pub role_name: String,
}

/// A session of a workload's role (an ECS task role, an EC2 instance profile), as those
/// services hand it to the workload.
#[derive(Clone, Debug)]
pub struct WorkloadSession {
    pub role_arn: String,
    pub role_name: String,
    /// `arn:aws:sts::<account>:assumed-role/<role>/<session>`: who these credentials are.
    pub session_arn: String,
    pub credentials: AwsCredentials,
    /// When the credentials expire (ISO 8601, as STS answers it).
    pub expiration: String,
}

/// A session moto handed out (`sts.AssumedRole[]` of `/moto-api/data.json`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssumedRole {
    pub role_arn: String,
    pub session_name: String,
    pub external_id: Option<String>,
    pub access_key_id: String,
}

/// A running moto server and its strict STS front. Killed when dropped.
pub struct Moto {
    moto: PeerProcess,
    front: PeerProcess,
    port: u16,
    front_port: u16,
    admin: AwsCredentials,
    _dir: tempfile::TempDir,
}

static SHARED: OnceLock<Moto> = OnceLock::new();

/// The instance shared by all tests of this test binary.
pub fn moto_shared() -> &'static Moto {
    SHARED.get_or_init(Moto::start)
}

impl Moto {
    /// Starts moto (IAM enforced after the admin bootstrap) and the strict front.
    pub fn start() -> Moto {
        launch_with_retry(Self::try_start)
    }

    fn try_start() -> Result<Moto, (String, bool)> {
        let server = crate::require_peer("venv/bin/moto_server", "moto");
        let dir = tempfile::Builder::new()
            .prefix("floe-moto-")
            .tempdir()
            .expect("temp dir");
        let port = crate::free_port();
        let front_port = crate::free_port();
        let mut moto = PeerProcess::spawn(
            "moto",
            &server,
            &[
                "-H".into(),
                "127.0.0.1".into(),
                "-p".into(),
                port.to_string(),
            ],
            &[("INITIAL_NO_AUTH_ACTION_COUNT", NO_AUTH_CALLS.to_string())],
            dir.path(),
        );
        let url = format!("http://127.0.0.1:{port}");
        moto.try_wait_until(START_TIMEOUT, || {
            let r = http::get(&format!("{url}/moto-api/data.json"))
                .timeout(Duration::from_secs(2))
                .send()
                .map_err(|e| e.to_string())?;
            if r.status == 200 {
                Ok(())
            } else {
                Err(format!("status {}", r.status))
            }
        })
        .map_err(|m| (m, moto.port_conflict()))?;
        let admin = bootstrap_admin(&url);

        // The admin keys let the front pass on the web identity calls it accepts.
        let front_config = json!({
            "port": front_port,
            "upstream": url,
            "admin_access_key": admin.access_key_id,
            "admin_secret_key": admin.secret_access_key,
        });
        let front = start_front(
            "sts",
            "sts-front",
            &front_config,
            dir.path(),
            &format!("http://127.0.0.1:{front_port}/_testkit/requests"),
        )?;
        Ok(Moto {
            moto,
            front,
            port,
            front_port,
            admin,
            _dir: dir,
        })
    }

    /// moto itself: S3, IAM, and a lax STS (accepts a missing ExternalId).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
    /// The strict STS front: use this as floe's STS endpoint.
    pub fn sts_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.front_port)
    }
    pub fn region(&self) -> &'static str {
        REGION
    }
    pub fn account_id(&self) -> &'static str {
        ACCOUNT_ID
    }
    /// An IAM user allowed everything (signs the helpers' IAM calls).
    pub fn admin_credentials(&self) -> &AwsCredentials {
        &self.admin
    }
    pub fn log_tail(&self, lines: usize) -> String {
        format!(
            "--- moto ---\n{}\n--- sts front ---\n{}",
            self.moto.log_tail(lines),
            self.front.log_tail(lines)
        )
    }

    fn iam(&self, action: &str, params: &[(&str, &str)]) -> String {
        iam(&self.endpoint(), &self.admin, action, params)
    }

    /// Creates a role whose trust policy allows `sts:AssumeRole` to a new IAM user only
    /// with `StringEquals sts:ExternalId = external_id`; the role may use moto's S3. Returns
    /// the role ARN and the user's access key.
    pub fn create_role_with_external_id(&self, external_id: &str) -> MotoRole {
        self.create_role(
            &crate::unique_name("role"),
            &crate::unique_name("principal"),
            external_id,
        )
    }

    /// [`Moto::create_role_with_external_id`] with the role's and the user's names.
    pub fn create_role(&self, role_name: &str, user: &str, external_id: &str) -> MotoRole {
        let (role_name, user) = (role_name.to_string(), user.to_string());
        let principal_arn = format!("arn:aws:iam::{ACCOUNT_ID}:user/{user}");
        let role_arn = format!("arn:aws:iam::{ACCOUNT_ID}:role/{role_name}");
        self.iam("CreateUser", &[("UserName", &user)]);
        let user_policy = json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": role_arn}
        ]})
        .to_string();
        self.iam(
            "PutUserPolicy",
            &[
                ("UserName", &user),
                ("PolicyName", "assume"),
                ("PolicyDocument", &user_policy),
            ],
        );
        let key_xml = self.iam("CreateAccessKey", &[("UserName", &user)]);
        let principal = AwsCredentials::new(
            &aws::xml_value(&key_xml, "AccessKeyId").expect("AccessKeyId"),
            &aws::xml_value(&key_xml, "SecretAccessKey").expect("SecretAccessKey"),
        );
        self.put_role(
            &role_name,
            &trust_statement(&principal_arn, Some(external_id)),
            &json!({"Effect": "Allow", "Action": "s3:*", "Resource": "*"}),
        );
        MotoRole {
            role_arn,
            role_name,
            external_id: external_id.to_string(),
            principal_arn,
            principal,
        }
    }

    /// Creates a role `principal_arn` may assume only with `StringEquals sts:ExternalId =
    /// external_id` (any principal: a user, or an assumed-role session such as a web
    /// identity's); the role may use moto's S3. Returns its ARN.
    pub fn create_role_trusting(&self, principal_arn: &str, external_id: &str) -> String {
        let role_name = crate::unique_name("role");
        self.put_role(
            &role_name,
            &trust_statement(principal_arn, Some(external_id)),
            &json!({"Effect": "Allow", "Action": "s3:*", "Resource": "*"}),
        );
        format!("arn:aws:iam::{ACCOUNT_ID}:role/{role_name}")
    }

    /// A role for a web identity (EKS's service account role): `token` is registered with
    /// the STS front, which then takes `AssumeRoleWithWebIdentity` of the role with that
    /// token, unsigned, as AWS takes it from a trusted identity provider (any other token
    /// is refused with `InvalidIdentityToken`). Sessions of the role may assume other roles.
    pub fn create_web_identity_role(&self, token: &str) -> WebIdentityRole {
        let role_name = crate::unique_name("web");
        let role_arn = format!("arn:aws:iam::{ACCOUNT_ID}:role/{role_name}");
        let trust = json!({
            "Effect": "Allow",
            "Principal": {"Federated": format!("arn:aws:iam::{ACCOUNT_ID}:oidc-provider/oidc.testkit")},
            "Action": "sts:AssumeRoleWithWebIdentity"
        });
        self.put_role(
            &role_name,
            &trust,
            &json!({"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}),
        );
        let response = http::post(&format!("{}/_testkit/web-identity", self.sts_endpoint()))
            .json(&json!({"token": token, "role_arn": role_arn}))
            .send()
            .expect("register the web identity token");
        assert_eq!(response.status, 200, "{}", response.text());
        WebIdentityRole {
            role_arn,
            role_name,
        }
    }

    /// A new role the admin may assume and whose sessions may assume other roles, and a
    /// one-hour session `session_name` of it: what ECS or EC2 hands a workload.
    pub fn create_workload_session(&self, session_name: &str) -> WorkloadSession {
        let role_name = crate::unique_name("workload");
        let role_arn = format!("arn:aws:iam::{ACCOUNT_ID}:role/{role_name}");
        let admin_arn = format!("arn:aws:iam::{ACCOUNT_ID}:user/testkit-admin");
        self.put_role(
            &role_name,
            &trust_statement(&admin_arn, None),
            &json!({"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}),
        );
        // At moto itself: the strict front's record stays floe's.
        let response = aws::assume_role(
            &self.endpoint(),
            REGION,
            &self.admin,
            &role_arn,
            session_name,
            None,
            Some(3600),
        );
        assert_eq!(response.status, 200, "AssumeRole: {}", response.text());
        let expiration = aws::xml_value(&response.text(), "Expiration").expect("Expiration");
        WorkloadSession {
            session_arn: format!(
                "arn:aws:sts::{ACCOUNT_ID}:assumed-role/{role_name}/{session_name}"
            ),
            credentials: aws::parse_assume_role(&response),
            role_arn,
            role_name,
            expiration,
        }
    }

    /// An IAM role with one trust statement and one permission statement.
    fn put_role(&self, role_name: &str, trust: &Value, permission: &Value) {
        let trust = json!({"Version": "2012-10-17", "Statement": [trust]}).to_string();
        self.iam(
            "CreateRole",
            &[
                ("RoleName", role_name),
                ("AssumeRolePolicyDocument", &trust),
                ("MaxSessionDuration", "43200"),
            ],
        );
        let policy = json!({"Version": "2012-10-17", "Statement": [permission]}).to_string();
        self.iam(
            "PutRolePolicy",
            &[
                ("RoleName", role_name),
                ("PolicyName", "permissions"),
                ("PolicyDocument", &policy),
            ],
        );
    }

    /// Replaces the role's trust policy (IAM `UpdateAssumeRolePolicy`), the step "update
    /// the IAM role" of the AWS document: the role's principal may assume it only with
    /// `StringEquals sts:ExternalId = external_id`, or, with `None`, without any condition
    /// (a trust policy that does not require an external id). `role.external_id` keeps the
    /// value the role was created with.
    pub fn set_trust_policy_external_id(&self, role: &MotoRole, external_id: Option<&str>) {
        set_trust_policy_external_id(
            &self.endpoint(),
            &self.admin,
            &role.role_name,
            &role.principal_arn,
            external_id,
        );
    }

    /// `AssumeRole` through the strict front (form POST, SigV4 `sts`).
    pub fn assume_role(
        &self,
        creds: &AwsCredentials,
        role_arn: &str,
        external_id: Option<&str>,
    ) -> http::Response {
        aws::assume_role(
            &self.sts_endpoint(),
            REGION,
            creds,
            role_arn,
            "floe-test",
            external_id,
            None,
        )
    }

    /// Every session moto handed out, with the external id it was asked with.
    pub fn assumed_roles(&self) -> Vec<AssumedRole> {
        let data = http::get(&format!("{}/moto-api/data.json", self.endpoint()))
            .send()
            .expect("moto data.json")
            .json();
        data["sts"]["AssumedRole"]
            .as_array()
            .map(|roles| {
                roles
                    .iter()
                    .map(|r| AssumedRole {
                        role_arn: r["role_arn"].as_str().unwrap_or_default().into(),
                        session_name: r["session_name"].as_str().unwrap_or_default().into(),
                        external_id: r["external_id"].as_str().map(str::to_string),
                        access_key_id: r["access_key_id"].as_str().unwrap_or_default().into(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The external ids of the sessions moto handed out for `role_arn`, in order (`None`
    /// for a session assumed without one).
    pub fn recorded_external_ids(&self, role_arn: &str) -> Vec<Option<String>> {
        self.assumed_roles()
            .into_iter()
            .filter(|r| r.role_arn == role_arn)
            .map(|r| r.external_id)
            .collect()
    }

    /// Every `AssumeRole` and `AssumeRoleWithWebIdentity` the strict front received:
    /// `{"method", "content_type", "params": {form fields but the token}, "signed",
    /// "access_key_id" (of the signature), "denied_by_front"}`, and `"token_accepted"` for
    /// a web identity call.
    pub fn sts_requests(&self) -> Vec<Value> {
        http::get(&format!("{}/_testkit/requests", self.sts_endpoint()))
            .send()
            .expect("sts front requests")
            .json()
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

/// An IAM call to moto at `endpoint`, signed with `admin`; panics unless it answers 200.
fn iam(endpoint: &str, admin: &AwsCredentials, action: &str, params: &[(&str, &str)]) -> String {
    let resp = aws::query_api(endpoint, "iam", REGION, admin, action, "2010-05-08", params);
    assert_eq!(resp.status, 200, "IAM {action}: {}", resp.text());
    resp.text()
}

/// [`Moto::set_trust_policy_external_id`] for the moto at `endpoint` (e.g. from another
/// process than the one that started it, as `scripts/peers trust` does), signed with its
/// `admin` keys.
pub fn set_trust_policy_external_id(
    endpoint: &str,
    admin: &AwsCredentials,
    role_name: &str,
    principal_arn: &str,
    external_id: Option<&str>,
) {
    let statement = trust_statement(principal_arn, external_id);
    let trust = json!({"Version": "2012-10-17", "Statement": [statement]}).to_string();
    iam(
        endpoint,
        admin,
        "UpdateAssumeRolePolicy",
        &[("RoleName", role_name), ("PolicyDocument", &trust)],
    );
}

/// A trust statement letting `principal_arn` assume a role, only with `external_id` when
/// one is given.
fn trust_statement(principal_arn: &str, external_id: Option<&str>) -> Value {
    let mut statement = json!({
        "Effect": "Allow",
        "Principal": {"AWS": principal_arn},
        "Action": "sts:AssumeRole"
    });
    if let Some(external_id) = external_id {
        statement["Condition"] = json!({"StringEquals": {"sts:ExternalId": external_id}});
    }
    statement
}

/// The first (unauthenticated) calls: an admin user with an allow-all policy and a key.
fn bootstrap_admin(url: &str) -> AwsCredentials {
    // Any key signs while moto still lets calls through unauthenticated; the signature's
    // scope tells moto which service is meant.
    let anyone = AwsCredentials::new("AKIABOOTSTRAPBOOTSTR", "bootstrap");
    let call = |action: &str, params: &[(&str, &str)]| {
        let resp = aws::query_api(url, "iam", REGION, &anyone, action, "2010-05-08", params);
        assert_eq!(resp.status, 200, "moto bootstrap {action}: {}", resp.text());
        resp.text()
    };
    let all = json!({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "*", "Resource": "*"}
    ]})
    .to_string();
    call("CreateUser", &[("UserName", "testkit-admin")]);
    call(
        "PutUserPolicy",
        &[
            ("UserName", "testkit-admin"),
            ("PolicyName", "all"),
            ("PolicyDocument", &all),
        ],
    );
    let xml = call("CreateAccessKey", &[("UserName", "testkit-admin")]);
    AwsCredentials::new(
        &aws::xml_value(&xml, "AccessKeyId").expect("AccessKeyId"),
        &aws::xml_value(&xml, "SecretAccessKey").expect("SecretAccessKey"),
    )
}
