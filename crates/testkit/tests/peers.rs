//! Tests of the test environment itself: every peer starts, answers, refuses wrong
//! credentials, and does what floe's tests will rely on.

use floe_testkit::aws::{self, AwsCredentials};
use floe_testkit::fault_proxy::{is_commit, path_matches};
use floe_testkit::http;
use floe_testkit::{
    AwsFront, FaultProxy, Moto, OAuthServer, Outcome, PeerProcess, Reader, SeaweedFs, UnityFront,
    moto_shared, seaweedfs_shared, write_local_reference_table_with_deletes,
    write_reference_table_with_deletes,
};
use serde_json::{Value, json};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn simple_schema() -> Value {
    json!({"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "id", "required": true, "type": "long"},
        {"id": 2, "name": "name", "required": false, "type": "string"}
    ]})
}

/// `s3://bucket/key` -> path-style URL at `endpoint`.
fn s3_url(endpoint: &str, location: &str) -> String {
    format!(
        "{endpoint}/{}",
        location.strip_prefix("s3://").expect("s3:// location")
    )
}

fn jwt_claims(token: &str) -> Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).expect("JWT payload");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .expect("base64url");
    serde_json::from_slice(&bytes).expect("JWT claims")
}

// ---------------------------------------------------------------------------------------
// Building blocks

#[test]
fn sigv4_signer_matches_aws_documentation_example() {
    // The GET ListUsers example of AWS's SigV4 documentation.
    let creds = AwsCredentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
    let req = http::get("https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08").header(
        "Content-Type",
        "application/x-www-form-urlencoded; charset=utf-8",
    );
    let signed = aws::sign_at(req, &creds, "us-east-1", "iam", 1_440_938_160);
    let auth = &signed
        .headers
        .iter()
        .find(|(k, _)| k == "Authorization")
        .unwrap()
        .1;
    assert_eq!(
        auth,
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, \
         SignedHeaders=content-type;host;x-amz-date, \
         Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
    );
}

#[test]
fn route_patterns() {
    assert!(path_matches(
        "/v1/*/namespaces/*/tables/*",
        "/v1/p/namespaces/n/tables/t"
    ));
    assert!(!path_matches(
        "/v1/*/namespaces/*/tables/*",
        "/v1/p/namespaces/n/tables"
    ));
    assert!(path_matches(
        "**/tables/*",
        "/api/x/v1/catalogs/c/namespaces/n/tables/t"
    ));
    assert!(is_commit(
        "POST",
        "/v1/iceberg-tables/namespaces/n/tables/t"
    ));
    assert!(!is_commit(
        "GET",
        "/v1/iceberg-tables/namespaces/n/tables/t"
    ));
    assert!(!is_commit("POST", "/v1/iceberg-tables/namespaces/n/tables"));
    assert!(is_commit("POST", "/v1/iceberg-tables/transactions/commit"));
}

#[test]
fn watchdog_kills_the_peer_and_removes_its_directory_when_the_test_process_goes_away() {
    let dir = tempfile::tempdir().unwrap().keep();
    let python = floe_testkit::peers_dir().join("venv/bin/python");
    let mut peer = PeerProcess::spawn(
        "sleeper",
        &python,
        &[
            "-c".into(),
            "import os, time; open('pid', 'w').write(str(os.getpid())); time.sleep(300)".into(),
        ],
        &[],
        &dir,
    );
    let pid_file = dir.join("pid");
    peer.wait_until(Duration::from_secs(20), || {
        std::fs::read_to_string(&pid_file)
            .ok()
            .filter(|s| !s.is_empty())
            .map(|_| ())
            .ok_or_else(|| "no pid yet".to_string())
    });
    let pid: u32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.split(") ").nth(1).unwrap_or("").starts_with('Z'))
            .unwrap_or(false)
    };
    assert!(alive(pid), "the peer runs");
    peer.close_watchdog_pipe(); // what the end of the test binary does
    let start = Instant::now();
    while (alive(pid) || dir.exists()) && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !alive(pid),
        "the peer survived the closing of the watchdog pipe"
    );
    assert!(
        !dir.exists(),
        "the watchdog did not remove {}",
        dir.display()
    );
}

// ---------------------------------------------------------------------------------------
// SeaweedFS

#[test]
fn seaweedfs_catalog_config_and_authentication() {
    let sw = seaweedfs_shared();
    let token = sw.token();
    for warehouse in [sw.warehouse(), sw.warehouse_arn()] {
        let r = http::get(&format!(
            "{}/v1/config?warehouse={}",
            sw.catalog_url(),
            http::form_encode(&warehouse)
        ))
        .bearer(&token)
        .send()
        .unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["overrides"]["prefix"], sw.prefix(), "{warehouse}");
    }

    // OAuth2 client credentials: form body and HTTP Basic; wrong secret refused.
    let form = |secret: &str| {
        http::post(&sw.oauth_token_url())
            .form(&[
                ("grant_type", "client_credentials"),
                ("client_id", sw.access_key()),
                ("client_secret", secret),
            ])
            .send()
            .unwrap()
    };
    let ok = form(sw.secret_key());
    assert_eq!(ok.status, 200);
    assert_eq!(ok.json()["expires_in"], 3600);
    let wrong = form("not-the-secret");
    assert_eq!(wrong.status, 401, "{}", wrong.text());
    assert_eq!(wrong.json()["error"], "invalid_client");
    let basic = http::post(&sw.oauth_token_url())
        .basic_auth(sw.access_key(), sw.secret_key())
        .form(&[("grant_type", "client_credentials")])
        .send()
        .unwrap();
    assert_eq!(basic.status, 200, "{}", basic.text());
    let basic_wrong = http::post(&sw.oauth_token_url())
        .basic_auth(sw.access_key(), "nope")
        .form(&[("grant_type", "client_credentials")])
        .send()
        .unwrap();
    assert_eq!(basic_wrong.status, 401);

    // Catalog routes: unsigned 403, bogus token 401, SigV4 `s3tables` accepted, a
    // signature with the wrong secret refused.
    let namespaces = format!("{}/v1/{}/namespaces", sw.catalog_url(), sw.prefix());
    let unsigned = http::get(&namespaces).send().unwrap();
    assert_eq!(unsigned.status, 403, "{}", unsigned.text());
    let bogus = http::get(&namespaces).bearer("bogus").send().unwrap();
    assert_eq!(bogus.status, 401, "{}", bogus.text());
    let signed = aws::sign(
        http::get(&namespaces),
        &sw.credentials(),
        sw.region(),
        "s3tables",
    )
    .send()
    .unwrap();
    assert_eq!(signed.status, 200, "{}", signed.text());
    let bad_sig = aws::sign(
        http::get(&namespaces),
        &AwsCredentials::new(sw.access_key(), "wrong-secret"),
        sw.region(),
        "s3tables",
    )
    .send()
    .unwrap();
    assert_eq!(bad_sig.status, 403, "{}", bad_sig.text());
    let bearer = http::get(&namespaces).bearer(&token).send().unwrap();
    assert_eq!(bearer.status, 200);
}

#[test]
fn seaweedfs_vends_table_scoped_credentials_with_an_expiry() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("vend");
    sw.create_table(&ns, "t1", &simple_schema());
    sw.create_table(&ns, "t2", &simple_schema());

    let plain = sw.load_table(&ns, "t1", false);
    assert!(plain["config"].get("s3.access-key-id").is_none(), "{plain}");
    assert!(plain.get("storage-credentials").is_none());

    let before = now_ms();
    let vended = sw.load_table(&ns, "t1", true);
    let config = &vended["config"];
    for key in [
        "s3.access-key-id",
        "s3.secret-access-key",
        "s3.session-token",
        "s3.session-token-expires-at-ms",
        "s3.endpoint",
        "s3.region",
    ] {
        assert!(config.get(key).is_some(), "vended config lacks {key}");
    }
    assert_eq!(config["s3.endpoint"], sw.s3_endpoint());
    let expires: i64 = config["s3.session-token-expires-at-ms"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let lifetime = sw.credential_duration().as_millis() as i64;
    assert!(
        (expires - before - lifetime).abs() < 60_000,
        "expiry {expires} is not now + {lifetime} ms"
    );
    let location = vended["metadata"]["location"].as_str().unwrap();
    let storage = vended["storage-credentials"]
        .as_array()
        .expect("storage-credentials");
    assert_eq!(storage[0]["prefix"], location);

    // The credentials read this table's files and nothing else.
    let creds = AwsCredentials {
        access_key_id: config["s3.access-key-id"].as_str().unwrap().into(),
        secret_access_key: config["s3.secret-access-key"].as_str().unwrap().into(),
        session_token: Some(config["s3.session-token"].as_str().unwrap().into()),
    };
    let own = vended["metadata-location"].as_str().unwrap();
    let r = aws::sign(
        http::get(&s3_url(&sw.s3_endpoint(), own)),
        &creds,
        sw.region(),
        "s3",
    )
    .send()
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let other = sw.metadata_location(&ns, "t2");
    let r = aws::sign(
        http::get(&s3_url(&sw.s3_endpoint(), &other)),
        &creds,
        sw.region(),
        "s3",
    )
    .send()
    .unwrap();
    assert_eq!(
        r.status,
        403,
        "vended credentials reached another table: {}",
        r.text()
    );
}

#[test]
fn seaweedfs_dedicated_instance_with_custom_credential_lifetime_and_sts() {
    let start = Instant::now();
    let sw = SeaweedFs::builder()
        .credential_duration(Duration::from_secs(900))
        .start();
    eprintln!("dedicated SeaweedFS ready in {:?}", start.elapsed());
    assert_ne!(sw.catalog_url(), seaweedfs_shared().catalog_url());
    let ns = sw.unique_namespace("short");
    sw.create_table(&ns, "t", &simple_schema());
    let before = now_ms();
    let vended = sw.load_table(&ns, "t", true);
    let expires: i64 = vended["config"]["s3.session-token-expires-at-ms"]
        .as_str()
        .expect("vended expiry")
        .parse()
        .unwrap();
    assert!(
        (expires - before - 900_000).abs() < 60_000,
        "expiry {expires} is not now + 900 s"
    );

    // STS AssumeRole on the S3 port, then S3 with the session.
    let resp = aws::assume_role(
        &sw.sts_endpoint(),
        sw.region(),
        &sw.credentials(),
        sw.role_arn(),
        "floe-test",
        None,
        Some(900),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let session = aws::parse_assume_role(&resp);
    assert!(session.access_key_id.starts_with("ASIA"));
    let list = list_table_bucket(&sw.s3_endpoint(), &sw, &session);
    assert_eq!(list.status, 200, "{}", list.text());
    assert!(list.text().contains(&ns), "listing lacks {ns}");

    // No vending: no credentials even when asked.
    drop(sw);
    let plain = SeaweedFs::builder().without_vending().start();
    let ns = plain.unique_namespace("novend");
    plain.create_table(&ns, "t", &simple_schema());
    let loaded = plain.load_table(&ns, "t", true);
    assert!(
        loaded["config"].get("s3.access-key-id").is_none(),
        "{loaded}"
    );
}

#[test]
#[should_panic(expected = "900..=43200")]
fn seaweedfs_refuses_credential_lifetimes_below_900_seconds() {
    let _ = SeaweedFs::builder().credential_duration(Duration::from_secs(60));
}

// ---------------------------------------------------------------------------------------
// moto + strict STS front

#[test]
fn moto_front_is_as_strict_as_aws_about_external_ids() {
    let moto = moto_shared();
    let role = moto.create_role_with_external_id("ext-7f3a");

    // IAM is enforced: an unknown key is refused.
    let r = aws::query_api(
        &moto.endpoint(),
        "iam",
        moto.region(),
        &AwsCredentials::new("AKIAUNKNOWNUNKNOWN00", "x"),
        "ListUsers",
        "2010-05-08",
        &[],
    );
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.text().contains("InvalidClientTokenId"), "{}", r.text());

    // No ExternalId: denied by the front (moto alone would allow it).
    let missing = moto.assume_role(&role.principal, &role.role_arn, None);
    assert_eq!(missing.status, 403, "{}", missing.text());
    assert_eq!(
        aws::xml_value(&missing.text(), "Code").as_deref(),
        Some("AccessDenied")
    );
    // Wrong ExternalId: denied (by moto's trust-policy evaluation).
    let wrong = moto.assume_role(&role.principal, &role.role_arn, Some("ext-wrong"));
    assert_eq!(wrong.status, 403, "{}", wrong.text());
    assert_eq!(
        aws::xml_value(&wrong.text(), "Code").as_deref(),
        Some("AccessDenied")
    );
    // Right ExternalId: temporary credentials.
    let right = moto.assume_role(&role.principal, &role.role_arn, Some("ext-7f3a"));
    assert_eq!(right.status, 200, "{}", right.text());
    let session = aws::parse_assume_role(&right);
    assert!(session.session_token.is_some());

    // moto recorded the external id of the session it handed out, and nothing for the
    // denied attempts.
    let assumed: Vec<_> = moto
        .assumed_roles()
        .into_iter()
        .filter(|r| r.role_arn == role.role_arn)
        .collect();
    assert_eq!(assumed.len(), 1, "{assumed:?}");
    assert_eq!(assumed[0].external_id.as_deref(), Some("ext-7f3a"));
    assert_eq!(assumed[0].access_key_id, session.access_key_id);

    // The front saw form-encoded POSTs with the fields AWS expects.
    let seen: Vec<Value> = moto
        .sts_requests()
        .into_iter()
        .filter(|r| r["params"]["RoleArn"] == role.role_arn.as_str())
        .collect();
    assert_eq!(seen.len(), 3);
    for r in &seen {
        assert_eq!(r["method"], "POST");
        assert!(
            r["content_type"]
                .as_str()
                .unwrap()
                .starts_with("application/x-www-form-urlencoded")
        );
        assert_eq!(r["params"]["Action"], "AssumeRole");
        assert_eq!(r["signed"], true);
    }
    assert_eq!(seen[0]["denied_by_front"], true);
    assert!(seen[0]["params"].get("ExternalId").is_none());
    assert_eq!(seen[1]["params"]["ExternalId"], "ext-wrong");
    assert_eq!(seen[2]["params"]["ExternalId"], "ext-7f3a");

    // Directly at moto, a missing ExternalId passes: the front is what makes it strict.
    let lax = aws::assume_role(
        &moto.endpoint(),
        moto.region(),
        &role.principal,
        &role.role_arn,
        "lax",
        None,
        None,
    );
    assert_eq!(lax.status, 200, "{}", lax.text());
    assert_eq!(
        moto.recorded_external_ids(&role.role_arn),
        vec![Some("ext-7f3a".to_string()), None]
    );
}

#[test]
fn moto_dedicated_instance_and_its_s3() {
    let moto = Moto::start();
    assert_ne!(moto.endpoint(), moto_shared().endpoint());
    let role = moto.create_role_with_external_id("ext-s3");
    let session =
        aws::parse_assume_role(&moto.assume_role(&role.principal, &role.role_arn, Some("ext-s3")));
    let bucket = format!("{}/floe-bucket", moto.endpoint());
    let create = aws::sign(
        http::put(&bucket),
        moto.admin_credentials(),
        moto.region(),
        "s3",
    )
    .send()
    .unwrap();
    assert_eq!(create.status, 200, "{}", create.text());
    let put = aws::sign(
        http::put(&format!("{bucket}/k")).body("hello"),
        &session,
        moto.region(),
        "s3",
    )
    .send()
    .unwrap();
    assert_eq!(put.status, 200, "{}", put.text());
    let get = aws::sign(
        http::get(&format!("{bucket}/k")),
        &session,
        moto.region(),
        "s3",
    )
    .send()
    .unwrap();
    assert_eq!(get.text(), "hello");
}

// ---------------------------------------------------------------------------------------
// OAuth2 server

#[test]
fn oauth_server_checks_secrets_records_grants_and_sets_lifetimes() {
    let oauth = OAuthServer::builder()
        .token_path("/oidc/v1/token")
        .client("floe-sink", "sink-secret")
        .client("other", "other-secret")
        .token_ttl(Duration::from_secs(120))
        .start();
    assert!(oauth.token_url().ends_with("/oidc/v1/token"));

    let wrong = http::post(&oauth.token_url())
        .form(&[
            ("grant_type", "client_credentials"),
            ("client_id", "floe-sink"),
            ("client_secret", "wrong"),
            ("scope", "catalog"),
        ])
        .send()
        .unwrap();
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.json()["error"], "invalid_client");
    let unknown = http::post(&oauth.token_url())
        .basic_auth("nobody", "sink-secret")
        .form(&[("grant_type", "client_credentials")])
        .send()
        .unwrap();
    assert_eq!(unknown.status, 401);

    let ok = oauth.request_token(Some("catalog"));
    assert_eq!(ok.status, 200, "{}", ok.text());
    let body = ok.json();
    assert_eq!(body["expires_in"], 120);
    let claims = jwt_claims(body["access_token"].as_str().unwrap());
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        120
    );
    assert_eq!(claims["scope"], "catalog");

    let basic = http::post(&oauth.token_url())
        .basic_auth("other", "other-secret")
        .form(&[("grant_type", "client_credentials"), ("scope", "all-apis")])
        .send()
        .unwrap();
    assert_eq!(basic.status, 200, "{}", basic.text());

    oauth.set_token_ttl(Duration::from_secs(3));
    let short = oauth.request_token(None).json();
    assert_eq!(short["expires_in"], 3);
    let claims = jwt_claims(short["access_token"].as_str().unwrap());
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        3
    );

    let grants = oauth.grants();
    let summary: Vec<_> = grants
        .iter()
        .map(|g| {
            (
                g.client_id.as_deref(),
                g.scope.as_deref(),
                g.granted,
                g.auth.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (Some("floe-sink"), Some("catalog"), false, "body"),
            (Some("nobody"), None, false, "basic"),
            (Some("floe-sink"), Some("catalog"), true, "body"),
            (Some("other"), Some("all-apis"), true, "basic"),
            (Some("floe-sink"), None, true, "body"),
        ]
    );
    assert_eq!(grants[0].error.as_deref(), Some("invalid_client"));
    assert_eq!(grants[4].expires_in, Some(3));

    // Dropping the fixture stops the server.
    let url = oauth.token_url();
    drop(oauth);
    assert!(
        http::post(&url).send().is_err(),
        "the server outlived its fixture"
    );
}

// ---------------------------------------------------------------------------------------
// Unity-shaped front

#[test]
fn unity_front_tokens_catalog_names_and_vended_credentials_only() {
    let sw = seaweedfs_shared();
    let uc = UnityFront::builder()
        .catalog_name("lakehouse")
        .token_ttl(Duration::from_secs(600))
        .start(sw);

    let token_req = |secret: &str, scope: Option<&str>| {
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("client_id", uc.client_id()),
            ("client_secret", secret),
        ];
        if let Some(scope) = scope {
            form.push(("scope", scope));
        }
        http::post(&uc.token_url()).form(&form).send().unwrap()
    };
    let wrong_secret = token_req("wrong", Some("all-apis"));
    assert_eq!(wrong_secret.status, 401);
    assert_eq!(wrong_secret.json()["error"], "invalid_client");
    let wrong_scope = token_req(uc.client_secret(), Some("sql"));
    assert_eq!(wrong_scope.status, 400);
    assert_eq!(wrong_scope.json()["error"], "invalid_scope");
    let no_scope = token_req(uc.client_secret(), None);
    assert_eq!(no_scope.status, 400);
    let ok = token_req(uc.client_secret(), Some("all-apis"));
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(ok.json()["expires_in"], 600);
    let basic = http::post(&uc.token_url())
        .basic_auth(uc.client_id(), uc.client_secret())
        .form(&[("grant_type", "client_credentials"), ("scope", "all-apis")])
        .send()
        .unwrap();
    assert_eq!(basic.status, 200, "{}", basic.text());
    let token = ok.json()["access_token"].as_str().unwrap().to_string();
    let grants = uc.grants();
    assert_eq!(
        grants.iter().map(|g| g.granted).collect::<Vec<_>>(),
        vec![false, false, false, true, true]
    );
    assert_eq!(grants[1].error.as_deref(), Some("invalid_scope"));
    assert_eq!(grants[1].scope.as_deref(), Some("sql"));

    // Catalogs are addressed by name.
    let config = |warehouse: &str, token: &str| {
        http::get(&format!("{}/v1/config?warehouse={warehouse}", uc.url()))
            .bearer(token)
            .send()
            .unwrap()
    };
    let r = config("lakehouse", &token);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["overrides"]["prefix"], "catalogs/lakehouse");
    assert_eq!(uc.prefix(), "catalogs/lakehouse");
    assert_eq!(config("nope", &token).status, 404);
    assert_eq!(config("lakehouse", "bogus").status, 401);
    // Its tokens are its own: SeaweedFS does not take them.
    let r = http::get(&format!(
        "{}/v1/{}/namespaces",
        sw.catalog_url(),
        sw.prefix()
    ))
    .bearer(&token)
    .send()
    .unwrap();
    assert_eq!(r.status, 401);

    // Namespaces and tables through the front land in SeaweedFS's table bucket.
    let base = format!("{}/v1/{}", uc.url(), uc.prefix());
    let ns = floe_testkit::unique_name("uc");
    create_namespace_and_table(&base, &token, &ns);
    assert!(
        sw.metadata_location(&ns, "t")
            .starts_with("s3://iceberg-tables/")
    );

    // Vended credentials only when asked for.
    let load = |vended: bool| {
        let mut req = http::get(&format!("{base}/namespaces/{ns}/tables/t")).bearer(&token);
        if vended {
            req = req.header("X-Iceberg-Access-Delegation", "vended-credentials");
        }
        let r = req.send().unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    };
    let plain = load(false);
    assert!(plain["config"].get("s3.access-key-id").is_none(), "{plain}");
    assert!(plain["config"].get("s3.secret-access-key").is_none());
    assert!(plain.get("storage-credentials").is_none());
    let vended = load(true);
    assert!(vended["config"]["s3.access-key-id"].is_string(), "{vended}");
    assert!(vended["config"]["s3.session-token-expires-at-ms"].is_string());
    assert!(vended["storage-credentials"].is_array());
    let delegation: Vec<Value> = uc
        .requests()
        .into_iter()
        .filter(|r| r["path"].as_str().unwrap().ends_with("/tables/t") && r["method"] == "GET")
        .map(|r| r["access_delegation"].clone())
        .collect();
    assert_eq!(delegation, vec![Value::Null, json!("vended-credentials")]);

    // Revoked tokens get 401; a new token works.
    uc.revoke_tokens();
    assert_eq!(config("lakehouse", &token).status, 401);
    assert_eq!(config("lakehouse", &uc.token()).status, 200);
    // Expired tokens get 401 too.
    uc.set_token_ttl(Duration::from_secs(1));
    let short = uc.token();
    assert_eq!(config("lakehouse", &short).status, 200);
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(config("lakehouse", &short).status, 401);
}

/// Creates namespace `ns` and its table `t` through a REST catalog at `base`; returns the
/// table's creation answer.
fn create_namespace_and_table(base: &str, token: &str, ns: &str) -> http::Response {
    let r = http::post(&format!("{base}/namespaces"))
        .bearer(token)
        .json(&json!({"namespace": [ns], "properties": {}}))
        .send()
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let r = http::post(&format!("{base}/namespaces/{ns}/tables"))
        .bearer(token)
        .json(&json!({"name": "t", "schema": simple_schema()}))
        .send()
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    r
}

#[test]
fn unity_front_serves_table_credentials_enforces_short_lifetimes_and_grants() {
    let sw = seaweedfs_shared();
    let uc = UnityFront::builder()
        .credential_ttl(Duration::from_secs(2))
        .start(sw);
    let token = uc.token();
    let base = format!("{}/v1/{}", uc.url(), uc.prefix());
    let ns = floe_testkit::unique_name("ucc");
    let r = create_namespace_and_table(&base, &token, &ns);
    let location = sw.metadata_location(&ns, "t");
    let table_location = r.json()["metadata"]["location"]
        .as_str()
        .unwrap()
        .to_string();

    // The credentials endpoint answers like Unity: storage credentials for the table,
    // declared to live 2 s and pointing at the front's S3 port.
    let fetch = || {
        let before = now_ms();
        let r = http::get(&format!("{base}/namespaces/{ns}/tables/t/credentials"))
            .bearer(&token)
            .send()
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        let body = r.json();
        let credentials = body["storage-credentials"].as_array().unwrap().clone();
        assert_eq!(credentials.len(), 1, "{body}");
        assert_eq!(credentials[0]["prefix"], table_location.as_str());
        let config = &credentials[0]["config"];
        assert_eq!(config["s3.endpoint"], uc.s3_endpoint().unwrap().as_str());
        let expires: i64 = config["s3.session-token-expires-at-ms"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((expires - before - 2000).abs() < 1000, "expiry {expires}");
        AwsCredentials {
            access_key_id: config["s3.access-key-id"].as_str().unwrap().into(),
            secret_access_key: config["s3.secret-access-key"].as_str().unwrap().into(),
            session_token: config["s3.session-token"].as_str().map(str::to_string),
        }
    };
    let first = fetch();
    assert_eq!(uc.credentials_served(), 1);
    // A loadTable asking for vended credentials gets the short lifetime too.
    let vended = http::get(&format!("{base}/namespaces/{ns}/tables/t"))
        .bearer(&token)
        .header("X-Iceberg-Access-Delegation", "vended-credentials")
        .send()
        .unwrap()
        .json();
    assert_eq!(
        vended["config"]["s3.endpoint"],
        uc.s3_endpoint().unwrap().as_str()
    );

    // The front's S3 port forwards signed requests (signatures hold) until the declared
    // expiry, then refuses the key.
    let object = s3_url(&uc.s3_endpoint().unwrap(), &location);
    let get = |creds: &AwsCredentials, method: &str| {
        aws::sign(http::request(method, &object), creds, sw.region(), "s3")
            .send()
            .unwrap()
    };
    let ok = get(&first, "GET");
    assert_eq!(ok.status, 200, "{}", ok.text());
    let head = get(&first, "HEAD");
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-length"),
        Some(ok.body.len().to_string().as_str())
    );
    std::thread::sleep(Duration::from_millis(2100));
    let expired = get(&first, "GET");
    assert_eq!(expired.status, 403);
    assert!(
        expired.text().contains("ExpiredToken"),
        "{}",
        expired.text()
    );
    let second = fetch();
    assert_ne!(second.access_key_id, first.access_key_id);
    assert_eq!(get(&second, "GET").status, 200);
    let counters = uc.counters();
    assert_eq!(counters.credentials_served, 2);
    assert_eq!(counters.s3_expired_refused, 1);
    // A missing table is the catalog's 404, not a missing endpoint.
    let r = http::get(&format!("{base}/namespaces/{ns}/tables/nope/credentials"))
        .bearer(&token)
        .send()
        .unwrap();
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["type"], "NoSuchTableException");

    // Grants: external data access off refuses every catalog request (not tokens);
    // a revoked EXTERNAL USE SCHEMA refuses the requests on that schema.
    let config = |token: &str| {
        http::get(&format!(
            "{}/v1/config?warehouse={}",
            uc.url(),
            uc.catalog_name()
        ))
        .bearer(token)
        .send()
        .unwrap()
    };
    uc.set_external_data_access(false);
    let refused = config(&token);
    assert_eq!(refused.status, 403);
    assert!(
        refused.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("External data access is not enabled"),
        "{}",
        refused.text()
    );
    let fresh = uc.token();
    assert_eq!(config(&fresh).status, 403);
    uc.set_external_data_access(true);
    assert_eq!(config(&token).status, 200);
    uc.set_external_use_schema(&ns, false);
    let r = http::get(&format!("{base}/namespaces/{ns}/tables/t"))
        .bearer(&token)
        .send()
        .unwrap();
    assert_eq!(r.status, 403);
    assert!(r.text().contains("EXTERNAL USE SCHEMA"), "{}", r.text());
    assert_eq!(config(&token).status, 200);
    uc.set_external_use_schema(&ns, true);
    let r = http::get(&format!("{base}/namespaces/{ns}/tables/t"))
        .bearer(&token)
        .send()
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(uc.counters().permission_denied, 3);

    // Without a declared lifetime, answers can omit the expiry.
    let no_expiry = UnityFront::builder().omit_credential_expiry().start(sw);
    let r = http::get(&format!(
        "{}/v1/{}/namespaces/{ns}/tables/t/credentials",
        no_expiry.url(),
        no_expiry.prefix()
    ))
    .bearer(&no_expiry.token())
    .send()
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let config = &r.json()["storage-credentials"][0]["config"];
    assert!(config["s3.access-key-id"].is_string(), "{config}");
    assert!(config.get("s3.session-token-expires-at-ms").is_none());
    assert_eq!(config["s3.endpoint"], sw.s3_endpoint().as_str());
}

#[test]
fn seaweedfs_role_sessions_see_the_table_bucket_only_through_its_policy() {
    let sw = SeaweedFs::start();
    let ns = sw.unique_namespace("policy");
    let assume = || {
        let resp = aws::assume_role(
            &sw.sts_endpoint(),
            sw.region(),
            &sw.credentials(),
            sw.role_arn(),
            "floe",
            None,
            Some(900),
        );
        assert_eq!(resp.status, 200, "{}", resp.text());
        aws::parse_assume_role(&resp)
    };
    let list = |creds: &AwsCredentials| {
        aws::sign(
            http::get(&format!(
                "{}/v1/{}/namespaces",
                sw.catalog_url(),
                sw.prefix()
            )),
            creds,
            sw.region(),
            "s3tables",
        )
        .send()
        .unwrap()
    };
    // A role session is not the bucket's owner: the bucket does not exist for it.
    let session = assume();
    let r = list(&session);
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(r.text().contains("table bucket iceberg-tables not found"));
    // A policy for every principal lets every session of the role in.
    sw.allow_table_bucket_to_all_principals();
    let r = list(&session);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains(&ns));
    assert_eq!(list(&assume()).status, 200);
    // The session token is what makes the key valid; unsigned requests stay refused.
    let without_token = AwsCredentials {
        session_token: None,
        ..session.clone()
    };
    assert_eq!(list(&without_token).status, 403);
    let unsigned = http::get(&format!(
        "{}/v1/{}/namespaces",
        sw.catalog_url(),
        sw.prefix()
    ))
    .send()
    .unwrap();
    assert_eq!(unsigned.status, 403);
}

// ---------------------------------------------------------------------------------------
// Fault proxy

fn commit_body(key: &str) -> Value {
    json!({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {key: "1"}}
    ]})
}

#[test]
fn fault_proxy_switches_do_what_they_claim() {
    let sw = seaweedfs_shared();
    let proxy = FaultProxy::start(&sw.catalog_url());
    let token = sw.token();
    let config_url = format!("{}/v1/config?warehouse=s3://iceberg-tables", proxy.url());
    let get_config = || http::get(&config_url).bearer(&token).send();

    // Pass-through.
    let r = get_config().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["overrides"]["prefix"], sw.prefix());

    // Injected errors, with and without Retry-After, then back to normal.
    proxy.fail_next(2, 503, Some(7));
    for _ in 0..2 {
        let r = get_config().unwrap();
        assert_eq!(r.status, 503);
        assert_eq!(r.header("Retry-After"), Some("7"));
    }
    proxy.fail_next(1, 429, None);
    let r = get_config().unwrap();
    assert_eq!(r.status, 429);
    assert_eq!(r.header("Retry-After"), None);
    proxy.fail_next(1, 500, None);
    assert_eq!(get_config().unwrap().status, 500);
    assert_eq!(get_config().unwrap().status, 200);

    // Errors for one route only.
    let namespaces = format!("{}/v1/{}/namespaces", proxy.url(), sw.prefix());
    proxy.fail_next_matching("GET", "/v1/*/namespaces", 1, 503, Some(1));
    assert_eq!(get_config().unwrap().status, 200);
    assert_eq!(
        http::get(&namespaces).bearer(&token).send().unwrap().status,
        503
    );
    assert_eq!(
        http::get(&namespaces).bearer(&token).send().unwrap().status,
        200
    );

    // Delay.
    proxy.set_delay(Duration::from_millis(400));
    let t = Instant::now();
    assert_eq!(get_config().unwrap().status, 200);
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    proxy.clear_delay();

    // Refused connections.
    proxy.refuse_connections(true);
    assert!(get_config().is_err(), "a refused connection answered");
    assert!(proxy.refused_connections() >= 1);
    proxy.refuse_connections(false);
    assert_eq!(get_config().unwrap().status, 200);

    // A lost commit response: the commit lands, the client gets no answer.
    let ns = sw.unique_namespace("proxy");
    sw.create_table(&ns, "t", &simple_schema());
    let commit_url = format!(
        "{}/v1/{}/namespaces/{ns}/tables/t",
        proxy.url(),
        sw.prefix()
    );
    proxy.drop_next_commit_response();
    let lost = http::post(&commit_url)
        .bearer(&token)
        .json(&commit_body("lost-answer"))
        .send();
    assert!(
        lost.is_err(),
        "the commit's answer was not dropped: {lost:?}"
    );
    let props = &sw.load_table(&ns, "t", false)["metadata"]["properties"];
    assert_eq!(
        props["lost-answer"], "1",
        "the dropped commit did not land upstream"
    );
    let next = http::post(&commit_url)
        .bearer(&token)
        .json(&commit_body("second"))
        .send()
        .unwrap();
    assert_eq!(next.status, 200, "{}", next.text());

    // Counting.
    assert_eq!(proxy.commit_count(), 2);
    assert_eq!(proxy.count("POST", "/v1/*/namespaces/*/tables/*"), 2);
    assert_eq!(proxy.count("GET", "/v1/config"), 9);
    let outcomes: Vec<Outcome> = proxy
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.outcome)
        .collect();
    assert_eq!(
        outcomes,
        vec![Outcome::ResponseDropped(200), Outcome::Forwarded(200)]
    );
    let by_route = proxy.counts_by_route();
    assert_eq!(by_route.get("GET /v1/config"), Some(&9));
    assert_eq!(
        by_route.get(&format!("GET /v1/{}/namespaces", sw.prefix())),
        Some(&2)
    );
    proxy.reset();
    assert!(proxy.requests().is_empty());
}

#[test]
fn fault_proxy_passes_sigv4_signatures_through_and_terminates_tls() {
    let sw = seaweedfs_shared();
    // Plain proxy: a SigV4-signed request (signed for the proxy's host) still verifies.
    let proxy = FaultProxy::start(&sw.catalog_url());
    let url = format!("{}/v1/{}/namespaces", proxy.url(), sw.prefix());
    let r = aws::sign(http::get(&url), &sw.credentials(), sw.region(), "s3tables")
        .send()
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());

    // TLS proxy with a test CA.
    let tls = FaultProxy::start_tls(&sw.catalog_url());
    assert!(tls.url().starts_with("https://127.0.0.1:"));
    let ca = tls.ca_bundle_path().expect("CA bundle");
    assert!(
        std::fs::read_to_string(&ca)
            .unwrap()
            .contains("BEGIN CERTIFICATE")
    );
    let config = format!("{}/v1/config?warehouse=s3://iceberg-tables", tls.url());
    let r = http::get(&config).ca_bundle(&ca).send().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let by_name = format!("https://localhost:{}/v1/config", tls.port());
    assert_eq!(
        http::get(&by_name).ca_bundle(&ca).send().unwrap().status,
        200
    );
    let untrusted = http::get(&config).send();
    assert!(untrusted.is_err(), "TLS without the test CA was accepted");
    tls.fail_next(1, 503, Some(2));
    let r = http::get(&config).ca_bundle(&ca).send().unwrap();
    assert_eq!(r.status, 503);
    assert_eq!(tls.count("GET", "/v1/config"), 3);
}

// ---------------------------------------------------------------------------------------
// Reader

#[test]
fn reader_applies_equality_and_position_deletes_written_by_pyiceberg() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("reader");
    let table = write_reference_table_with_deletes(sw, &ns, "deletes");
    let expected = vec![
        json!({"id": 1, "name": "a"}),
        json!({"id": 3, "name": "c2"}),
        json!({"id": 4, "name": "d"}),
        json!({"id": 5, "name": "e"}),
    ];
    assert_eq!(table.expected_rows, expected);
    assert_eq!(
        table.metadata_location,
        sw.metadata_location(&ns, "deletes")
    );

    let read = Reader::for_seaweedfs(sw).read(&table.metadata_location);
    assert_eq!(read.sorted_rows(&["id"]), expected);
    assert_eq!(
        read.columns
            .iter()
            .map(|c| (c.name.as_str(), c.ty.as_str()))
            .collect::<Vec<_>>(),
        vec![("id", "BIGINT"), ("name", "VARCHAR")]
    );

    // Snapshots and summaries.
    let ids: Vec<i64> = read
        .snapshots
        .iter()
        .map(|s| s["snapshot-id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, table.snapshot_ids);
    assert_eq!(read.current_snapshot_id, Some(ids[1]));
    let summary = &read.current_snapshot().unwrap()["summary"];
    assert_eq!(summary["operation"], "overwrite");
    assert_eq!(summary["added-equality-deletes"], "1");
    assert_eq!(summary["added-position-deletes"], "1");
    assert_eq!(summary["total-records"], "6"); // deletes not applied in the count

    // Files of the current snapshot.
    assert_eq!(read.files_with_content("data").len(), 2);
    let eq = read.files_with_content("equality_deletes");
    assert_eq!(eq.len(), 1);
    assert_eq!(eq[0]["equality_ids"], json!([1]));
    assert_eq!(eq[0]["manifest_content"], "deletes");
    let pos = read.files_with_content("position_deletes");
    assert_eq!(pos.len(), 1);
    assert_eq!(pos[0]["record_count"], 1);
    for f in &read.files {
        assert!(
            f["column_sizes"].as_object().is_some_and(|m| !m.is_empty()),
            "no column sizes: {f}"
        );
    }

    // An arbitrary query over the table as DuckDB reads it.
    let q = Reader::for_seaweedfs(sw).query(
        &table.metadata_location,
        "SELECT count(*) AS n, max(name) AS top FROM t",
    );
    assert_eq!(q.rows, vec![json!({"n": 4, "top": "e"})]);
}

#[test]
fn reader_reads_a_table_on_the_local_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let table = write_local_reference_table_with_deletes(dir.path(), "local", "deletes");
    assert!(
        table.metadata_location.starts_with("file://"),
        "{}",
        table.metadata_location
    );
    let path = table.metadata_location.strip_prefix("file://").unwrap();
    assert!(std::path::Path::new(path).is_file());
    let read = Reader::local().read(path);
    assert_eq!(read.sorted_rows(&["id"]), table.expected_rows);
    assert_eq!(read.files_with_content("equality_deletes").len(), 1);
    assert_eq!(read.files_with_content("position_deletes").len(), 1);
}

// ---------------------------------------------------------------------------------------
// PostgreSQL

#[test]
fn postgres_runs_with_logical_replication_and_stops_cleanly() {
    let mut pg = floe_testkit::Postgres::start();
    assert_eq!(pg.psql("postgres", "SHOW wal_level"), "logical");
    let db = pg.create_database("fixture");
    pg.psql(&db, "CREATE TABLE t (a int); INSERT INTO t VALUES (1), (2)");
    assert_eq!(pg.psql(&db, "SELECT sum(a) FROM t"), "3");
    // A restart keeps the data and the port.
    let port = pg.port();
    pg.restart();
    assert_eq!(pg.port(), port);
    assert_eq!(pg.psql(&db, "SELECT count(*) FROM t"), "2");
    // A logical slot can be made (the server is configured for it).
    pg.psql(
        &db,
        "SELECT pg_create_logical_replication_slot('fixture_slot', 'pgoutput')",
    );
    let data_dir = pg.data_dir();
    let pid: i32 = std::fs::read_to_string(data_dir.join("postmaster.pid"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    drop(pg);
    // Dropped: the postmaster is gone (an immediate shutdown, not a SIGKILL that would
    // leave shared memory behind) and its directory removed.
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    assert!(!data_dir.exists());
}

#[test]
fn postgres_serves_tls_with_the_test_ca() {
    let ca = floe_testkit::TestCa::generate();
    let pg = floe_testkit::Postgres::builder().tls(&ca).start();
    assert_eq!(pg.psql("postgres", "SHOW ssl"), "on");
    // psql over TCP, verifying the server certificate against the test CA.
    let output = std::process::Command::new(pg.bin_dir().join("psql"))
        .args(["-X", "-A", "-t", "-c", "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"])
        .arg(format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres sslmode=verify-full sslrootcert={}",
            pg.port(),
            ca.ca_bundle_path().display()
        ))
        .env("PGPASSWORD", pg.password())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "t");
}

// ---------------------------------------------------------------------------------------
// AWS front

/// The AWS front: moto decides whether the role may be assumed (a missing external id is
/// denied by the front, a wrong one by moto), SeaweedFS mints the session, which its
/// catalog (table bucket open to every principal) and its S3 accept, also through the
/// front's own S3 forwarding; GetCallerIdentity answers moto's principal.
#[test]
fn aws_front_assumes_roles_like_aws_with_seaweedfs_sessions() {
    let sw = SeaweedFs::start();
    sw.allow_table_bucket_to_all_principals();
    let ns = sw.unique_namespace("front");
    sw.create_table(&ns, "t", &simple_schema());
    let moto = floe_testkit::moto_shared();
    let role = moto.create_role_with_external_id("ext-front-1");
    let front = AwsFront::start(moto, &sw, None);
    let assume = |external_id: Option<&str>| {
        aws::assume_role(
            &front.url(),
            moto.region(),
            &role.principal,
            &role.role_arn,
            "floe",
            external_id,
            Some(900),
        )
    };
    let missing = assume(None);
    assert_eq!(missing.status, 403, "{}", missing.text());
    assert!(
        missing.text().contains("AccessDenied"),
        "{}",
        missing.text()
    );
    let wrong = assume(Some("ext-wrong"));
    assert_eq!(wrong.status, 403, "{}", wrong.text());
    let right = assume(Some("ext-front-1"));
    assert_eq!(right.status, 200, "{}", right.text());
    let session = aws::parse_assume_role(&right);
    assert!(session.session_token.is_some());
    // The session is SeaweedFS's: its catalog lists the namespaces for it.
    let namespaces = aws::sign(
        http::get(&format!(
            "{}/v1/{}/namespaces",
            sw.catalog_url(),
            sw.prefix()
        )),
        &session,
        sw.region(),
        "s3tables",
    )
    .send()
    .unwrap();
    assert_eq!(namespaces.status, 200, "{}", namespaces.text());
    assert!(namespaces.text().contains(&ns));
    // S3 through the front reaches SeaweedFS's S3, signatures intact.
    let listed = list_table_bucket(&front.url(), &sw, &session);
    assert_eq!(listed.status, 200, "{}", listed.text());
    assert!(listed.text().contains(&ns), "{}", listed.text());
    // GetCallerIdentity goes to moto: the principal is moto's IAM user.
    let identity = aws::query_api(
        &front.url(),
        "sts",
        moto.region(),
        &role.principal,
        "GetCallerIdentity",
        "2011-06-15",
        &[],
    );
    assert_eq!(identity.status, 200, "{}", identity.text());
    assert_eq!(
        aws::xml_value(&identity.text(), "Arn").as_deref(),
        Some(role.principal_arn.as_str())
    );
    let requests = front.requests();
    let verdicts: Vec<(bool, bool)> = requests
        .iter()
        .map(|r| {
            (
                r["denied_by_front"].as_bool().unwrap_or(false),
                r["minted"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        [(true, false), (false, false), (false, true)],
        "{requests:?}"
    );
}

/// S3 ListObjectsV2 of SeaweedFS's table bucket at `s3_endpoint`, signed with `creds`.
fn list_table_bucket(s3_endpoint: &str, sw: &SeaweedFs, creds: &AwsCredentials) -> http::Response {
    aws::sign(
        http::get(&format!("{s3_endpoint}/{}?list-type=2", sw.table_bucket())),
        creds,
        sw.region(),
        "s3",
    )
    .send()
    .unwrap()
}
