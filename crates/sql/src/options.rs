//! Typed options: each statement's option list is extracted once into a
//! struct with one typed field per option it takes (Materialize's
//! `generate_extracted_config!` is the model). The option names and their SQL
//! spelling are the enums of `floe_sql_parser::options`; the rules (defaults,
//! combinations, messages) stay with the statement's planning.
//!
//! Adding an option: its variant in the name enum, its field in the struct
//! declared here with [`extracted_options!`], its rule where the statement is
//! planned.

use std::collections::BTreeSet;

use floe_sql_parser::ast::{OptionValue, SqlOption};
use floe_sql_parser::options::*;
use sqlparser::ast::{Ident, ObjectName};

use crate::error::PlanError;
use crate::planner::display_name;

/// How a written option value becomes a field of an extracted struct.
pub trait OptionType: Sized {
    /// `name` is the option's SQL name, for messages.
    fn from_option(name: &str, value: Option<OptionValue>) -> Result<Self, PlanError>;
}

/// A string; a number or a bare name is taken as its text.
impl OptionType for String {
    fn from_option(name: &str, value: Option<OptionValue>) -> Result<String, PlanError> {
        match value {
            Some(OptionValue::String(s) | OptionValue::Number(s)) => Ok(s),
            Some(OptionValue::Object(o)) => Ok(display_name(&o)),
            _ => Err(PlanError::invalid(format!(
                "invalid {name}: expected a string"
            ))),
        }
    }
}

/// A boolean: `true`/`false`, their usual spellings as strings, or the bare
/// name (`VALIDATE` alone is true).
impl OptionType for bool {
    fn from_option(name: &str, value: Option<OptionValue>) -> Result<bool, PlanError> {
        let invalid = || PlanError::invalid(format!("invalid {name}: expected a boolean"));
        match value {
            None => Ok(true),
            Some(OptionValue::Bool(b)) => Ok(b),
            Some(OptionValue::String(s)) => match s.to_lowercase().as_str() {
                "true" | "on" | "yes" | "1" => Ok(true),
                "false" | "off" | "no" | "0" => Ok(false),
                _ => Err(invalid()),
            },
            Some(_) => Err(invalid()),
        }
    }
}

/// A count written as a number or a string.
impl OptionType for u32 {
    fn from_option(name: &str, value: Option<OptionValue>) -> Result<u32, PlanError> {
        let text = String::from_option(name, value)?;
        text.parse().map_err(|_| {
            PlanError::invalid(format!(
                "invalid {name}: expected a non-negative integer, found {text}"
            ))
        })
    }
}

/// The name of an object (`AWS CONNECTION = c`); a string is taken as a name.
impl OptionType for ObjectName {
    fn from_option(name: &str, value: Option<OptionValue>) -> Result<ObjectName, PlanError> {
        match value {
            Some(OptionValue::Object(o)) => Ok(o),
            Some(OptionValue::String(s)) => Ok(ObjectName::from(vec![Ident::new(s)])),
            _ => Err(PlanError::invalid(format!(
                "invalid {name}: expected an object name"
            ))),
        }
    }
}

/// A value given as a string or as `SECRET name`.
#[derive(Debug, Clone, PartialEq)]
pub enum StringOrSecretName {
    String(String),
    Secret(ObjectName),
}

impl OptionType for StringOrSecretName {
    fn from_option(name: &str, value: Option<OptionValue>) -> Result<Self, PlanError> {
        match value {
            Some(OptionValue::String(s)) => Ok(StringOrSecretName::String(s)),
            Some(OptionValue::Secret(secret)) => Ok(StringOrSecretName::Secret(secret)),
            _ => Err(PlanError::invalid(format!(
                "invalid {name}: expected a string or SECRET"
            ))),
        }
    }
}

/// A value that must be `SECRET name`.
#[derive(Debug, Clone, PartialEq)]
pub struct SecretName(pub ObjectName);

impl OptionType for SecretName {
    fn from_option(name: &str, value: Option<OptionValue>) -> Result<Self, PlanError> {
        match value {
            Some(OptionValue::Secret(secret)) => Ok(SecretName(secret)),
            _ => Err(PlanError::invalid(format!(
                "{name} must be a secret: use {name} = SECRET name"
            ))),
        }
    }
}

/// The value as written, for a rule that reads it itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Written(pub Option<OptionValue>);

impl OptionType for Written {
    fn from_option(_: &str, value: Option<OptionValue>) -> Result<Self, PlanError> {
        Ok(Written(value))
    }
}

/// `options`, refused if one is given twice.
pub fn distinct(options: &[SqlOption]) -> Result<&[SqlOption], PlanError> {
    let mut seen = BTreeSet::new();
    for option in options {
        if !seen.insert(option.name.0.as_str()) {
            return Err(PlanError::invalid(format!(
                "{} specified more than once",
                option.name
            )));
        }
    }
    Ok(options)
}

/// Declares a struct extracted from an option list: one `Option<type>` field
/// per option taken, named by the variant of the list's name enum.
macro_rules! extracted_options {
    ($(#[$doc:meta])* $struct:ident($names:ident) { $($variant:ident => $field:ident: $ty:ty,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Default)]
        pub struct $struct {
            $(pub $field: Option<$ty>,)*
            /// The options given, in the order written.
            pub written: Vec<$names>,
        }

        impl $struct {
            /// Extracts `options`: each given at most once, each one this list
            /// takes (else `unknown` words the error from the first other name
            /// and all of them, in the order written), each value of its
            /// field's type.
            pub fn extract(
                options: &[SqlOption],
                unknown: impl FnOnce(&str, &[String]) -> PlanError,
            ) -> Result<$struct, PlanError> {
                let options = distinct(options)?;
                let others: Vec<String> = options
                    .iter()
                    .filter(|option| {
                        !matches!($names::from_sql_name(&option.name.0), $(Some($names::$variant))|*)
                    })
                    .map(|option| option.name.0.clone())
                    .collect();
                if let Some(first) = others.first() {
                    return Err(unknown(first, &others));
                }
                let mut extracted = $struct::default();
                for option in options {
                    let name = option.name.0.as_str();
                    match $names::from_sql_name(name) {
                        $(Some($names::$variant) => {
                            extracted.$field =
                                Some(<$ty as OptionType>::from_option(name, option.value.clone())?);
                            extracted.written.push($names::$variant);
                        })*
                        _ => {}
                    }
                }
                Ok(extracted)
            }
        }
    };
}

extracted_options!(
    /// `CREATE CONNECTION ... TO AWS (...)`.
    AwsConnectionOptions(AwsConnectionOptionName) {
        AccessKeyId => access_key_id: StringOrSecretName,
        SecretAccessKey => secret_access_key: SecretName,
        SessionToken => session_token: StringOrSecretName,
        Endpoint => endpoint: String,
        Region => region: String,
        AssumeRoleArn => assume_role_arn: String,
        AssumeRoleSessionName => assume_role_session_name: String,
    }
);

extracted_options!(
    /// `CREATE CONNECTION ... TO ICEBERG CATALOG (...)`.
    IcebergConnectionOptions(IcebergConnectionOptionName) {
        CatalogType => catalog_type: String,
        Url => url: String,
        Warehouse => warehouse: String,
        Credential => credential: StringOrSecretName,
        Scope => scope: String,
        Oauth2ServerUrl => oauth2_server_url: String,
        AccessDelegation => access_delegation: String,
        AwsConnection => aws_connection: ObjectName,
    }
);

extracted_options!(
    /// `CREATE CONNECTION ... TO POSTGRES (...)`. PASSWORD and SSL KEY are read
    /// by their rule, which refuses anything but a secret with its own words.
    PostgresConnectionOptions(PostgresConnectionOptionName) {
        Host => host: String,
        Port => port: String,
        User => user: StringOrSecretName,
        Password => password: Written,
        Database => database: String,
        SslMode => ssl_mode: String,
        SslCertificateAuthority => ssl_certificate_authority: StringOrSecretName,
        SslCertificate => ssl_certificate: StringOrSecretName,
        SslKey => ssl_key: Written,
    }
);

extracted_options!(
    /// `CREATE CONNECTION ... WITH (...)`.
    ConnectionWithOptions(ConnectionWithOptionName) {
        Validate => validate: bool,
    }
);

extracted_options!(
    /// `CREATE SINK ... INTO ICEBERG CATALOG CONNECTION c (...)`.
    SinkConnectionOptions(SinkConnectionOptionName) {
        Namespace => namespace: String,
        Table => table: String,
        PartitionBy => partition_by: String,
    }
);

extracted_options!(
    /// `CREATE SINK ... WITH (...)`, `ALTER SINK ... SET (...)`.
    SinkWithOptions(SinkWithOptionName) {
        CommitInterval => commit_interval: String,
        DeleteMode => delete_mode: String,
        SnapshotRetention => snapshot_retention: String,
        TargetFileSize => target_file_size: String,
    }
);

extracted_options!(
    /// A managed `CREATE CLUSTER c (...)`.
    ManagedClusterOptions(ClusterOptionName) {
        Size => size: String,
        ReplicationFactor => replication_factor: u32,
        Managed => managed: bool,
    }
);

extracted_options!(
    /// An unmanaged `CREATE CLUSTER c (...) REPLICAS (...)`.
    UnmanagedClusterOptions(ClusterOptionName) {
        Managed => managed: bool,
    }
);

extracted_options!(
    /// `ALTER CLUSTER c SET (...)`.
    AlterClusterOptions(ClusterOptionName) {
        Size => size: String,
        ReplicationFactor => replication_factor: u32,
    }
);

extracted_options!(
    /// A replica's `(SIZE = ...)`.
    ReplicaOptions(ClusterOptionName) {
        Size => size: String,
    }
);

extracted_options!(
    /// `CREATE SOURCE ... FROM LOAD GENERATOR g (...)`.
    LoadGeneratorOptions(LoadGeneratorOptionName) {
        TickInterval => tick_interval: Written,
        UpTo => up_to: Written,
    }
);
