//! The catalogs people run in production, end to end through the `floe` binary, with local
//! peers in place of AWS and Databricks: the AWS S3 Tables document (SeaweedFS's SigV4
//! catalog and STS), the external-id rules of AWS connections (moto behind its strict STS
//! front), the Databricks Unity Catalog document and its troubleshooting table (the
//! Unity-shaped front), credentials kept fresh while sinks run, and HTTPS with an extra CA
//! bundle.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use floe_testkit::{FaultProxy, Moto, Outcome, Reader, SeaweedFs, UnityFront};
use serde_json::json;

use crate::support::{ENVIRONMENT_ID, rows, sink_commit};

/// A `floe` process with the environment a test gives it (AWS principal keys).
struct Server {
    child: Option<Child>,
    port: u16,
    log: PathBuf,
}

impl Server {
    fn start(data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
        std::fs::create_dir_all(data_dir).unwrap();
        let log = data_dir.with_extension("log");
        for _attempt in 0..3 {
            let port = floe_testkit::free_port();
            let log_file = std::fs::File::create(&log).unwrap();
            let mut command = Command::new(env!("CARGO_BIN_EXE_floe"));
            command
                .arg("--listen")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--internal-http-listen")
                .arg(format!("127.0.0.1:{}", floe_testkit::free_port()))
                .arg("--data-dir")
                .arg(data_dir)
                .arg("--aws-external-id-prefix")
                .arg(ENVIRONMENT_ID)
                .args(args)
                .env("RUST_LOG", "info")
                .stdin(Stdio::null())
                .stdout(log_file.try_clone().unwrap())
                .stderr(log_file);
            for name in crate::support::AWS_VARIABLES {
                command.env_remove(name);
            }
            for (name, value) in env {
                command.env(name, value);
            }
            let mut server = Server {
                child: Some(command.spawn().expect("floe binary starts")),
                port,
                log: log.clone(),
            };
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return server;
                }
                if let Some(Ok(Some(_))) = server.child.as_mut().map(|c| c.try_wait()) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let text = server.log();
            assert!(
                text.contains("Address already in use"),
                "floe did not start; its log:\n{text}"
            );
        }
        panic!("floe could not find a free port");
    }

    async fn connect(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(
            &format!(
                "host=127.0.0.1 port={} user=materialize dbname=materialize",
                self.port
            ),
            tokio_postgres::NoTls,
        )
        .await
        .expect("connects to floe");
        tokio::spawn(connection);
        client
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The error of a statement that must fail: (message, detail, hint).
async fn error_of(
    client: &tokio_postgres::Client,
    sql: &str,
) -> (String, Option<String>, Option<String>) {
    let err = client
        .batch_execute(sql)
        .await
        .expect_err(&format!("{sql} must fail"));
    let db = err
        .as_db_error()
        .unwrap_or_else(|| panic!("{sql}: not a server error: {err}"));
    (
        db.message().to_string(),
        db.detail().map(str::to_string),
        db.hint().map(str::to_string),
    )
}

/// A sink's `(status, error)` in `mz_sink_statuses`.
async fn sink_status(client: &tokio_postgres::Client, sink: &str) -> (String, Option<String>) {
    let found = rows(
        client,
        &format!("SELECT status, error FROM mz_internal.mz_sink_statuses WHERE name = '{sink}'"),
    )
    .await;
    let row = found
        .first()
        .unwrap_or_else(|| panic!("no status for {sink}"));
    (row[0].clone().unwrap_or_default(), row[1].clone())
}

/// Waits until the sink's status is `status`; returns its error.
async fn wait_for_status(
    client: &tokio_postgres::Client,
    sink: &str,
    status: &str,
    server: &Server,
) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let (current, error) = sink_status(client, sink).await;
        if current == status {
            return error;
        }
        assert!(
            Instant::now() < deadline,
            "sink {sink} did not become {status}: it is {current} ({error:?})\n--- floe log ---\n{}",
            tail(&server.log(), 60)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An upsert sink with `DELETE MODE = 'position'` into a Unity catalog: accepted, shown by
/// SHOW CREATE SINK, not alterable, and its table read exactly by pyiceberg (which refuses
/// equality deletes) and DuckDB after updates (one key twice in one commit) and deletes.
async fn unity_accepts_a_position_mode_upsert_sink(
    client: &tokio_postgres::Client,
    server: &Server,
    sw: &SeaweedFs,
    namespace: &str,
) {
    crate::support::execute_each(
        client,
        &format!(
            "CREATE TABLE accounts (id bigint NOT NULL, balance int);
             INSERT INTO accounts VALUES (1, 10), (2, 20), (3, 30);
             CREATE SINK accounts_sink IN CLUSTER sink_cluster FROM accounts
               INTO ICEBERG CATALOG CONNECTION iceberg_catalog_connection (
                 NAMESPACE = '{namespace}', TABLE = 'accounts'
               )
               KEY (id) NOT ENFORCED MODE UPSERT
               WITH (COMMIT INTERVAL = '1s', DELETE MODE = 'position');"
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:?}\n{}", server.log()));
    let shown = rows(client, "SHOW CREATE SINK accounts_sink").await;
    let statement = shown[0][1].clone().unwrap_or_default();
    assert!(
        statement.ends_with("WITH (COMMIT INTERVAL = '1s', DELETE MODE = 'position')"),
        "{statement}"
    );
    let (message, _, _) = error_of(
        client,
        "ALTER SINK accounts_sink SET (DELETE MODE = 'equality')",
    )
    .await;
    assert_eq!(message, "cannot change DELETE MODE of a sink");
    wait_for_status(client, "accounts_sink", "running", server).await;
    wait_for_delivery(client, "accounts_sink", SystemTime::now(), server).await;
    // One transaction: key 1 updated twice, key 2 deleted, key 4 inserted.
    client
        .batch_execute(
            "UPDATE accounts SET balance = balance + 1 WHERE id = 1;
             UPDATE accounts SET balance = balance + 1 WHERE id = 1;
             DELETE FROM accounts WHERE id = 2;
             INSERT INTO accounts VALUES (4, 40);",
        )
        .await
        .unwrap();
    wait_for_delivery(client, "accounts_sink", SystemTime::now(), server).await;
    // Then key 1 again and key 4, written by the previous commit, deleted.
    client
        .batch_execute(
            "UPDATE accounts SET balance = balance + 1 WHERE id = 1;
             DELETE FROM accounts WHERE id = 4;",
        )
        .await
        .unwrap();
    let location = wait_for_delivery(client, "accounts_sink", SystemTime::now(), server).await;
    let expected = vec![
        json!({"id": 1, "balance": 13}),
        json!({"id": 3, "balance": 30}),
    ];
    let reader = Reader::for_seaweedfs(sw);
    let duckdb = reader.read(&location);
    assert_eq!(duckdb.sorted_rows(&["id"]), expected);
    let pyiceberg = reader.read_with_pyiceberg(&location);
    assert_eq!(pyiceberg.sorted_rows(&["id"]), expected);
    assert!(duckdb.files_with_content("equality_deletes").is_empty());
    assert!(!duckdb.files_with_content("position_deletes").is_empty());
}

/// Waits until the sink delivered everything written before `written_at`; returns its
/// table's metadata location.
async fn wait_for_delivery(
    client: &tokio_postgres::Client,
    sink: &str,
    written_at: SystemTime,
    server: &Server,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some((location, frontier)) = sink_commit(client, sink).await
            && frontier > written_at
        {
            return location;
        }
        if Instant::now() > deadline {
            let statuses = rows(
                client,
                "SELECT name, status, error FROM mz_internal.mz_sink_statuses",
            )
            .await;
            panic!(
                "sink {sink} did not deliver: {statuses:?}\n--- floe log ---\n{}",
                tail(&server.log(), 80)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The statuses a sink went through, oldest first.
async fn status_history(
    client: &tokio_postgres::Client,
    sink: &str,
) -> Vec<(String, Option<String>)> {
    rows(
        client,
        &format!(
            "SELECT h.status, h.error FROM mz_internal.mz_sink_status_history h JOIN mz_sinks s ON s.id = h.sink_id WHERE s.name = '{sink}' ORDER BY h.occurred_at"
        ),
    )
    .await
    .into_iter()
    .map(|row| (row[0].clone().unwrap_or_default(), row[1].clone()))
    .collect()
}

/// floe with SeaweedFS's admin keys as its AWS principal, assuming roles for sessions of
/// 900 s (STS's least) renewed 894 s early: a new session every 6 s.
fn role_session_server(sw: &SeaweedFs, data_dir: &Path) -> Server {
    Server::start(
        data_dir,
        &[
            "--aws-principal",
            "arn:aws:iam::000000000000:user/floe",
            "--aws-session-duration",
            "15m",
            "--credential-refresh-margin",
            "894s",
        ],
        &[
            ("AWS_ACCESS_KEY_ID", sw.access_key()),
            ("AWS_SECRET_ACCESS_KEY", sw.secret_key()),
        ],
    )
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn external_id(connection: &str) -> String {
    format!("mz_{ENVIRONMENT_ID}_{connection}")
}

/// Drops a namespace of SeaweedFS's catalog (outside floe).
fn drop_namespace(sw: &SeaweedFs, namespace: &str) {
    let response = floe_testkit::http::delete(&format!(
        "{}/v1/{}/namespaces/{namespace}",
        sw.catalog_url(),
        sw.prefix()
    ))
    .bearer(&sw.token())
    .send()
    .unwrap();
    assert!(
        response.status == 204 || response.status == 200,
        "dropping namespace {namespace}: {} {}",
        response.status,
        response.text()
    );
}

/// AWS connections that assume a role: the external id the trust policy must require,
/// the principal from STS GetCallerIdentity, and VALIDATE CONNECTION against moto behind
/// a front as strict as AWS: the role must be assumable with the external id and not
/// without it. Static keys validate through GetCallerIdentity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_connections_assume_roles_with_external_ids() {
    let moto = Moto::start();
    // Step 1B: the role's trust policy names the principal and a PENDING external id.
    let role = moto.create_role_with_external_id("PENDING");
    let dir = tempfile::tempdir().unwrap();
    let sts = moto.sts_endpoint();
    let server = Server::start(
        &dir.path().join("data"),
        &[],
        &[
            ("AWS_ACCESS_KEY_ID", &role.principal.access_key_id),
            ("AWS_SECRET_ACCESS_KEY", &role.principal.secret_access_key),
            ("AWS_ENDPOINT_URL_STS", &sts),
            ("AWS_REGION", moto.region()),
        ],
    );
    let client = server.connect().await;

    // Step 2: the connection (validation is off by default for AWS connections).
    client
        .batch_execute(&format!(
            "CREATE CONNECTION aws_connection TO AWS (
                 ASSUME ROLE ARN = '{}',
                 REGION = '{}',
                 ENDPOINT = '{sts}'
             )",
            role.role_arn,
            moto.region()
        ))
        .await
        .unwrap();
    let found = rows(
        &client,
        &format!(
            "SELECT external_id
             FROM mz_internal.mz_aws_connections awsc
             JOIN mz_connections c ON awsc.id = c.id
             WHERE c.name = 'aws_connection'
             AND awsc.assume_role_arn = '{}'",
            role.role_arn
        ),
    )
    .await;
    let external = external_id("u1");
    assert_eq!(found, vec![vec![Some(external.clone())]]);

    // No --aws-principal: floe asked STS GetCallerIdentity at start-up.
    let deadline = Instant::now() + Duration::from_secs(20);
    let (principal, policy) = loop {
        let found = rows(
            &client,
            "SELECT principal, example_trust_policy::text FROM mz_internal.mz_aws_connections",
        )
        .await;
        if let [row] = found.as_slice()
            && row[0].is_some()
        {
            break (row[0].clone().unwrap(), row[1].clone().unwrap());
        }
        assert!(
            Instant::now() < deadline,
            "no principal: {found:?}\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(principal, role.principal_arn);
    let policy: serde_json::Value = serde_json::from_str(&policy).unwrap();
    assert_eq!(
        policy["Statement"][0]["Principal"]["AWS"],
        json!(role.principal_arn)
    );
    assert_eq!(
        policy["Statement"][0]["Condition"]["StringEquals"]["sts:ExternalId"],
        json!(external)
    );

    // Before the trust policy names the external id, the role cannot be assumed.
    let (message, _, hint) = error_of(&client, "VALIDATE CONNECTION aws_connection").await;
    assert!(
        message.starts_with(&format!(
            "failed to assume role {}: AccessDenied",
            role.role_arn
        )),
        "{message}"
    );
    assert!(hint.is_some_and(|h| h.contains("external ID")));

    // Step 3: the trust policy requires the external id; now it validates.
    moto.set_trust_policy_external_id(&role, Some(&external));
    client
        .batch_execute("VALIDATE CONNECTION aws_connection")
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", server.log()));
    // moto handed out a session for the external id, and the front saw the attempt
    // without one (denied, as AWS would).
    assert_eq!(
        moto.recorded_external_ids(&role.role_arn),
        vec![Some(external.clone())]
    );
    let attempts: Vec<serde_json::Value> = moto
        .sts_requests()
        .into_iter()
        .filter(|r| r["params"]["RoleArn"] == role.role_arn.as_str())
        .collect();
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    assert_eq!(attempts[0]["params"]["ExternalId"], json!(external));
    assert_eq!(attempts[1]["params"]["ExternalId"], json!(external));
    assert!(attempts[2]["params"].get("ExternalId").is_none());
    assert_eq!(attempts[2]["denied_by_front"], json!(true));
    for attempt in &attempts {
        assert_eq!(attempt["signed"], json!(true));
        assert!(
            attempt["params"]["RoleSessionName"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        );
    }

    // A trust policy without the condition: refused, with detail and hint.
    moto.set_trust_policy_external_id(&role, None);
    let (message, detail, hint) = error_of(&client, "VALIDATE CONNECTION aws_connection").await;
    assert_eq!(message, "role trust policy does not require an external ID");
    assert!(detail.is_some_and(|d| d.contains(&role.role_arn)));
    assert!(hint.is_some_and(|h| h.contains(&external) && h.contains("sts:ExternalId")));

    // WITH (VALIDATE = true) runs the same checks at CREATE, and a refused connection is
    // not created.
    let (message, _, _) = error_of(
        &client,
        &format!(
            "CREATE CONNECTION lax TO AWS (ASSUME ROLE ARN = '{}', ASSUME ROLE SESSION NAME = 'floe-lax', REGION = 'us-east-1', ENDPOINT = '{sts}') WITH (VALIDATE = true)",
            role.role_arn
        ),
    )
    .await;
    assert_eq!(message, "role trust policy does not require an external ID");
    assert!(
        rows(
            &client,
            "SELECT name FROM mz_connections WHERE name = 'lax'"
        )
        .await
        .is_empty()
    );
    // The session name reached STS.
    assert!(
        moto.sts_requests()
            .iter()
            .any(|r| r["params"]["RoleSessionName"] == "floe-lax")
    );

    // Static keys: GetCallerIdentity.
    crate::support::execute_each(&client, &format!(
            "CREATE SECRET aws_secret AS '{}';
             CREATE CONNECTION keys TO AWS (ACCESS KEY ID = '{}', SECRET ACCESS KEY = SECRET aws_secret, REGION = 'us-east-1', ENDPOINT = '{sts}') WITH (VALIDATE = true);
             VALIDATE CONNECTION keys;",
            role.principal.secret_access_key, role.principal.access_key_id,
        ))
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", server.log()));
    client
        .batch_execute("ALTER SECRET aws_secret AS 'not-the-secret-key-0000'")
        .await
        .unwrap();
    let (message, _, hint) = error_of(&client, "VALIDATE CONNECTION keys").await;
    assert!(
        message.starts_with("AWS credentials are not valid"),
        "{message}"
    );
    assert!(hint.is_some_and(|h| h.contains("SECRET ACCESS KEY")));
    assert!(!message.contains("not-the-secret-key-0000"));
    assert!(!server.log().contains(&role.principal.secret_access_key));
}

/// floe's principal from a web identity (EKS: a service account's token file and role)
/// with no static keys anywhere: the SDK's chain takes the token to STS
/// `AssumeRoleWithWebIdentity` (the strict front accepts only the registered token, as AWS
/// accepts only its identity provider's), floe shows the session as its principal in
/// `mz_aws_connections`, and a role that trusts that session is assumed from it with the
/// connection's external id, at `AWS_ENDPOINT_URL_STS` (the connection names no ENDPOINT).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_identity_principal_assumes_roles_without_static_keys() {
    let moto = Moto::start();
    let token = format!("eyJ0ZXN0a2l0.{}", floe_testkit::random_hex(24));
    let web = moto.create_web_identity_role(&token);
    let session_arn = format!(
        "arn:aws:sts::{}:assumed-role/{}/floe-eks",
        moto.account_id(),
        web.role_name
    );
    let external = external_id("u1");
    let target = moto.create_role_trusting(&session_arn, &external);
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &token).unwrap();
    // No key, no profile file, no instance metadata: only the web identity can answer.
    let nowhere = dir.path().join("no-such-file");
    let (token_file, nowhere) = (token_file.to_str().unwrap(), nowhere.to_str().unwrap());
    let sts = moto.sts_endpoint();
    let sources = [
        ("AWS_WEB_IDENTITY_TOKEN_FILE", token_file),
        ("AWS_ROLE_ARN", web.role_arn.as_str()),
        ("AWS_ROLE_SESSION_NAME", "floe-eks"),
    ];
    let env = chain_environment(&moto, &sts, nowhere, &sources);
    let server = Server::start(&dir.path().join("data"), &[], &env);
    let signers = principal_assumes_role(&server, &moto, &target, &external, &session_arn).await;
    let sessions: Vec<String> = moto
        .assumed_roles()
        .into_iter()
        .filter(|r| r.role_arn == web.role_arn && r.session_name == "floe-eks")
        .map(|r| r.access_key_id)
        .collect();
    assert!(!sessions.is_empty(), "no web identity session");
    let requests = moto.sts_requests();
    let web_calls: Vec<&serde_json::Value> = requests
        .iter()
        .filter(|r| r["params"]["Action"] == "AssumeRoleWithWebIdentity")
        .collect();
    assert!(!web_calls.is_empty(), "{requests:?}");
    for call in &web_calls {
        assert_eq!(call["token_accepted"], json!(true), "{call}");
        assert_eq!(call["signed"], json!(false), "{call}");
        assert_eq!(call["params"]["RoleArn"], json!(web.role_arn));
    }
    for key in signers {
        assert!(
            sessions.contains(&key),
            "AssumeRole signed by {key}, not by a web identity session {sessions:?}"
        );
    }
    assert!(!server.log().contains(&token), "the token reached the log");
}

/// In a floe started with some principal in its environment: creates the AWS connection
/// `aws_connection` (the first object: external id `u1`) for `target`, checks that floe
/// shows `principal_arn` as its principal in `mz_aws_connections`, and that VALIDATE
/// CONNECTION assumes `target` with the external id and is refused without it. Returns the
/// access key ids that signed the two `AssumeRole` calls of `target`.
async fn principal_assumes_role(
    server: &Server,
    moto: &Moto,
    target: &str,
    external: &str,
    principal_arn: &str,
) -> Vec<String> {
    let client = server.connect().await;
    client
        .batch_execute(&format!(
            "CREATE CONNECTION aws_connection TO AWS (ASSUME ROLE ARN = '{target}', REGION = '{}')",
            moto.region()
        ))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let principal = loop {
        let found = rows(
            &client,
            "SELECT principal, external_id FROM mz_internal.mz_aws_connections",
        )
        .await;
        if let [row] = found.as_slice()
            && let Some(principal) = &row[0]
        {
            assert_eq!(row[1].as_deref(), Some(external));
            break principal.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no principal: {found:?}\n{}\n{}",
            server.log(),
            moto.log_tail(40)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(principal, principal_arn);

    client
        .batch_execute("VALIDATE CONNECTION aws_connection")
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}\n{}", server.log(), moto.log_tail(40)));
    assert_eq!(
        moto.recorded_external_ids(target),
        vec![Some(external.to_string())]
    );
    let requests = moto.sts_requests();
    let attempts: Vec<&serde_json::Value> = requests
        .iter()
        .filter(|r| r["params"]["RoleArn"] == target)
        .collect();
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(attempts[0]["params"]["ExternalId"], json!(external));
    assert!(attempts[1]["params"].get("ExternalId").is_none());
    assert_eq!(attempts[1]["denied_by_front"], json!(true));
    attempts
        .iter()
        .map(|attempt| {
            attempt["access_key_id"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The environment of a floe whose principal comes from one source of the chain: the STS
/// endpoint and region, and every other source of the chain switched off (no profile
/// files, no instance metadata) but those `sources` gives, which take precedence.
fn chain_environment<'a>(
    moto: &'a Moto,
    sts: &'a str,
    nowhere: &'a str,
    sources: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut env = vec![
        ("AWS_ENDPOINT_URL_STS", sts),
        ("AWS_REGION", moto.region()),
        ("AWS_CONFIG_FILE", nowhere),
        ("AWS_SHARED_CREDENTIALS_FILE", nowhere),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ];
    for (name, value) in sources {
        env.retain(|(existing, _)| existing != name);
        env.push((name, value));
    }
    env
}

/// floe's principal from a shared credentials file's named profile (`AWS_PROFILE`), no key
/// in the environment: the profile's IAM user (not the `default` profile's, which holds
/// other valid keys) is floe's principal and assumes the role with the external id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_file_principal_assumes_roles() {
    let moto = Moto::start();
    let external = external_id("u1");
    let role = moto.create_role_with_external_id(&external);
    let admin = moto.admin_credentials();
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials");
    std::fs::write(
        &credentials,
        format!(
            "[default]\naws_access_key_id = {}\naws_secret_access_key = {}\n\n\
             [floe-prod]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            admin.access_key_id,
            admin.secret_access_key,
            role.principal.access_key_id,
            role.principal.secret_access_key
        ),
    )
    .unwrap();
    let nowhere = dir.path().join("no-such-file");
    let (credentials, nowhere) = (credentials.to_str().unwrap(), nowhere.to_str().unwrap());
    let sts = moto.sts_endpoint();
    let env = chain_environment(
        &moto,
        &sts,
        nowhere,
        &[
            ("AWS_SHARED_CREDENTIALS_FILE", credentials),
            ("AWS_PROFILE", "floe-prod"),
        ],
    );
    let server = Server::start(&dir.path().join("data"), &[], &env);
    let signers = principal_assumes_role(
        &server,
        &moto,
        &role.role_arn,
        &external,
        &role.principal_arn,
    )
    .await;
    assert_eq!(signers, vec![role.principal.access_key_id.clone(); 2]);
    assert!(!server.log().contains(&role.principal.secret_access_key));
}

/// floe's principal from ECS container credentials (`AWS_CONTAINER_CREDENTIALS_FULL_URI`
/// at a loopback endpoint, with the `AWS_CONTAINER_AUTHORIZATION_TOKEN` check ECS does):
/// the task role's session is floe's principal and assumes a role that trusts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_credentials_principal_assumes_roles() {
    let moto = Moto::start();
    let session = moto.create_workload_session("ecs-task");
    let external = external_id("u1");
    let target = moto.create_role_trusting(&session.session_arn, &external);
    let token = format!("ecs-{}", floe_testkit::random_hex(16));
    let ecs = floe_testkit::ContainerCredentials::start(&session, Some(&token));
    // As strict as ECS: no token, or another one, gets nothing.
    let uri = ecs.full_uri();
    assert_eq!(floe_testkit::http::get(&uri).send().unwrap().status, 401);
    let wrong = floe_testkit::http::get(&uri).header("Authorization", "ecs-other");
    assert_eq!(wrong.send().unwrap().status, 401);

    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("no-such-file");
    let sts = moto.sts_endpoint();
    let sources = [
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", uri.as_str()),
        ("AWS_CONTAINER_AUTHORIZATION_TOKEN", token.as_str()),
    ];
    let env = chain_environment(&moto, &sts, nowhere.to_str().unwrap(), &sources);
    let server = Server::start(&dir.path().join("data"), &[], &env);
    let signers =
        principal_assumes_role(&server, &moto, &target, &external, &session.session_arn).await;
    assert_eq!(signers, vec![session.credentials.access_key_id.clone(); 2]);
    let served: Vec<_> = ecs.requests().into_iter().skip(2).collect();
    assert!(!served.is_empty());
    assert!(served.iter().all(|r| r.status == 200), "{served:?}");
    let log = server.log();
    assert!(!log.contains(&token) && !log.contains(&session.credentials.secret_access_key));
}

/// floe's principal from EC2 instance metadata in its IMDSv2 form
/// (`AWS_EC2_METADATA_SERVICE_ENDPOINT`): a token first, then the instance profile's role
/// and credentials with it; the session is floe's principal and assumes a role trusting it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_metadata_principal_assumes_roles() {
    let moto = Moto::start();
    let session = moto.create_workload_session("i-0f10e");
    let external = external_id("u1");
    let target = moto.create_role_trusting(&session.session_arn, &external);
    let imds = floe_testkit::InstanceMetadata::start(&session);
    // As strict as IMDS with tokens required: an IMDSv1 GET gets nothing.
    let endpoint = imds.endpoint();
    let v1 = floe_testkit::http::get(&format!(
        "{endpoint}/latest/meta-data/iam/security-credentials/"
    ));
    assert_eq!(v1.send().unwrap().status, 401);

    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("no-such-file");
    let sts = moto.sts_endpoint();
    let sources = [
        ("AWS_EC2_METADATA_DISABLED", "false"),
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", endpoint.as_str()),
    ];
    let env = chain_environment(&moto, &sts, nowhere.to_str().unwrap(), &sources);
    let server = Server::start(&dir.path().join("data"), &[], &env);
    let signers =
        principal_assumes_role(&server, &moto, &target, &external, &session.session_arn).await;
    assert_eq!(signers, vec![session.credentials.access_key_id.clone(); 2]);
    let served: Vec<_> = imds.requests().into_iter().skip(1).collect();
    let token_puts = served
        .iter()
        .filter(|r| r.method == "PUT" && r.path == "/latest/api/token" && r.status == 200);
    assert!(token_puts.count() >= 1, "{served:?}");
    assert!(served.iter().all(|r| r.status == 200), "{served:?}");
    let credentials_path = format!(
        "/latest/meta-data/iam/security-credentials/{}",
        session.role_name
    );
    assert!(
        served.iter().any(|r| r.path == credentials_path),
        "{served:?}"
    );
    assert!(
        !server
            .log()
            .contains(&session.credentials.secret_access_key)
    );
}

/// A REST catalog connection with neither vended credentials nor an AWS connection: the
/// sink stalls naming the missing storage credentials and how to give them, not with the
/// S3 client's "called: reqsign::Sign".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_without_storage_credentials_says_how_to_give_them() {
    let sw = floe_testkit::seaweedfs_shared();
    let namespace = sw.unique_namespace("nocreds");
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[], &[]);
    let client = server.connect().await;
    // One statement at a time: a multi-statement batch is a transaction block, where DDL is
    // refused.
    let statements = [
        format!(
            "CREATE SECRET catalog_oauth AS '{}:{}'",
            sw.access_key(),
            sw.secret_key()
        ),
        format!(
            "CREATE CONNECTION bare TO ICEBERG CATALOG (
                 CATALOG TYPE = 'rest', URL = '{}', WAREHOUSE = '{}',
                 CREDENTIAL = SECRET catalog_oauth
             )",
            sw.catalog_url(),
            sw.warehouse()
        ),
        "CREATE CLUSTER sink_cluster (SIZE = '25cc', REPLICATION FACTOR = 1)".to_string(),
        "CREATE TABLE events (id int, note text)".to_string(),
        "INSERT INTO events VALUES (1, 'a')".to_string(),
        format!(
            "CREATE SINK bare_sink IN CLUSTER sink_cluster FROM events
               INTO ICEBERG CATALOG CONNECTION bare (NAMESPACE = '{namespace}', TABLE = 'bare_sink')
               MODE APPEND WITH (COMMIT INTERVAL = '1s')"
        ),
    ];
    for statement in &statements {
        client
            .batch_execute(statement)
            .await
            .unwrap_or_else(|e| panic!("{e:?}\n{}", server.log()));
    }
    let error = wait_for_status(&client, "bare_sink", "stalled", &server)
        .await
        .unwrap_or_default();
    assert_eq!(
        error,
        format!(
            "iceberg: storage credentials missing for table \"{namespace}.bare_sink\": the connection has no AWS CONNECTION and asks for no vended credentials"
        )
    );
    let details = rows(
        &client,
        "SELECT details::text FROM mz_internal.mz_sink_statuses WHERE name = 'bare_sink'",
    )
    .await;
    let details = details[0][0].clone().unwrap_or_default();
    assert!(
        details.contains("ACCESS DELEGATION") && details.contains("AWS CONNECTION"),
        "{details}"
    );
    assert!(
        !server.log().contains("reqsign"),
        "{}",
        tail(&server.log(), 40)
    );
}

/// The AWS S3 Tables document step by step against SeaweedFS (its SigV4-signed
/// `s3tables` catalog, its S3 and its STS): the assumed-role connection and the external
/// id query, the catalog connection, both sink modes, ALTER SINK, the lag query and the
/// cluster restart procedure; DuckDB reads the tables back.
///
/// SeaweedFS scopes table buckets to the identity that signs: a session assumed from its
/// STS cannot see the bucket its admin keys own, so the catalog connection signs with
/// static keys here (AWS S3 Tables itself takes the role session; the external-id rules
/// are tested against moto above). The assumed role carries the data path instead: a
/// `rest` catalog whose `AWS CONNECTION` assumes the role through SeaweedFS's STS writes
/// its data files with the session, renewed several times while the sink runs (sessions
/// of 900 s with a refresh margin of 894 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_s3_tables_document_end_to_end() {
    let sw = floe_testkit::seaweedfs_shared();
    let namespace = sw.unique_namespace("s3tables");
    let dir = tempfile::tempdir().unwrap();
    let server = role_session_server(sw, &dir.path().join("data"));
    let client = server.connect().await;
    // Step 2: the AWS connection that assumes the role, and its external id.
    client
        .batch_execute(&format!(
            "CREATE CONNECTION aws_role TO AWS (
                 ASSUME ROLE ARN = '{role}',
                 REGION = '{region}',
                 ENDPOINT = '{endpoint}'
             );",
            role = sw.role_arn(),
            region = sw.region(),
            endpoint = sw.sts_endpoint(),
        ))
        .await
        .unwrap();
    let found = rows(
        &client,
        &format!(
            "SELECT external_id
             FROM mz_internal.mz_aws_connections awsc
             JOIN mz_connections c ON awsc.id = c.id
             WHERE c.name = 'aws_role'
             AND awsc.assume_role_arn = '{}';",
            sw.role_arn()
        ),
    )
    .await;
    assert_eq!(found, vec![vec![Some(external_id("u1"))]]);
    let principal = rows(
        &client,
        "SELECT principal FROM mz_internal.mz_aws_connections",
    )
    .await;
    assert_eq!(
        principal,
        vec![vec![Some(
            "arn:aws:iam::000000000000:user/floe".to_string()
        )]]
    );
    // SeaweedFS does not check external ids, so VALIDATE CONNECTION finds that the role
    // can be assumed without one.
    let (message, _, _) = error_of(&client, "VALIDATE CONNECTION aws_role").await;
    assert_eq!(message, "role trust policy does not require an external ID");

    // Step 4: the catalog connection, validated on creation (the default): every catalog
    // request is signed with SigV4 for `s3tables` (unsigned ones get 403).
    crate::support::execute_each(
        &client,
        &format!(
            "CREATE SECRET aws_secret AS '{secret}';
             CREATE CONNECTION aws_connection TO AWS (
                 ACCESS KEY ID = '{key}',
                 SECRET ACCESS KEY = SECRET aws_secret,
                 REGION = '{region}',
                 ENDPOINT = '{endpoint}'
             ) WITH (VALIDATE = false);
             CREATE CONNECTION iceberg_catalog_connection TO ICEBERG CATALOG (
                 CATALOG TYPE = 's3tablesrest',
                 URL = '{url}',
                 WAREHOUSE = '{warehouse}',
                 AWS CONNECTION = aws_connection
             );",
            secret = sw.secret_key(),
            key = sw.access_key(),
            region = sw.region(),
            endpoint = sw.s3_endpoint(),
            url = sw.catalog_url(),
            warehouse = sw.warehouse_arn(),
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:?}\n{}", server.log()));
    client
        .batch_execute("VALIDATE CONNECTION iceberg_catalog_connection")
        .await
        .unwrap();
    // The data path through the assumed role: a REST catalog (OAuth2 with SeaweedFS's key
    // pair, nothing vended) whose data files are written with the role session.
    crate::support::execute_each(
        &client,
        &format!(
            "CREATE SECRET catalog_oauth AS '{}:{}';
             CREATE CONNECTION role_data TO ICEBERG CATALOG (
                 CATALOG TYPE = 'rest',
                 URL = '{}',
                 WAREHOUSE = '{}',
                 CREDENTIAL = SECRET catalog_oauth,
                 AWS CONNECTION = aws_role
             );",
            sw.access_key(),
            sw.secret_key(),
            sw.catalog_url(),
            sw.warehouse(),
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:?}\n{}", server.log()));

    crate::support::execute_each(
        &client,
        &format!(
            "CREATE CLUSTER sink_cluster (SIZE = '25cc', REPLICATION FACTOR = 1);
             CREATE TABLE orders (id int PRIMARY KEY, customer text, amount numeric(10,2));
             INSERT INTO orders VALUES (1, 'ann', 10.50), (2, 'bob', 20.00), (3, 'cy', 30.25);
             CREATE SINK orders_upsert
               IN CLUSTER sink_cluster
               FROM orders
               INTO ICEBERG CATALOG CONNECTION iceberg_catalog_connection (
                 NAMESPACE = '{namespace}',
                 TABLE = 'orders_upsert'
               )
               KEY (id)
               MODE UPSERT
               WITH (COMMIT INTERVAL = '1s');
             CREATE SINK orders_append
               IN CLUSTER sink_cluster
               FROM orders
               INTO ICEBERG CATALOG CONNECTION iceberg_catalog_connection (
                 NAMESPACE = '{namespace}',
                 TABLE = 'orders_append'
               )
               MODE APPEND
               WITH (COMMIT INTERVAL = '1s');
             CREATE SINK orders_role
               IN CLUSTER sink_cluster
               FROM orders
               INTO ICEBERG CATALOG CONNECTION role_data (
                 NAMESPACE = '{namespace}',
                 TABLE = 'orders_role'
               )
               KEY (id)
               MODE UPSERT
               WITH (COMMIT INTERVAL = '1s');"
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:?}\n{}", server.log()));
    let sinks = ["orders_upsert", "orders_append", "orders_role"];
    for sink in sinks {
        wait_for_status(&client, sink, "running", &server).await;
    }
    client
        .batch_execute(
            "UPDATE orders SET amount = 11.00 WHERE id = 1;
             DELETE FROM orders WHERE id = 2;
             INSERT INTO orders VALUES (4, 'dee', 40.00);",
        )
        .await
        .unwrap();
    let written = SystemTime::now();
    let upsert = wait_for_delivery(&client, "orders_upsert", written, &server).await;
    let append = wait_for_delivery(&client, "orders_append", written, &server).await;
    let reader = Reader::for_seaweedfs(sw);
    let expected = vec![
        json!({"id": 1, "customer": "ann", "amount": "11.00"}),
        json!({"id": 3, "customer": "cy", "amount": "30.25"}),
        json!({"id": 4, "customer": "dee", "amount": "40.00"}),
    ];
    assert_eq!(reader.read(&upsert).sorted_rows(&["id"]), expected);
    let history = reader.query(
        &append,
        "SELECT id, customer, amount FROM t GROUP BY id, customer, amount HAVING sum(_mz_diff) > 0",
    );
    assert_eq!(history.sorted_rows(&["id"]), expected);
    let diffs = reader.query(&append, "SELECT count(*) AS n FROM t WHERE _mz_diff = -1");
    assert_eq!(
        diffs.rows,
        vec![json!({"n": 2})],
        "an update and a delete retract"
    );

    // ALTER SINK: a new interval restarts the sink; SHOW CREATE SINK shows it.
    client
        .batch_execute("ALTER SINK orders_upsert SET (COMMIT INTERVAL = '2s')")
        .await
        .unwrap();
    let shown = rows(&client, "SHOW CREATE SINK orders_upsert").await;
    assert!(
        shown[0]
            .iter()
            .flatten()
            .any(|s| s.contains("COMMIT INTERVAL = '2s'")),
        "{shown:?}"
    );

    // The lag query of the troubleshooting section, as written.
    let lag = rows(
        &client,
        "SELECT o.name, l.lag
         FROM mz_internal.mz_wallclock_global_lag AS l
         JOIN mz_catalog.mz_objects AS o ON o.id = l.object_id
         WHERE o.name IN ('orders_upsert', 'orders');",
    )
    .await;
    let mut names: Vec<String> = lag.iter().map(|r| r[0].clone().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["orders", "orders_upsert"], "{lag:?}");
    assert!(lag.iter().all(|r| r[1].is_some()), "{lag:?}");

    // The restart procedure for a managed cluster: paused, then running again, and the
    // catch-up delivers what was written meanwhile.
    client
        .batch_execute("ALTER CLUSTER sink_cluster SET (REPLICATION FACTOR = 0)")
        .await
        .unwrap();
    for sink in sinks {
        wait_for_status(&client, sink, "paused", &server).await;
    }
    client
        .batch_execute(
            "INSERT INTO orders VALUES (5, 'eve', 50.00);
             UPDATE orders SET customer = 'cyrus' WHERE id = 3;",
        )
        .await
        .unwrap();
    client
        .batch_execute("ALTER CLUSTER sink_cluster SET (REPLICATION FACTOR = 1)")
        .await
        .unwrap();
    for sink in sinks {
        wait_for_status(&client, sink, "running", &server).await;
    }
    let expected = vec![
        json!({"id": 1, "customer": "ann", "amount": "11.00"}),
        json!({"id": 3, "customer": "cyrus", "amount": "30.25"}),
        json!({"id": 4, "customer": "dee", "amount": "40.00"}),
        json!({"id": 5, "customer": "eve", "amount": "50.00"}),
    ];
    // Keep the role sink busy across several role sessions.
    let busy_until = Instant::now() + Duration::from_secs(14);
    let mut next = 100;
    let mut role_expected = expected.clone();
    while Instant::now() < busy_until {
        client
            .batch_execute(&format!(
                "INSERT INTO orders VALUES ({next}, 'x{next}', 1.00)"
            ))
            .await
            .unwrap();
        role_expected.push(json!({"id": next, "customer": format!("x{next}"), "amount": "1.00"}));
        next += 1;
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    let written = SystemTime::now();
    let upsert = wait_for_delivery(&client, "orders_upsert", written, &server).await;
    let append = wait_for_delivery(&client, "orders_append", written, &server).await;
    let role = wait_for_delivery(&client, "orders_role", written, &server).await;
    let read = reader.read(&upsert);
    assert_eq!(read.sorted_rows(&["id"]), role_expected);
    // In the table's history: compaction applies them and removes them from the head.
    assert!(
        read.snapshots.iter().any(
            |snapshot| snapshot["summary"]["added-equality-delete-files"]
                .as_str()
                .is_some_and(|added| added != "0")
        ),
        "upserts wrote equality deletes"
    );
    let history = reader.query(
        &append,
        "SELECT id, customer, amount FROM t GROUP BY id, customer, amount HAVING sum(_mz_diff) > 0",
    );
    assert_eq!(history.sorted_rows(&["id"]), role_expected);
    assert_eq!(reader.read(&role).sorted_rows(&["id"]), role_expected);

    // The role was assumed again and again while the sinks ran, and no sink stalled.
    let assumed = server.log().matches("assumed AWS role").count();
    assert!(
        assumed >= 3,
        "assumed the role {assumed} times\n{}",
        server.log()
    );
    for sink in sinks {
        let history = status_history(&client, sink).await;
        assert!(
            history.iter().all(|(status, _)| status != "stalled"),
            "{sink}: {history:?}"
        );
    }
    assert!(!server.log().contains(sw.secret_key()));
}

/// The S3 Tables document with the role doing everything: catalog requests SigV4-signed
/// (`s3tables`) with the assumed-role session and data files written with it, the session
/// assumed again and again while the sink runs. SeaweedFS shows a table bucket only to its
/// owner and to the principals of its policy, and each role session is an identity of its
/// own, so the catalog refuses the session until the bucket's policy allows every
/// principal: the proof that floe signs the catalog with the session, not with its own keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_tables_catalog_and_data_through_an_assumed_role() {
    let sw = SeaweedFs::start();
    let namespace = sw.unique_namespace("role");
    let dir = tempfile::tempdir().unwrap();
    let server = role_session_server(&sw, &dir.path().join("data"));
    let client = server.connect().await;
    crate::support::execute_each(
        &client,
        &format!(
            "CREATE CONNECTION aws_role TO AWS (
                 ASSUME ROLE ARN = '{role}',
                 REGION = '{region}',
                 ENDPOINT = '{endpoint}'
             );
             CREATE CONNECTION role_catalog TO ICEBERG CATALOG (
                 CATALOG TYPE = 's3tablesrest',
                 URL = '{url}',
                 WAREHOUSE = '{warehouse}',
                 AWS CONNECTION = aws_role
             ) WITH (VALIDATE = false);",
            role = sw.role_arn(),
            region = sw.region(),
            endpoint = sw.sts_endpoint(),
            url = sw.catalog_url(),
            warehouse = sw.warehouse_arn(),
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:?}\n{}", server.log()));
    // The session is not the table bucket's owner: the catalog does not show it the bucket.
    let (message, detail, _) = error_of(&client, "VALIDATE CONNECTION role_catalog").await;
    let refusal = format!("{message} {detail:?}");
    assert!(
        refusal.contains("table bucket iceberg-tables not found"),
        "{refusal}"
    );
    // The bucket's policy lets every principal in: now the session signs its way through.
    sw.allow_table_bucket_to_all_principals();
    client
        .batch_execute("VALIDATE CONNECTION role_catalog")
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", server.log()));
    crate::support::execute_each(
        &client,
        &format!(
            "CREATE TABLE orders (id int PRIMARY KEY, customer text);
             INSERT INTO orders VALUES (1, 'ann'), (2, 'bob');
             CREATE SINK orders_sink
               FROM orders
               INTO ICEBERG CATALOG CONNECTION role_catalog (
                 NAMESPACE = '{namespace}',
                 TABLE = 'orders'
               )
               KEY (id)
               MODE UPSERT
               WITH (COMMIT INTERVAL = '1s');"
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:?}\n{}", server.log()));
    wait_for_status(&client, "orders_sink", "running", &server).await;
    // Keep the sink busy across several role sessions (each lives 6 s past the margin).
    let mut expected = vec![
        json!({"id": 1, "customer": "ann"}),
        json!({"id": 2, "customer": "bob"}),
    ];
    let busy_until = Instant::now() + Duration::from_secs(14);
    let mut next = 3;
    while Instant::now() < busy_until {
        client
            .batch_execute(&format!("INSERT INTO orders VALUES ({next}, 'c{next}')"))
            .await
            .unwrap();
        expected.push(json!({"id": next, "customer": format!("c{next}")}));
        next += 1;
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    client
        .batch_execute(
            "UPDATE orders SET customer = 'anne' WHERE id = 1; DELETE FROM orders WHERE id = 2;",
        )
        .await
        .unwrap();
    expected[0] = json!({"id": 1, "customer": "anne"});
    expected.remove(1);
    let location = wait_for_delivery(&client, "orders_sink", SystemTime::now(), &server).await;
    assert_eq!(
        Reader::for_seaweedfs(&sw)
            .read(&location)
            .sorted_rows(&["id"]),
        expected
    );
    let assumed = server.log().matches("assumed AWS role").count();
    assert!(
        assumed >= 3,
        "assumed the role {assumed} times\n{}",
        server.log()
    );
    let history = status_history(&client, "orders_sink").await;
    assert!(
        history.iter().all(|(status, _)| status != "stalled"),
        "{history:?}"
    );
    assert!(!server.log().contains(sw.secret_key()));
}

/// The Databricks Unity Catalog document against the Unity-shaped front: the connection,
/// an APPEND sink read back with DuckDB, MODE UPSERT refused; then its troubleshooting
/// table: a wrong secret, catalog requests refused for want of external data access or
/// EXTERNAL USE SCHEMA, a scope the workspace refuses, a missing namespace and missing
/// vended credentials each stall a sink with an error naming the cause, and the sink
/// recovers once the cause is fixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unity_catalog_document_and_troubleshooting() {
    let sw = floe_testkit::seaweedfs_shared();
    let uc = UnityFront::start(sw);
    let namespace = sw.unique_namespace("unity");
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[], &[]);
    let client = server.connect().await;
    let secret = format!("{}:{}", uc.client_id(), uc.client_secret());
    crate::support::execute_each(
        &client,
        &format!(
            "CREATE SECRET databricks_oauth
               AS '{secret}';
             CREATE CONNECTION iceberg_catalog_connection TO ICEBERG CATALOG (
                 CATALOG TYPE = 'rest',
                 URL = '{url}',
                 WAREHOUSE = '{catalog}',
                 CREDENTIAL = SECRET databricks_oauth,
                 OAUTH2 SERVER URL = '{token_url}',
                 SCOPE = 'all-apis',
                 ACCESS DELEGATION = 'vended-credentials'
             );
             CREATE CLUSTER sink_cluster (SIZE = '25cc', REPLICATION FACTOR = 1);
             CREATE TABLE events (id bigint, kind text NOT NULL);
             INSERT INTO events VALUES (1, 'open'), (2, 'click');
             CREATE SINK events_sink
               IN CLUSTER sink_cluster
               FROM events
               INTO ICEBERG CATALOG CONNECTION iceberg_catalog_connection (
                 NAMESPACE = '{namespace}',
                 TABLE = 'events'
               )
               MODE APPEND
               WITH (COMMIT INTERVAL = '1s');",
            url = uc.url(),
            catalog = uc.catalog_name(),
            token_url = uc.token_url(),
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:?}\n{}", server.log()));
    wait_for_status(&client, "events_sink", "running", &server).await;
    client
        .batch_execute("DELETE FROM events WHERE id = 1; INSERT INTO events VALUES (3, 'close');")
        .await
        .unwrap();
    let written = SystemTime::now();
    let location = wait_for_delivery(&client, "events_sink", written, &server).await;
    let reader = Reader::for_seaweedfs(sw);
    let current = reader.query(
        &location,
        "SELECT id, kind FROM t GROUP BY id, kind HAVING sum(_mz_diff) > 0",
    );
    assert_eq!(
        current.sorted_rows(&["id"]),
        vec![
            json!({"id": 2, "kind": "click"}),
            json!({"id": 3, "kind": "close"})
        ]
    );
    // The token endpoint was asked for the document's scope, by the service principal.
    let grants = uc.grants();
    assert!(!grants.is_empty());
    for grant in &grants {
        assert_eq!(grant.scope.as_deref(), Some("all-apis"), "{grant:?}");
        assert_eq!(
            grant.client_id.as_deref(),
            Some(uc.client_id()),
            "{grant:?}"
        );
        assert!(grant.granted, "{grant:?}");
    }
    // Every catalog request asked for vended credentials.
    let requests = uc.requests();
    assert!(requests.iter().any(|r| {
        r["path"]
            .as_str()
            .is_some_and(|p| p.contains("/tables/events"))
    }));
    assert!(
        requests
            .iter()
            .all(|r| r["access_delegation"] == "vended-credentials"),
        "{requests:?}"
    );

    // Unity managed tables take no equality deletes: plain upsert sinks are refused, with
    // a hint naming the position deletes they accept.
    let (message, _, hint) = error_of(
        &client,
        &format!(
            "CREATE SINK events_upsert FROM events INTO ICEBERG CATALOG CONNECTION iceberg_catalog_connection (NAMESPACE = '{namespace}', TABLE = 'events_upsert') KEY (id) NOT ENFORCED MODE UPSERT WITH (COMMIT INTERVAL = '1s')"
        ),
    )
    .await;
    assert!(
        message.contains("Unity") && message.contains("equality deletes"),
        "{message}"
    );
    assert!(
        hint.as_deref()
            .is_some_and(|hint| hint.contains("DELETE MODE = 'position'")),
        "{hint:?}"
    );
    unity_accepts_a_position_mode_upsert_sink(&client, &server, sw, &namespace).await;

    // Token exchange failure: the OAuth secret was rotated in Databricks but not in floe.
    client
        .batch_execute(&format!(
            "ALTER SECRET databricks_oauth AS '{}:rotated-secret-floe-does-not-know'",
            uc.client_id()
        ))
        .await
        .unwrap();
    let error = wait_for_status(&client, "events_sink", "stalled", &server)
        .await
        .unwrap_or_default();
    assert!(
        error.starts_with("iceberg: token exchange failed at") && error.contains("invalid_client"),
        "{error}"
    );
    assert!(!error.contains("rotated-secret"));
    client
        .batch_execute(&format!("ALTER SECRET databricks_oauth AS '{secret}'"))
        .await
        .unwrap();
    wait_for_status(&client, "events_sink", "running", &server).await;
    client
        .batch_execute("INSERT INTO events VALUES (4, 'scroll')")
        .await
        .unwrap();
    wait_for_delivery(&client, "events_sink", SystemTime::now(), &server).await;

    // Authentication failures on every catalog request: the token endpoint grants tokens,
    // but the metastore has external data access disabled. The sink stalls naming the
    // cause and the grants to check, and resumes by itself once access is enabled again.
    uc.set_external_data_access(false);
    client
        .batch_execute("INSERT INTO events VALUES (5, 'hover')")
        .await
        .unwrap();
    let error = wait_for_status(&client, "events_sink", "stalled", &server)
        .await
        .unwrap_or_default();
    assert!(
        error.starts_with("iceberg: authentication failed")
            && error.contains("403 Forbidden")
            && error.contains("External data access is not enabled"),
        "{error}"
    );
    let details = rows(
        &client,
        "SELECT details::text FROM mz_internal.mz_sink_statuses WHERE name = 'events_sink'",
    )
    .await;
    let details = details[0][0].clone().unwrap_or_default();
    for grant in [
        "External data access",
        "READ METADATA",
        "EXTERNAL USE SCHEMA",
    ] {
        assert!(details.contains(grant), "{details}");
    }
    assert!(
        uc.grants().last().is_some_and(|g| g.granted),
        "tokens are still granted"
    );
    uc.set_external_data_access(true);
    wait_for_status(&client, "events_sink", "running", &server).await;
    wait_for_delivery(&client, "events_sink", SystemTime::now(), &server).await;
    // The same for a schema the service principal lacks EXTERNAL USE SCHEMA on.
    uc.set_external_use_schema(&namespace, false);
    client
        .batch_execute("INSERT INTO events VALUES (6, 'drag')")
        .await
        .unwrap();
    let error = wait_for_status(&client, "events_sink", "stalled", &server)
        .await
        .unwrap_or_default();
    assert!(
        error.starts_with("iceberg: authentication failed")
            && error.contains(&format!(
                "does not have EXTERNAL USE SCHEMA on Schema '{}.{namespace}'",
                uc.catalog_name()
            )),
        "{error}"
    );
    uc.set_external_use_schema(&namespace, true);
    wait_for_status(&client, "events_sink", "running", &server).await;
    wait_for_delivery(&client, "events_sink", SystemTime::now(), &server).await;

    // A SCOPE the workspace does not grant.
    crate::support::execute_each(&client, &format!(
            "CREATE CONNECTION wrong_scope TO ICEBERG CATALOG (
                 CATALOG TYPE = 'rest', URL = '{url}', WAREHOUSE = '{catalog}',
                 CREDENTIAL = SECRET databricks_oauth, OAUTH2 SERVER URL = '{token_url}',
                 SCOPE = 'catalog', ACCESS DELEGATION = 'vended-credentials'
             ) WITH (VALIDATE = false);
             CREATE SINK scope_sink IN CLUSTER sink_cluster FROM events
               INTO ICEBERG CATALOG CONNECTION wrong_scope (NAMESPACE = '{namespace}', TABLE = 'scope_sink')
               MODE APPEND WITH (COMMIT INTERVAL = '1s');",
            url = uc.url(),
            catalog = uc.catalog_name(),
            token_url = uc.token_url(),
        ))
        .await
        .unwrap();
    let error = wait_for_status(&client, "scope_sink", "stalled", &server)
        .await
        .unwrap_or_default();
    assert!(
        error.starts_with("iceberg: token exchange failed at") && error.contains("invalid_scope"),
        "{error}"
    );
    assert!(
        uc.grants()
            .iter()
            .any(|g| g.scope.as_deref() == Some("catalog")
                && g.error.as_deref() == Some("invalid_scope"))
    );
    client.batch_execute("DROP SINK scope_sink").await.unwrap();

    // No ACCESS DELEGATION: Unity's storage cannot be reached.
    crate::support::execute_each(&client, &format!(
            "CREATE CONNECTION no_delegation TO ICEBERG CATALOG (
                 CATALOG TYPE = 'rest', URL = '{url}', WAREHOUSE = '{catalog}',
                 CREDENTIAL = SECRET databricks_oauth, OAUTH2 SERVER URL = '{token_url}',
                 SCOPE = 'all-apis'
             );
             CREATE SINK storage_sink IN CLUSTER sink_cluster FROM events
               INTO ICEBERG CATALOG CONNECTION no_delegation (NAMESPACE = '{namespace}', TABLE = 'storage_sink')
               MODE APPEND WITH (COMMIT INTERVAL = '1s');",
            url = uc.url(),
            catalog = uc.catalog_name(),
            token_url = uc.token_url(),
        ))
        .await
        .unwrap();
    let error = wait_for_status(&client, "storage_sink", "stalled", &server)
        .await
        .unwrap_or_default();
    assert!(
        error.starts_with("iceberg: storage credentials missing: Unity Catalog vended none"),
        "{error}"
    );
    let details = rows(
        &client,
        "SELECT details::text FROM mz_internal.mz_sink_statuses WHERE name = 'storage_sink'",
    )
    .await;
    assert!(
        details[0][0]
            .as_deref()
            .is_some_and(|d| d.contains("ACCESS DELEGATION")),
        "{details:?}"
    );
    client
        .batch_execute("DROP SINK storage_sink")
        .await
        .unwrap();

    // A namespace that disappears before the sink starts: the sink is created paused (no
    // replica), the schema is dropped in the catalog, then the replica comes back.
    let gone = sw.unique_namespace("unitygone");
    crate::support::execute_each(&client, &format!(
            "CREATE CLUSTER parked (SIZE = '25cc', REPLICATION FACTOR = 0);
             CREATE SINK namespace_sink IN CLUSTER parked FROM events
               INTO ICEBERG CATALOG CONNECTION iceberg_catalog_connection (NAMESPACE = '{gone}', TABLE = 'events')
               MODE APPEND WITH (COMMIT INTERVAL = '1s');"
        ))
        .await
        .unwrap();
    wait_for_status(&client, "namespace_sink", "paused", &server).await;
    drop_namespace(sw, &gone);
    client
        .batch_execute("ALTER CLUSTER parked SET (REPLICATION FACTOR = 1)")
        .await
        .unwrap();
    let error = wait_for_status(&client, "namespace_sink", "stalled", &server)
        .await
        .unwrap_or_default();
    assert_eq!(
        error,
        format!("iceberg: namespace \"{gone}\" not found in the catalog")
    );
    // Fixed: the schema exists again, and the sink gets going on its own.
    sw.create_namespace(&gone);
    wait_for_status(&client, "namespace_sink", "running", &server).await;
    let location = wait_for_delivery(&client, "namespace_sink", SystemTime::now(), &server).await;
    let current = reader.query(
        &location,
        "SELECT id, kind FROM t GROUP BY id, kind HAVING sum(_mz_diff) > 0",
    );
    assert_eq!(current.rows.len(), 5, "{:?}", current.rows);
    assert!(!server.log().contains(uc.client_secret()));
}

/// Credentials kept fresh while a sink runs: OAuth2 tokens living 3 s expire many times,
/// and Unity's vended storage credentials, living 8 s (declared by the front and enforced
/// on its S3 port: SeaweedFS itself vends for at least 900 s), are renewed again and again
/// through the table's credentials endpoint; credentials vended without an expiry are
/// renewed every `--credential-refresh-interval`. The sinks keep committing without a
/// stall. Then HTTPS through a TLS proxy trusted with `--extra-ca-bundle`, with 503
/// answers carrying `Retry-After` honoured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_stay_fresh_and_https_with_an_extra_ca() {
    let sw = floe_testkit::seaweedfs_shared();
    let uc = UnityFront::builder()
        .token_ttl(Duration::from_secs(3))
        .credential_ttl(Duration::from_secs(8))
        .start(sw);
    // The same catalog vending credentials without an expiry.
    let timeless = UnityFront::builder().omit_credential_expiry().start(sw);
    let namespace = sw.unique_namespace("fresh");
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        &[
            "--token-refresh-margin",
            "1s",
            "--credential-refresh-margin",
            "5s",
            "--credential-refresh-interval",
            "3s",
            // No maintenance: its table loads (and the reloads its compactions cause)
            // vend fresh credentials too, and the renewals counted here are the sinks'.
            "--sink-maintenance-period",
            "1h",
        ],
        &[],
    );
    let client = server.connect().await;
    let connection = |name: &str, front: &UnityFront| {
        format!(
            "CREATE SECRET {name}_oauth AS '{}:{}';
             CREATE CONNECTION {name} TO ICEBERG CATALOG (
                 CATALOG TYPE = 'rest', URL = '{}', WAREHOUSE = '{}',
                 CREDENTIAL = SECRET {name}_oauth, OAUTH2 SERVER URL = '{}',
                 SCOPE = 'all-apis', ACCESS DELEGATION = 'vended-credentials'
             );",
            front.client_id(),
            front.client_secret(),
            front.url(),
            front.catalog_name(),
            front.token_url(),
        )
    };
    crate::support::execute_each(&client, &format!(
            "{}{}
             CREATE TABLE ticks (n bigint NOT NULL);
             CREATE SINK ticks_sink FROM ticks
               INTO ICEBERG CATALOG CONNECTION unity (NAMESPACE = '{namespace}', TABLE = 'ticks')
               MODE APPEND WITH (COMMIT INTERVAL = '1s');
             CREATE SINK timeless_sink FROM ticks
               INTO ICEBERG CATALOG CONNECTION timeless (NAMESPACE = '{namespace}', TABLE = 'timeless')
               MODE APPEND WITH (COMMIT INTERVAL = '1s');",
            connection("unity", &uc),
            connection("timeless", &timeless),
        ))
        .await
        .unwrap();
    wait_for_status(&client, "ticks_sink", "running", &server).await;
    wait_for_status(&client, "timeless_sink", "running", &server).await;
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(20) {
        n += 1;
        client
            .batch_execute(&format!("INSERT INTO ticks VALUES ({n})"))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let written = SystemTime::now();
    for sink in ["ticks_sink", "timeless_sink"] {
        let location = wait_for_delivery(&client, sink, written, &server).await;
        let count = Reader::for_seaweedfs(sw).query(
            &location,
            "SELECT count(*) AS n, count(DISTINCT n) AS d FROM t",
        );
        assert_eq!(count.rows, vec![json!({"n": n, "d": n})], "{sink}");
        let history = status_history(&client, sink).await;
        assert!(
            history.iter().all(|(status, _)| status != "stalled"),
            "{sink}: {history:?}"
        );
    }
    // Tokens of 3 s over 20 s: exchanged many times, all with the scope asked for.
    let grants = uc.grants();
    assert!(grants.len() >= 5, "{} token exchanges", grants.len());
    assert!(
        grants
            .iter()
            .all(|g| g.granted && g.scope.as_deref() == Some("all-apis"))
    );
    // Credentials living 8 s over 20 s of commits, renewed 5 s before they expire: the
    // credentials endpoint served them again and again, and no S3 request carried an
    // expired key. Without an expiry, they were renewed every 3 s.
    let counters = uc.counters();
    assert!(
        counters.credentials_served >= 4,
        "credentials endpoint served {counters:?}"
    );
    assert!(counters.s3_requests > 0, "{counters:?}");
    assert_eq!(counters.s3_expired_refused, 0, "{counters:?}");
    let timeless_served = timeless.credentials_served();
    assert!(
        timeless_served >= 3,
        "credentials endpoint served {timeless_served} times"
    );

    // HTTPS: a TLS proxy in front of SeaweedFS's catalog, trusted through the extra CA
    // bundle. Without the bundle, the certificate is refused.
    let proxy = FaultProxy::start_tls(&sw.catalog_url());
    let ca = proxy.ca_bundle_path().expect("TLS proxy has a CA");
    let https = proxy.url();
    assert!(https.starts_with("https://"), "{https}");
    let secret_sql = format!(
        "CREATE SECRET cred AS '{}:{}';",
        sw.access_key(),
        sw.secret_key()
    );
    let connection_sql = format!(
        "CREATE CONNECTION tls_catalog TO ICEBERG CATALOG (
             CATALOG TYPE = 'rest', URL = '{https}', WAREHOUSE = '{}',
             CREDENTIAL = SECRET cred, ACCESS DELEGATION = 'vended-credentials'
         );",
        sw.warehouse(),
    );
    let catalog_sql = format!("{secret_sql}\n{connection_sql}");
    {
        let dir = tempfile::tempdir().unwrap();
        let plain = Server::start(&dir.path().join("data"), &[], &[]);
        let client = plain.connect().await;
        client.batch_execute(&secret_sql).await.unwrap();
        let (message, _, _) = error_of(&client, &connection_sql).await;
        assert!(
            message.to_lowercase().contains("certificate") || message.contains("UnknownIssuer"),
            "{message}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        &["--extra-ca-bundle", ca.to_str().unwrap()],
        &[],
    );
    let client = server.connect().await;
    crate::support::execute_each(&client, &format!(
            "{catalog_sql}
             CREATE TABLE t (id int PRIMARY KEY, v text);
             INSERT INTO t VALUES (1, 'a');
             CREATE SINK tls_sink FROM t
               INTO ICEBERG CATALOG CONNECTION tls_catalog (NAMESPACE = '{namespace}', TABLE = 'tls')
               KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1s');"
        ))
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", server.log()));
    wait_for_delivery(&client, "tls_sink", SystemTime::now(), &server).await;
    // The catalog asks floe to come back later, twice: floe waits as told and goes on.
    proxy.fail_next(2, 503, Some(1));
    client
        .batch_execute("INSERT INTO t VALUES (2, 'b')")
        .await
        .unwrap();
    let location = wait_for_delivery(&client, "tls_sink", SystemTime::now(), &server).await;
    let injected = proxy
        .requests()
        .iter()
        .filter(|r| r.outcome == Outcome::Injected(503))
        .count();
    assert_eq!(injected, 2);
    let history = status_history(&client, "tls_sink").await;
    assert!(
        history.iter().all(|(status, _)| status != "stalled"),
        "{history:?}"
    );
    assert_eq!(
        Reader::for_seaweedfs(sw)
            .read(&location)
            .sorted_rows(&["id"]),
        vec![json!({"id": 1, "v": "a"}), json!({"id": 2, "v": "b"})]
    );
}
