//! A connection's definition resolved to the settings the sink crate uses:
//! secret values decrypted, defaults applied.

use floe_catalog::Catalog;
use floe_repr::GlobalId;
use floe_sink::{AwsAuthConfig, AwsConfig, AwsKeys, CatalogConfig, ClientCredentials};
use floe_sql::catalog::{
    AwsAuth, AwsConnection, ConnectionDefinition, IcebergCatalogConnection, IcebergCatalogType,
    ItemDefinition, PlanCatalog, StringOrSecret,
};

use crate::error::AdapterError;
use crate::system::external_id;

/// Reads a string-or-secret value.
fn resolve_string(
    catalog: &Catalog,
    owner: Option<GlobalId>,
    value: &StringOrSecret,
    inline_secrets: &[(String, String)],
) -> Result<String, AdapterError> {
    match value {
        StringOrSecret::String(s) => Ok(s.clone()),
        StringOrSecret::Secret(id) => Ok(catalog.secret(*id, "value")?),
        StringOrSecret::Inline { slot } => {
            if let Some((_, value)) = inline_secrets.iter().find(|(s, _)| s == slot) {
                return Ok(value.clone());
            }
            let owner = owner.ok_or_else(|| {
                AdapterError::Internal(format!("inline secret {slot} without owner"))
            })?;
            Ok(catalog.secret(owner, slot)?)
        }
    }
}

/// Resolves an AWS connection.
pub fn resolve_aws_config(catalog: &Catalog, id: GlobalId) -> Result<AwsConfig, AdapterError> {
    let Some(item) = catalog.state().item(id) else {
        return Err(AdapterError::Internal(format!(
            "unknown AWS connection {id}"
        )));
    };
    let ItemDefinition::Connection(ConnectionDefinition::Aws(aws)) = &item.definition else {
        return Err(AdapterError::Internal(format!(
            "{id} is not an AWS connection"
        )));
    };
    resolve_aws_definition(catalog, id, aws, &[])
}

/// Resolves the AWS connection `id` as `aws` defines it; `inline_secrets` are
/// values written in the statement being planned (ALTER CONNECTION), which
/// take the place of the stored ones.
pub fn resolve_aws_definition(
    catalog: &Catalog,
    id: GlobalId,
    aws: &AwsConnection,
    inline_secrets: &[(String, String)],
) -> Result<AwsConfig, AdapterError> {
    let auth = match &aws.auth {
        AwsAuth::Credentials {
            access_key_id,
            secret_access_key,
            session_token,
        } => AwsAuthConfig::Keys(AwsKeys {
            access_key_id: resolve_string(catalog, Some(id), access_key_id, inline_secrets)?,
            secret_access_key: catalog.secret(*secret_access_key, "value")?,
            session_token: session_token
                .as_ref()
                .map(|t| resolve_string(catalog, Some(id), t, inline_secrets))
                .transpose()?,
        }),
        AwsAuth::AssumeRole { arn, session_name } => AwsAuthConfig::AssumeRole {
            arn: arn.clone(),
            session_name: session_name.clone().unwrap_or_else(|| format!("floe-{id}")),
            external_id: external_id(catalog.environment_id(), id),
        },
    };
    Ok(AwsConfig {
        endpoint: aws.endpoint.clone(),
        region: aws.region.clone(),
        auth,
    })
}

/// Resolves an Iceberg catalog connection.
pub fn resolve_catalog_config(
    catalog: &Catalog,
    data_dir: &std::path::Path,
    id: Option<GlobalId>,
    iceberg: &IcebergCatalogConnection,
    inline_secrets: &[(String, String)],
) -> Result<CatalogConfig, AdapterError> {
    let credentials = iceberg
        .credential
        .as_ref()
        .map(|c| resolve_string(catalog, id, c, inline_secrets))
        .transpose()?
        .map(|text| {
            ClientCredentials::parse(&text).ok_or_else(|| {
                AdapterError::Plan(floe_sql::PlanError::invalid(
                    "CREDENTIAL must have the form 'client_id:client_secret'",
                ))
            })
        })
        .transpose()?;
    let aws = iceberg
        .aws_connection
        .map(|aws| resolve_aws_config(catalog, aws))
        .transpose()?;
    Ok(match iceberg.catalog_type {
        IcebergCatalogType::Local => {
            let warehouse = match &iceberg.warehouse {
                Some(url) => floe_sink::local::file_uri_path(url).ok_or_else(|| {
                    AdapterError::Plan(floe_sql::PlanError::invalid(format!(
                        "invalid CONNECTION: WAREHOUSE of a local catalog must be an absolute file:// URL such as 'file:///srv/warehouse', not '{url}'"
                    )))
                })?,
                None => data_dir.join("warehouse"),
            };
            CatalogConfig::Local {
                database: warehouse.join("floe_catalog.db"),
                warehouse,
            }
        }
        IcebergCatalogType::Rest => CatalogConfig::Rest {
            url: iceberg.url.clone().unwrap_or_default(),
            warehouse: iceberg.warehouse.clone(),
            credentials,
            scope: iceberg.effective_scope().to_string(),
            oauth2_server_url: iceberg.effective_oauth2_server_url().unwrap_or_default(),
            vended_credentials: iceberg.vended_credentials,
            aws,
        },
        IcebergCatalogType::S3TablesRest => CatalogConfig::S3TablesRest {
            url: iceberg.url.clone().unwrap_or_default(),
            warehouse: iceberg.warehouse.clone().unwrap_or_default(),
            aws: aws.ok_or_else(|| {
                AdapterError::Internal("s3tablesrest connection without AWS connection".into())
            })?,
        },
    })
}

/// The Iceberg catalog a sink writes to, resolved.
pub fn sink_catalog_config(
    catalog: &Catalog,
    data_dir: &std::path::Path,
    sink: &floe_sql::catalog::SinkDefinition,
) -> Result<CatalogConfig, AdapterError> {
    let Some(ItemDefinition::Connection(ConnectionDefinition::IcebergCatalog(iceberg))) = catalog
        .state()
        .item(sink.connection)
        .map(|item| &item.definition)
    else {
        return Err(AdapterError::Internal(
            "sink without an Iceberg catalog connection".into(),
        ));
    };
    resolve_catalog_config(catalog, data_dir, Some(sink.connection), iceberg, &[])
}
