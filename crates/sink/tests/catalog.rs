//! The catalog client layer against real peers: SeaweedFS's Iceberg REST catalog (OAuth2
//! and SigV4), the Unity-shaped front (its own token endpoint, short token lifetimes), the
//! fault proxy (429/503, injected 401, TLS with a test CA), and pyiceberg reading floe's
//! local SQLite catalog.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use floe_sink::table::{LoadedTable, SinkCatalog};
use floe_sink::{
    AwsAuthConfig, AwsConfig, AwsKeys, CatalogConfig, ClientCredentials, ErrorKind, HttpSettings,
    LocalCatalog, Namespace, RestCatalogClient, SinkError, validate_catalog_with,
};
use floe_testkit::{FaultProxy, SeaweedFs, UnityFront, seaweedfs_shared, unique_name};

/// The sink engine end to end (one test binary per crate).
#[path = "engine/sink.rs"]
mod sink_engine;

/// floe's own maintenance of its tables: manifest merging, snapshot expiry.
#[path = "engine/maintenance.rs"]
mod sink_maintenance;

/// The sink against foreign maintenance, lost and late commit answers, other instances,
/// panics, and the limits of its memory.
#[path = "engine/safety.rs"]
mod sink_safety;

/// UPSERT sinks writing position deletes, read by pyiceberg and DuckDB.
#[path = "engine/position.rs"]
mod sink_position;

/// Partitioned targets: files per partition, deletes in the right partitions, a spec
/// changed by someone else.
#[path = "engine/partition.rs"]
mod sink_partition;

/// A `rest` connection to SeaweedFS with its OAuth2 endpoint.
fn seaweed_rest(sw: &SeaweedFs, url: &str, secret: &str) -> CatalogConfig {
    CatalogConfig::Rest {
        url: url.to_string(),
        warehouse: Some(sw.warehouse()),
        credentials: Some(ClientCredentials {
            client_id: sw.access_key().to_string(),
            client_secret: secret.to_string(),
        }),
        scope: "catalog".into(),
        oauth2_server_url: format!("{url}/v1/oauth/tokens"),
        vended_credentials: false,
        aws: None,
    }
}

/// An `s3tablesrest` connection to SeaweedFS, signing with `secret_key`.
fn seaweed_s3tables(sw: &SeaweedFs, secret_key: &str) -> CatalogConfig {
    CatalogConfig::S3TablesRest {
        url: sw.catalog_url(),
        warehouse: sw.warehouse_arn(),
        aws: AwsConfig {
            endpoint: None,
            region: Some(sw.region().to_string()),
            auth: AwsAuthConfig::Keys(AwsKeys {
                access_key_id: sw.access_key().to_string(),
                secret_access_key: secret_key.to_string(),
                session_token: None,
            }),
        },
    }
}

fn unity_config(uc: &UnityFront, secret: &str, scope: &str, warehouse: &str) -> CatalogConfig {
    CatalogConfig::Rest {
        url: uc.url(),
        warehouse: Some(warehouse.to_string()),
        credentials: Some(ClientCredentials {
            client_id: uc.client_id().to_string(),
            client_secret: secret.to_string(),
        }),
        scope: scope.to_string(),
        oauth2_server_url: uc.token_url(),
        vended_credentials: true,
        aws: None,
    }
}

/// Every piece of text an error carries, including its Debug form.
fn error_text(err: &SinkError) -> String {
    format!(
        "{} | {:?} | {:?} | {:?} | {err:?}",
        err.message, err.detail, err.hint, err
    )
}

fn fast_retries() -> HttpSettings {
    HttpSettings {
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(200),
        ..HttpSettings::default()
    }
}

#[tokio::test]
async fn rest_oauth2_validates_and_round_trips_namespaces() {
    let sw = seaweedfs_shared();
    let config = seaweed_rest(sw, &sw.catalog_url(), sw.secret_key());
    let settings = HttpSettings::default();
    validate_catalog_with(&config, &settings).await.unwrap();

    let client = RestCatalogClient::connect(&config, &settings)
        .await
        .unwrap();
    assert_eq!(client.prefix(), Some(sw.prefix()));
    let ns = Namespace::parse(&unique_name("floe_rest")).unwrap();
    assert!(!client.namespace_exists(&ns).await.unwrap());
    client.create_namespace(&ns).await.unwrap();
    assert!(client.namespace_exists(&ns).await.unwrap());
    assert!(client.list_namespaces().await.unwrap().contains(&ns));
    let err = client.create_namespace(&ns).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::AlreadyExists, "{err:?}");
    // The token is cached: one exchange served every request.
    assert_eq!(client.token_exchanges().await, 1);

    // loadTable: missing table, missing namespace, then a real table.
    let err = client.load_table(&ns, "missing").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::TableNotFound, "{err:?}");
    assert_eq!(
        err.message,
        format!("Iceberg table \"{ns}.missing\" does not exist")
    );
    let absent = Namespace::parse(&unique_name("floe_absent")).unwrap();
    let err = client.load_table(&absent, "t").await.unwrap_err();
    assert!(
        matches!(
            err.kind,
            ErrorKind::NamespaceNotFound | ErrorKind::TableNotFound
        ),
        "{err:?}"
    );
    let schema = serde_json::json!({
        "type": "struct", "schema-id": 0,
        "fields": [{"id": 1, "name": "id", "required": true, "type": "long"}]
    });
    sw.create_table(&ns.to_string(), "orders", &schema);
    let table = client.load_table(&ns, "orders").await.unwrap();
    assert_eq!(
        table.metadata_location.as_deref(),
        Some(sw.metadata_location(&ns.to_string(), "orders").as_str())
    );
    assert_eq!(table.metadata["format-version"], 2);
    // Without access delegation nothing is vended.
    assert!(!table.config.contains_key("s3.secret-access-key"));
}

#[tokio::test]
async fn rest_vended_credentials_header_gets_credentials() {
    let sw = seaweedfs_shared();
    let mut config = seaweed_rest(sw, &sw.catalog_url(), sw.secret_key());
    if let CatalogConfig::Rest {
        vended_credentials, ..
    } = &mut config
    {
        *vended_credentials = true;
    }
    let client = RestCatalogClient::connect(&config, &HttpSettings::default())
        .await
        .unwrap();
    let ns = Namespace::parse(&unique_name("floe_vend")).unwrap();
    client.create_namespace(&ns).await.unwrap();
    let schema = serde_json::json!({
        "type": "struct", "schema-id": 0,
        "fields": [{"id": 1, "name": "id", "required": true, "type": "long"}]
    });
    sw.create_table(&ns.to_string(), "t", &schema);
    let table = client.load_table(&ns, "t").await.unwrap();
    let secret = table
        .config
        .get("s3.secret-access-key")
        .or_else(|| {
            table
                .storage_credentials
                .first()
                .and_then(|c| c.config.get("s3.secret-access-key"))
        })
        .unwrap_or_else(|| panic!("no vended credentials in {table:?}"))
        .clone();
    assert!(!secret.is_empty());
    // Debug output never shows vended secrets.
    assert!(!format!("{table:?}").contains(&secret));
}

/// Writes a small object into the table's data directory through its file IO.
async fn write_probe(table: &LoadedTable, name: &str) -> Result<(), String> {
    let path = format!("{}/data/{name}", table.metadata.location());
    let output = table.file_io.new_output(&path).map_err(|e| e.to_string())?;
    output
        .write(bytes::Bytes::from_static(b"probe"))
        .await
        .map_err(|e| e.to_string())
}

fn long_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "struct", "schema-id": 0,
        "fields": [{"id": 1, "name": "id", "required": true, "type": "long"}]
    })
}

/// Unity vends credentials that expire (here after 3 s, enforced on the front's S3 port):
/// they are due a margin before, and renewed through the table's credentials endpoint,
/// which gives a file IO that writes again while the old one is refused.
#[tokio::test]
async fn vended_credentials_are_renewed_through_the_credentials_endpoint() {
    let sw = seaweedfs_shared();
    let uc = UnityFront::builder()
        .credential_ttl(Duration::from_secs(3))
        .start(sw);
    let ns = sw.unique_namespace("floe_renew");
    sw.create_table(&ns, "t", &long_schema());
    let namespace = Namespace::parse(&ns).unwrap();
    let config = unity_config(&uc, uc.client_secret(), "all-apis", uc.catalog_name());
    let catalog = SinkCatalog::connect(&config, &HttpSettings::default(), None)
        .await
        .unwrap();
    let table = catalog.load_table(&namespace, "t").await.unwrap();
    let expires = table
        .credentials_expire_at_ms
        .expect("Unity's credentials expire");
    assert_eq!(
        catalog.credentials_due_at_ms(&table, Duration::from_millis(1500)),
        Some(expires - 1500)
    );
    // A margin longer than the lifetime makes them due at once.
    assert!(catalog.credentials_need_refresh(&table, Duration::from_secs(10)));
    write_probe(&table, "first").await.unwrap();

    // Past the declared expiry the old credentials are refused; renewed ones work.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let refused = write_probe(&table, "stale").await.unwrap_err();
    assert!(refused.contains("ExpiredToken"), "{refused}");
    let renewed = catalog
        .refresh_credentials(&namespace, "t", &table)
        .await
        .unwrap();
    write_probe(&renewed, "second").await.unwrap();
    assert!(renewed.credentials_expire_at_ms.unwrap() > expires);
    // Only the credentials changed: the table is the one the sink works from.
    assert_eq!(renewed.metadata_location, table.metadata_location);
    assert!(catalog.uses_credentials_endpoint());
    let counters = uc.counters();
    assert_eq!(counters.credentials_served, 1);
    assert_eq!(counters.s3_expired_refused, 1);
    // Renewal went through the endpoint, not through another loadTable.
    let loads = uc
        .requests()
        .iter()
        .filter(|r| r["method"] == "GET" && r["path"].as_str().unwrap().ends_with("/tables/t"))
        .count();
    assert_eq!(loads, 1);
}

/// Vended credentials without an expiry are renewed every `credential_refresh_interval`.
#[tokio::test]
async fn vended_credentials_without_an_expiry_are_renewed_on_an_interval() {
    let sw = seaweedfs_shared();
    let uc = UnityFront::builder().omit_credential_expiry().start(sw);
    let ns = sw.unique_namespace("floe_interval");
    sw.create_table(&ns, "t", &long_schema());
    let namespace = Namespace::parse(&ns).unwrap();
    let config = unity_config(&uc, uc.client_secret(), "all-apis", uc.catalog_name());
    let hourly = HttpSettings {
        credential_refresh_interval: Duration::from_secs(3600),
        ..HttpSettings::default()
    };
    let catalog = SinkCatalog::connect(&config, &hourly, None).await.unwrap();
    let table = catalog.load_table(&namespace, "t").await.unwrap();
    assert_eq!(table.credentials_expire_at_ms, None);
    let due = catalog
        .credentials_due_at_ms(&table, Duration::from_secs(300))
        .expect("vended credentials are renewed even without an expiry");
    assert!(!catalog.credentials_need_refresh(&table, Duration::from_secs(300)));
    let always = HttpSettings {
        credential_refresh_interval: Duration::ZERO,
        ..HttpSettings::default()
    };
    let eager = SinkCatalog::connect(&config, &always, None).await.unwrap();
    let eager_due = eager
        .credentials_due_at_ms(&table, Duration::from_secs(300))
        .unwrap();
    assert_eq!(due - eager_due, 3_600_000, "due one interval after loading");
    assert!(eager.credentials_need_refresh(&table, Duration::from_secs(300)));
    let renewed = eager
        .refresh_credentials(&namespace, "t", &table)
        .await
        .unwrap();
    write_probe(&renewed, "renewed").await.unwrap();
    assert_eq!(uc.credentials_served(), 1);
}

/// SeaweedFS has no credentials endpoint (404): the table is loaded again instead, and the
/// endpoint is not asked again in the same session.
#[tokio::test]
async fn catalogs_without_a_credentials_endpoint_reload_the_table() {
    let sw = seaweedfs_shared();
    let proxy = FaultProxy::start(&sw.catalog_url());
    let mut config = seaweed_rest(sw, &proxy.url(), sw.secret_key());
    if let CatalogConfig::Rest {
        vended_credentials,
        oauth2_server_url,
        ..
    } = &mut config
    {
        *vended_credentials = true;
        *oauth2_server_url = sw.oauth_token_url();
    }
    let ns = sw.unique_namespace("floe_reload");
    sw.create_table(&ns, "t", &long_schema());
    let namespace = Namespace::parse(&ns).unwrap();
    let catalog = SinkCatalog::connect(&config, &HttpSettings::default(), None)
        .await
        .unwrap();
    let table = catalog.load_table(&namespace, "t").await.unwrap();
    assert!(table.credentials_expire_at_ms.is_some());
    let credentials_route = "/v1/*/namespaces/*/tables/*/credentials";
    let table_route = "/v1/*/namespaces/*/tables/*";
    let mut renewed = table.clone();
    for _ in 0..3 {
        renewed = catalog
            .refresh_credentials(&namespace, "t", &renewed)
            .await
            .unwrap();
    }
    write_probe(&renewed, "reloaded").await.unwrap();
    assert!(!catalog.uses_credentials_endpoint());
    assert_eq!(proxy.count("GET", credentials_route), 1);
    assert_eq!(proxy.count("GET", table_route), 1 + 3);
    assert_eq!(renewed.metadata_location, table.metadata_location);
    // A new session asks again.
    let again = SinkCatalog::connect(&config, &HttpSettings::default(), None)
        .await
        .unwrap();
    again
        .refresh_credentials(&namespace, "t", &table)
        .await
        .unwrap();
    assert_eq!(proxy.count("GET", credentials_route), 2);
}

/// A REST connection that neither asks for vended credentials nor has an AWS connection:
/// loading a table names the missing storage credentials and the two ways to give them,
/// instead of the sink's first write failing inside the S3 client ("reqsign::Sign"). With
/// the AWS connection's keys the same table loads and its files can be written.
#[tokio::test]
async fn a_table_without_storage_credentials_names_how_to_give_them() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("floe_nocreds");
    sw.create_table(&ns, "t", &long_schema());
    let namespace = Namespace::parse(&ns).unwrap();
    let config = seaweed_rest(sw, &sw.catalog_url(), sw.secret_key());
    let catalog = SinkCatalog::connect(&config, &HttpSettings::default(), None)
        .await
        .unwrap();
    let err = catalog.load_table(&namespace, "t").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Storage, "{err:?}");
    assert_eq!(
        err.message,
        format!(
            "storage credentials missing for table \"{ns}.t\": the connection has no AWS CONNECTION and asks for no vended credentials"
        )
    );
    let detail = err.detail.clone().unwrap_or_default();
    assert!(detail.contains("s3://"), "{detail}");
    let hint = err.hint.clone().unwrap_or_default();
    assert!(
        hint.contains("ACCESS DELEGATION = 'vended-credentials'")
            && hint.contains("AWS CONNECTION"),
        "{hint}"
    );
    assert!(!error_text(&err).contains("reqsign"), "{err:?}");

    let mut with_keys = config.clone();
    if let CatalogConfig::Rest { aws, .. } = &mut with_keys {
        *aws = Some(AwsConfig {
            endpoint: Some(sw.s3_endpoint()),
            region: Some(sw.region().to_string()),
            auth: AwsAuthConfig::Keys(AwsKeys {
                access_key_id: sw.access_key().to_string(),
                secret_access_key: sw.secret_key().to_string(),
                session_token: None,
            }),
        });
    }
    let catalog = SinkCatalog::connect(&with_keys, &HttpSettings::default(), None)
        .await
        .unwrap();
    let table = catalog.load_table(&namespace, "t").await.unwrap();
    write_probe(&table, "with-keys").await.unwrap();
}

#[tokio::test]
async fn rest_wrong_secret_is_a_token_exchange_error_without_the_secret() {
    let sw = seaweedfs_shared();
    let wrong = format!("wrong-{}", floe_testkit::random_hex(8));
    let config = seaweed_rest(sw, &sw.catalog_url(), &wrong);
    let err = validate_catalog_with(&config, &HttpSettings::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::TokenExchange, "{err:?}");
    assert_eq!(
        err.message,
        format!(
            "token exchange failed at {}: 401 invalid_client",
            sw.oauth_token_url()
        )
    );
    assert!(!err.retryable);
    let text = error_text(&err);
    assert!(!text.contains(&wrong), "secret leaked: {text}");
    assert!(!text.contains(sw.secret_key()), "secret leaked: {text}");
    assert!(!format!("{config:?}").contains(&wrong));

    // No CREDENTIAL at all: the catalog itself refuses, and the hint says what is missing.
    let mut anonymous = seaweed_rest(sw, &sw.catalog_url(), sw.secret_key());
    if let CatalogConfig::Rest { credentials, .. } = &mut anonymous {
        *credentials = None;
    }
    let err = validate_catalog_with(&anonymous, &HttpSettings::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Authentication, "{err:?}");
    assert!(
        err.hint
            .as_deref()
            .unwrap_or_default()
            .contains("set CREDENTIAL"),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_unreachable_catalog_is_unavailable_and_retryable() {
    // A port nothing listens on: bind, note the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let config = CatalogConfig::Rest {
        url: url.clone(),
        warehouse: None,
        credentials: None,
        scope: "catalog".into(),
        oauth2_server_url: format!("{url}/v1/oauth/tokens"),
        vended_credentials: false,
        aws: None,
    };
    let settings = HttpSettings {
        max_retries: 1,
        ..fast_retries()
    };
    let err = validate_catalog_with(&config, &settings).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err:?}");
    assert!(err.retryable);
    assert_eq!(
        err.message,
        format!(
            "catalog unreachable reading the catalog configuration: GET {url}/v1/config: \
             cannot connect: Connection refused (os error 111)"
        )
    );
}

#[tokio::test]
async fn s3tables_sigv4_is_accepted_with_the_right_key_and_refused_with_a_wrong_one() {
    let sw = seaweedfs_shared();
    let config = seaweed_s3tables(sw, sw.secret_key());
    let settings = HttpSettings::default();
    let namespaces = validate_catalog_with(&config, &settings).await.unwrap();
    let client = RestCatalogClient::connect(&config, &settings)
        .await
        .unwrap();
    assert_eq!(client.prefix(), Some(sw.prefix()));
    let ns = Namespace::parse(&unique_name("floe_sigv4")).unwrap();
    assert!(!namespaces.contains(&ns));
    client.create_namespace(&ns).await.unwrap();
    assert!(client.list_namespaces().await.unwrap().contains(&ns));
    assert!(client.namespace_exists(&ns).await.unwrap());
    assert_eq!(client.token_exchanges().await, 0);

    let wrong = format!("wrong-{}", floe_testkit::random_hex(8));
    let err = validate_catalog_with(&seaweed_s3tables(sw, &wrong), &settings)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Authentication, "{err:?}");
    assert!(
        err.message.starts_with("authentication failed"),
        "{}",
        err.message
    );
    let text = error_text(&err);
    assert!(!text.contains(&wrong), "secret leaked: {text}");
}

#[tokio::test]
async fn unity_token_is_refreshed_before_it_expires_and_after_alter_secret() {
    let sw = seaweedfs_shared();
    let uc = UnityFront::builder()
        .token_ttl(Duration::from_secs(3))
        .start(sw);
    let config = unity_config(&uc, uc.client_secret(), "all-apis", uc.catalog_name());
    let settings = HttpSettings {
        token_refresh_margin: Duration::from_secs(2),
        ..HttpSettings::default()
    };
    let client = RestCatalogClient::connect(&config, &settings)
        .await
        .unwrap();
    assert_eq!(client.prefix(), Some(uc.prefix().as_str()));
    client.list_namespaces().await.unwrap();
    assert_eq!(client.token_exchanges().await, 1);
    // Past expiry minus the margin (1 s), but before the token expires (3 s).
    tokio::time::sleep(Duration::from_millis(1300)).await;
    client.list_namespaces().await.unwrap();
    assert_eq!(client.token_exchanges().await, 2);
    let grants = uc.grants();
    assert_eq!(grants.len(), 2, "{grants:?}");
    assert!(
        grants
            .iter()
            .all(|g| g.granted && g.scope.as_deref() == Some("all-apis"))
    );
    // Every catalog request asked for vended credentials.
    let requests = uc.requests();
    assert!(!requests.is_empty());
    assert!(
        requests
            .iter()
            .all(|r| r["access_delegation"] == "vended-credentials"),
        "{requests:?}"
    );

    // ALTER SECRET to a wrong secret: the cached token is dropped, the exchange fails.
    let wrong = format!("rotated-{}", floe_testkit::random_hex(8));
    client
        .set_credentials(Some(ClientCredentials {
            client_id: uc.client_id().to_string(),
            client_secret: wrong.clone(),
        }))
        .await
        .unwrap();
    let err = client.list_namespaces().await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::TokenExchange, "{err:?}");
    assert!(
        err.message
            .ends_with(&format!("{}: 401 invalid_client", uc.token_url())),
        "{}",
        err.message
    );
    assert!(!error_text(&err).contains(&wrong));
    // And back to the right one.
    client
        .set_credentials(Some(ClientCredentials {
            client_id: uc.client_id().to_string(),
            client_secret: uc.client_secret().to_string(),
        }))
        .await
        .unwrap();
    client.list_namespaces().await.unwrap();
}

/// A token endpoint that says its token lives for ages (`expires_in` past what a clock can
/// hold): the token is used, never a panic (it was one: an `Instant` overflow).
#[tokio::test]
async fn a_token_that_claims_to_live_for_ages_is_used_without_a_panic() {
    let uc = UnityFront::start(seaweedfs_shared());
    uc.set_token_ttl(Duration::from_secs(9_300_000_000_000_000_000));
    let config = unity_config(&uc, uc.client_secret(), uc.scope(), uc.catalog_name());
    let client = RestCatalogClient::connect(&config, &HttpSettings::default())
        .await
        .unwrap();
    client.list_namespaces().await.unwrap();
    client.list_namespaces().await.unwrap();
    assert_eq!(client.token_exchanges().await, 1, "the token is kept");
}

#[tokio::test]
async fn unity_wrong_scope_and_wrong_warehouse_name_their_cause() {
    let sw = seaweedfs_shared();
    let uc = UnityFront::start(sw);
    let settings = HttpSettings::default();

    let err = validate_catalog_with(
        &unity_config(&uc, uc.client_secret(), "catalog", uc.catalog_name()),
        &settings,
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::TokenExchange, "{err:?}");
    assert_eq!(
        err.message,
        format!(
            "token exchange failed at {}: 400 invalid_scope",
            uc.token_url()
        )
    );

    let err = validate_catalog_with(
        &unity_config(&uc, uc.client_secret(), "all-apis", "no_such_catalog"),
        &settings,
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidConfig, "{err:?}");
    assert!(
        err.message
            .contains("Catalog 'no_such_catalog' does not exist"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_401_from_the_catalog_fetches_a_new_token_once() {
    let sw = seaweedfs_shared();
    let proxy = FaultProxy::start(&sw.catalog_url());
    let config = seaweed_rest(sw, &proxy.url(), sw.secret_key());
    let client = RestCatalogClient::connect(&config, &HttpSettings::default())
        .await
        .unwrap();
    assert_eq!(client.token_exchanges().await, 1);

    proxy.fail_next_matching("GET", "/v1/*/namespaces", 1, 401, None);
    client.list_namespaces().await.unwrap();
    assert_eq!(client.token_exchanges().await, 2);
    assert_eq!(proxy.count("GET", "/v1/*/namespaces"), 2);

    // A second 401 right after the fresh token is an authentication error, not a loop.
    proxy.fail_next_matching("GET", "/v1/*/namespaces", 2, 401, None);
    let err = client.list_namespaces().await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Authentication, "{err:?}");
    assert_eq!(client.token_exchanges().await, 3);
    assert_eq!(proxy.count("GET", "/v1/*/namespaces"), 4);
}

/// A read whose connection is lost after it went out is sent again on a fresh connection
/// (it changes nothing), within the retry bound; one that timed out is not (a slow server
/// costs one timeout). A commit whose answer is lost is never re-sent: the sink reloads
/// the table and finds it (`sink_engine::append_random_workload_*`).
#[tokio::test]
async fn a_read_that_lost_its_connection_is_sent_again_and_a_timed_out_one_is_not() {
    let sw = seaweedfs_shared();
    let proxy = FaultProxy::start(&sw.catalog_url());
    let config = seaweed_rest(sw, &proxy.url(), sw.secret_key());
    let settings = HttpSettings {
        max_retries: 3,
        request_timeout: Duration::from_secs(2),
        ..fast_retries()
    };
    let client = RestCatalogClient::connect(&config, &settings)
        .await
        .unwrap();

    proxy.drop_next_responses("GET", "/v1/*/namespaces", 2);
    client.list_namespaces().await.unwrap();
    assert_eq!(proxy.count("GET", "/v1/*/namespaces"), 3);

    // Bounded: 1 try + 3 retries, then the catalog is unavailable (retryable).
    proxy.reset();
    proxy.drop_next_responses("GET", "/v1/*/namespaces", 10);
    let err = client.list_namespaces().await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err:?}");
    assert!(err.retryable);
    assert_eq!(proxy.count("GET", "/v1/*/namespaces"), 4);

    // A read that times out fails after one attempt.
    proxy.reset();
    proxy.set_delay(Duration::from_secs(4));
    let started = Instant::now();
    let err = client.list_namespaces().await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    // The proxy records a request once its delay is over: wait out every one sent.
    tokio::time::sleep(Duration::from_secs(5)).await;
    proxy.clear_delay();
    assert_eq!(proxy.count("GET", "/v1/*/namespaces"), 1);
}

#[tokio::test]
async fn retry_after_is_honoured_for_429_and_503() {
    let sw = seaweedfs_shared();
    let proxy = FaultProxy::start(&sw.catalog_url());
    let config = seaweed_rest(sw, &proxy.url(), sw.secret_key());
    let settings = HttpSettings {
        max_retries: 3,
        max_retry_after: Duration::from_secs(5),
        ..fast_retries()
    };
    let client = RestCatalogClient::connect(&config, &settings)
        .await
        .unwrap();

    // Two refusals asking for 1 s each: the request succeeds after waiting them out.
    proxy.fail_next_matching("GET", "/v1/*/namespaces", 1, 503, Some(1));
    proxy.fail_next_matching("GET", "/v1/*/namespaces", 1, 429, Some(1));
    let started = Instant::now();
    client.list_namespaces().await.unwrap();
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_secs(2), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    assert_eq!(proxy.count("GET", "/v1/*/namespaces"), 3);

    // Retries are bounded: 1 try + 3 retries, then a retryable unavailable error.
    proxy.reset();
    proxy.fail_next_matching("GET", "/v1/*/namespaces", 10, 503, Some(0));
    let err = client.list_namespaces().await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err:?}");
    assert!(err.retryable);
    assert_eq!(proxy.count("GET", "/v1/*/namespaces"), 4);
    assert_eq!(
        err.detail.as_deref(),
        Some("gave up after 4 attempts (Retry-After 0s)")
    );

    // A Retry-After beyond what one request may wait fails at once, retryable.
    proxy.reset();
    proxy.fail_next_matching("GET", "/v1/*/namespaces", 1, 429, Some(3600));
    let started = Instant::now();
    let err = client.list_namespaces().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err:?}");
    assert!(err.retryable);
    assert_eq!(proxy.count("GET", "/v1/*/namespaces"), 1);

    // The token endpoint's 503 is waited out too.
    proxy.reset();
    client
        .set_credentials(Some(ClientCredentials {
            client_id: sw.access_key().to_string(),
            client_secret: sw.secret_key().to_string(),
        }))
        .await
        .unwrap();
    proxy.fail_next_matching("POST", "/v1/oauth/tokens", 1, 503, Some(1));
    let started = Instant::now();
    client.list_namespaces().await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(proxy.count("POST", "/v1/oauth/tokens"), 2);
}

#[tokio::test]
async fn extra_ca_bundle_is_trusted() {
    let sw = seaweedfs_shared();
    let proxy = FaultProxy::start_tls(&sw.catalog_url());
    assert!(proxy.url().starts_with("https://"));
    let config = seaweed_rest(sw, &proxy.url(), sw.secret_key());

    let trusted = HttpSettings {
        extra_ca_bundle: proxy.ca_bundle_path(),
        ..HttpSettings::default()
    };
    validate_catalog_with(&config, &trusted).await.unwrap();

    // Without the bundle the test CA is unknown: the TLS handshake fails.
    let untrusted = HttpSettings {
        max_retries: 0,
        ..HttpSettings::default()
    };
    let err = validate_catalog_with(&config, &untrusted)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::TokenExchange, "{err:?}");
    assert!(
        err.message.to_lowercase().contains("certificate"),
        "{}",
        err.message
    );

    // A bundle that is not PEM is a configuration error.
    let dir = tempfile::tempdir().unwrap();
    let bogus = dir.path().join("bogus.pem");
    std::fs::write(&bogus, "not a certificate").unwrap();
    let err = validate_catalog_with(
        &config,
        &HttpSettings {
            extra_ca_bundle: Some(bogus),
            ..HttpSettings::default()
        },
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidConfig, "{err:?}");
}

/// Runs Python code with the peers' venv (pyiceberg installed) and returns its stdout.
fn python(code: &str, args: &[&str]) -> String {
    let python = floe_testkit::peers_dir().join("venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/install-peers",
        python.display()
    );
    let output = Command::new(python)
        .arg("-c")
        .arg(code)
        .args(args)
        .output()
        .expect("run python");
    assert!(
        output.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

const PYICEBERG_LIST: &str = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
catalog = SqlCatalog(sys.argv[1], uri="sqlite:///" + sys.argv[2], warehouse="file://" + sys.argv[3])
print(json.dumps(sorted(".".join(ns) for ns in catalog.list_namespaces())))
"#;

const PYICEBERG_CREATE: &str = r#"
import sys
import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
catalog = SqlCatalog(sys.argv[1], uri="sqlite:///" + sys.argv[2], warehouse="file://" + sys.argv[3])
catalog.create_namespace("from_pyiceberg")
table = catalog.create_table("from_pyiceberg.t", schema=pa.schema([("id", pa.int64())]))
print(table.metadata_location)
"#;

fn path_arg(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

#[tokio::test]
async fn local_catalog_is_readable_by_pyiceberg() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("data/catalog.db");
    let warehouse = dir.path().join("warehouse");
    let config = CatalogConfig::Local {
        database: database.clone(),
        warehouse: warehouse.clone(),
    };
    // Validation creates the catalog file.
    let namespaces = validate_catalog_with(&config, &HttpSettings::default())
        .await
        .unwrap();
    assert!(namespaces.is_empty());
    assert!(database.exists());

    let catalog = LocalCatalog::open(&database, &warehouse).unwrap();
    for name in ["sales", "ops.metrics"] {
        catalog
            .create_namespace(&Namespace::parse(name).unwrap(), &BTreeMap::new())
            .unwrap();
    }
    let listed = python(
        PYICEBERG_LIST,
        &[
            floe_sink::local::LOCAL_CATALOG_NAME,
            path_arg(&database),
            path_arg(&warehouse),
        ],
    );
    assert_eq!(listed.trim(), r#"["ops", "sales"]"#);

    // And the other way: a table pyiceberg creates is visible to floe.
    let location = python(
        PYICEBERG_CREATE,
        &[
            floe_sink::local::LOCAL_CATALOG_NAME,
            path_arg(&database),
            path_arg(&warehouse),
        ],
    );
    let from_pyiceberg = Namespace::parse("from_pyiceberg").unwrap();
    assert!(catalog.namespace_exists(&from_pyiceberg).unwrap());
    assert_eq!(
        catalog.load_table_location(&from_pyiceberg, "t").unwrap(),
        location.trim()
    );
    assert_eq!(
        catalog.list_namespaces().unwrap(),
        vec![
            Namespace::parse("from_pyiceberg").unwrap(),
            Namespace::parse("ops").unwrap(),
            Namespace::parse("sales").unwrap(),
        ]
    );
    // floe's compare and swap refuses a stale expected location.
    let err = catalog
        .swap_metadata_location(
            &from_pyiceberg,
            "t",
            "file:///stale.json",
            "file:///new.json",
        )
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::CommitConflict, "{err:?}");
}
