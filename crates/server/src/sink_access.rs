//! `floe sink-access SINK [-- PROGRAM ARGS...]`: where a sink's Iceberg table is and how to
//! read it, resolved from the data directory with the sink's own connection, for a reader
//! such as `scripts/read-sink` (DuckDB).
//!
//! The data directory holds everything needed: the catalog (the sink, its connection, the
//! AWS connection behind it) and the key of the encrypted secrets. The table is loaded the
//! way the sink loads it (`floe_sink::catalog::connect`): an OAuth2 token for a REST
//! catalog, SigV4 with an assumed role (floe's principal keys from the environment, as for
//! the server) for S3 Tables, vended credentials for Unity Catalog, the file system for
//! the embedded catalog. The answer is a JSON document: the current metadata location and
//! the storage properties (`s3.*`) of the table's files, credentials included.
//!
//! Credentials never reach a terminal or a log: with a PROGRAM, the document goes to that
//! program's standard input only (a pipe), and floe exits with the program's status;
//! without one, it is printed with every credential replaced by `********`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, bail};
use floe_adapter::credentials::{CredentialSettings, Credentials};
use floe_catalog::Catalog;
use floe_sink::local::file_uri_path;
use floe_sink::rest::is_sensitive_property;
use floe_sink::{CatalogConfig, Namespace};
use floe_sql::catalog::{ItemDefinition, SinkDefinition};
use serde_json::{Value, json};

/// What `sink-access` needs besides the sink's name: the server's own settings.
pub struct AccessSettings<'a> {
    pub data_dir: &'a Path,
    pub aws_principal: Option<String>,
    pub extra_ca_bundle: Option<std::path::PathBuf>,
    pub credentials: CredentialSettings,
}

/// Resolves the sink's table and hands the document to `program` (or prints it redacted).
pub async fn run(
    settings: AccessSettings<'_>,
    sink: &str,
    program: &[String],
) -> anyhow::Result<ExitCode> {
    let document = resolve(&settings, sink).await?;
    let Some((program, args)) = program.split_first() else {
        println!("{:#}", redacted(&document));
        return Ok(ExitCode::SUCCESS);
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {program}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A reader that exits early closes the pipe; its own status tells what happened.
        let _ = stdin.write_all(document.to_string().as_bytes());
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for {program}"))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}

/// The access document of `sink`'s table (credentials included).
async fn resolve(settings: &AccessSettings<'_>, sink: &str) -> anyhow::Result<Value> {
    let data_dir = settings.data_dir;
    if !data_dir.join("catalog.db").is_file() {
        bail!(
            "{} is not a floe data directory (it has no catalog.db): pass the one floe runs with, through --data-dir or FLOE_DATA_DIR",
            data_dir.display()
        );
    }
    let catalog = Catalog::open(data_dir, None)
        .with_context(|| format!("opening the data directory {}", data_dir.display()))?;
    let (name, definition) = find_sink(&catalog, sink)?;
    let config =
        floe_adapter::connection_config::sink_catalog_config(&catalog, data_dir, definition)?;
    let credentials = Credentials::new(
        settings.extra_ca_bundle.clone(),
        settings.aws_principal.clone(),
        &settings.credentials,
    );
    let catalog_type = catalog_type(&config);
    let connection = credentials.sink_connection(config)?;
    let namespace = Namespace::parse(&definition.namespace)?;
    let table_catalog = floe_sink::catalog::connect(
        &connection.catalog,
        credentials.http(),
        connection.aws_credentials.clone(),
    )
    .await?;
    let table = table_catalog
        .load_table(&namespace, &definition.table)
        .await
        .with_context(|| format!("loading the table of sink {name}"))?;
    let location = table.metadata_location;
    if location.starts_with("file:") && file_uri_path(&location).is_none() {
        bail!(
            "the table of sink {name} has the location {location}, which an older floe wrote while its data directory was relative: floe still writes it (its files are under the root of the file system), but DuckDB and other engines cannot read it. To get a readable table, drop the sink and create it again with another TABLE."
        );
    }
    Ok(json!({
        "sink": name,
        "catalog_type": catalog_type,
        "namespace": definition.namespace,
        "table": definition.table,
        "metadata_location": location,
        "storage": table.file_io.config().props(),
    }))
}

/// The sink named `sink` (`name`, `schema.name` or `database.schema.name`) and its
/// qualified name.
fn find_sink<'a>(catalog: &'a Catalog, sink: &str) -> anyhow::Result<(String, &'a SinkDefinition)> {
    let parts: Vec<&str> = sink.split('.').collect();
    let matches: Vec<_> = catalog
        .state()
        .items()
        .filter_map(|item| match &item.definition {
            ItemDefinition::Sink(definition) => Some((item, definition)),
            _ => None,
        })
        .filter(|(item, _)| {
            let name = [
                item.name.database.as_str(),
                item.name.schema.as_str(),
                item.name.item.as_str(),
            ];
            parts.len() <= 3 && name[3 - parts.len()..] == parts[..]
        })
        .collect();
    match matches.as_slice() {
        [(item, definition)] => Ok((item.name.to_string(), definition)),
        [] => bail!("sink {sink} does not exist (SHOW SINKS lists them)"),
        _ => bail!("sink name {sink} is ambiguous: qualify it with its schema"),
    }
}

fn catalog_type(config: &CatalogConfig) -> &'static str {
    match config {
        CatalogConfig::Local { .. } => "local",
        CatalogConfig::Rest { .. } => "rest",
        CatalogConfig::S3TablesRest { .. } => "s3tablesrest",
    }
}

/// The document with every credential (a property whose name says secret, token, key id,
/// ...) replaced by `********`.
fn redacted(document: &Value) -> Value {
    let mut document = document.clone();
    if let Some(storage) = document["storage"].as_object_mut() {
        for (key, value) in storage.iter_mut() {
            if is_sensitive_property(key) || key.ends_with("access-key-id") {
                *value = json!("********");
            }
        }
    }
    document
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_redacted() {
        let document = json!({
            "metadata_location": "s3://b/t/metadata/1.json",
            "storage": {
                "s3.endpoint": "http://127.0.0.1:1",
                "s3.access-key-id": "AKID",
                "s3.secret-access-key": "the-secret",
                "s3.session-token": "the-token",
            }
        });
        let shown = redacted(&document).to_string();
        for secret in ["AKID", "the-secret", "the-token"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(shown.contains("http://127.0.0.1:1"), "{shown}");
        assert!(shown.contains("s3://b/t/metadata/1.json"), "{shown}");
    }
}
