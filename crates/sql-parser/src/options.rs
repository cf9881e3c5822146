//! The names of the options each statement takes, one enum per option list,
//! each with the one mapping to its SQL spelling. The parser reads
//! multi-word names with them; the planner extracts each list into a typed
//! struct over the same enum (`floe_sql::options`). Adding an option: its
//! variant here, its field in the extracted struct, its rule in the planner.

use std::fmt;

/// Declares an enum of option names with their SQL spelling.
macro_rules! option_names {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $sql:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($variant,)*
        }

        impl $name {
            /// Every name, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];
            /// The SQL spelling of every name.
            pub const SQL_NAMES: &'static [&'static str] = &[$($sql,)*];

            /// The name as SQL writes it (upper case, words separated by one space).
            pub const fn sql_name(self) -> &'static str {
                match self {
                    $($name::$variant => $sql,)*
                }
            }

            /// The option an upper-cased name written in SQL denotes.
            pub fn from_sql_name(name: &str) -> Option<$name> {
                match name {
                    $($sql => Some($name::$variant),)*
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.sql_name())
            }
        }
    };
}

option_names!(
    /// `CREATE CONNECTION ... TO AWS (...)`.
    AwsConnectionOptionName {
        AccessKeyId => "ACCESS KEY ID",
        SecretAccessKey => "SECRET ACCESS KEY",
        SessionToken => "SESSION TOKEN",
        Endpoint => "ENDPOINT",
        Region => "REGION",
        AssumeRoleArn => "ASSUME ROLE ARN",
        AssumeRoleSessionName => "ASSUME ROLE SESSION NAME",
    }
);

option_names!(
    /// `CREATE CONNECTION ... TO ICEBERG CATALOG (...)`.
    IcebergConnectionOptionName {
        AwsConnection => "AWS CONNECTION",
        CatalogType => "CATALOG TYPE",
        Credential => "CREDENTIAL",
        Scope => "SCOPE",
        Url => "URL",
        Warehouse => "WAREHOUSE",
        Oauth2ServerUrl => "OAUTH2 SERVER URL",
        AccessDelegation => "ACCESS DELEGATION",
    }
);

option_names!(
    /// `CREATE CONNECTION ... TO POSTGRES (...)`.
    PostgresConnectionOptionName {
        Host => "HOST",
        Port => "PORT",
        User => "USER",
        Password => "PASSWORD",
        Database => "DATABASE",
        SslCertificateAuthority => "SSL CERTIFICATE AUTHORITY",
        SslCertificate => "SSL CERTIFICATE",
        SslMode => "SSL MODE",
        SslKey => "SSL KEY",
    }
);

option_names!(
    /// `CREATE CONNECTION ... WITH (...)`.
    ConnectionWithOptionName {
        Validate => "VALIDATE",
    }
);

option_names!(
    /// `CREATE SINK ... INTO ICEBERG CATALOG CONNECTION c (...)`.
    SinkConnectionOptionName {
        Namespace => "NAMESPACE",
        Table => "TABLE",
        PartitionBy => "PARTITION BY",
    }
);

option_names!(
    /// `CREATE SINK ... WITH (...)` and `ALTER SINK ... SET | RESET (...)`.
    SinkWithOptionName {
        CommitInterval => "COMMIT INTERVAL",
        DeleteMode => "DELETE MODE",
        SnapshotRetention => "SNAPSHOT RETENTION",
        TargetFileSize => "TARGET FILE SIZE",
    }
);

option_names!(
    /// `CREATE CLUSTER c (...)`, `ALTER CLUSTER c SET | RESET (...)` and a
    /// replica's `(SIZE = ...)`: Materialize's names, of which floe takes
    /// `SIZE`, `REPLICATION FACTOR` and `MANAGED` (the others are refused by name).
    ClusterOptionName {
        ReplicationFactor => "REPLICATION FACTOR",
        AvailabilityZones => "AVAILABILITY ZONES",
        IntrospectionInterval => "INTROSPECTION INTERVAL",
        IntrospectionDebugging => "INTROSPECTION DEBUGGING",
        Size => "SIZE",
        Managed => "MANAGED",
        Disk => "DISK",
        Schedule => "SCHEDULE",
    }
);

option_names!(
    /// `CREATE SOURCE ... FROM LOAD GENERATOR g (...)`: Materialize's names, of
    /// which floe takes `TICK INTERVAL` and `UP TO`.
    LoadGeneratorOptionName {
        TickInterval => "TICK INTERVAL",
        AsOf => "AS OF",
        UpTo => "UP TO",
        ScaleFactor => "SCALE FACTOR",
        MaxCardinality => "MAX CARDINALITY",
    }
);
