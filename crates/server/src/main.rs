//! `floe`: a Materialize-compatible streaming SQL server that delivers the
//! changes of SQL relations into Apache Iceberg tables.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use floe_adapter::auth::ScramVerifier;
use floe_adapter::{Coordinator, CoordinatorConfig};
use tokio::net::TcpListener;
use tracing::info;

mod sink_access;

/// mimalloc: a sink's reader thread allocates the rows its writer frees, and a batch's
/// rows come and go in bulk; under glibc's allocator malloc, free and page faults took
/// about a fifth of a sink's CPU time and UPSERT drains ran about 30% slower (perf and
/// `cargo bench -p floe-sink --bench sink_throughput`). Its options: `floe_sink::allocator`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Server settings: each flag can also come from its environment variable.
#[derive(Debug, Parser)]
#[command(
    name = "floe",
    version,
    about = "Streams SQL relations into Apache Iceberg tables, exactly once"
)]
struct Args {
    /// Address the Postgres wire protocol listens on.
    #[arg(long, env = "FLOE_LISTEN", default_value = "127.0.0.1:6875")]
    listen: SocketAddr,
    /// Directory of the durable catalog, the change log and the embedded Iceberg
    /// catalog's warehouse; a relative path is taken from the current directory (and
    /// made absolute at start-up).
    #[arg(
        long,
        env = "FLOE_DATA_DIR",
        default_value = "./floe-data",
        global = true
    )]
    data_dir: PathBuf,
    /// The AWS principal (an IAM role or user ARN) floe assumes roles from;
    /// shown in `mz_aws_connections.principal` and the example trust policy.
    #[arg(long, env = "FLOE_AWS_PRINCIPAL", global = true)]
    aws_principal: Option<String>,
    /// The prefix of AWS external ids (`mz_<prefix>_<connection id>`) for a
    /// new data directory; a random UUID by default, fixed once chosen.
    #[arg(long, env = "FLOE_AWS_EXTERNAL_ID_PREFIX")]
    aws_external_id_prefix: Option<String>,
    /// A PEM bundle of extra certificate authorities to trust for HTTPS.
    #[arg(long, env = "FLOE_EXTRA_CA_BUNDLE", global = true)]
    extra_ca_bundle: Option<PathBuf>,
    /// How long before an OAuth2 token expires floe exchanges its credentials
    /// again (e.g. `60s`, `2m`).
    #[arg(long, env = "FLOE_TOKEN_REFRESH_MARGIN", default_value = "60s", value_parser = parse_duration)]
    token_refresh_margin: std::time::Duration,
    /// How long before vended storage credentials or an assumed AWS role
    /// session expire floe renews them (e.g. `5m`).
    #[arg(long, env = "FLOE_CREDENTIAL_REFRESH_MARGIN", default_value = "5m", value_parser = parse_duration)]
    credential_refresh_margin: std::time::Duration,
    /// How often floe renews vended storage credentials that carry no expiry
    /// (e.g. `5m`).
    #[arg(long, env = "FLOE_CREDENTIAL_REFRESH_INTERVAL", default_value = "5m", value_parser = parse_duration)]
    credential_refresh_interval: std::time::Duration,
    /// The session lifetime floe asks AWS STS for when it assumes a role
    /// (at least 15m). The principal's own keys come from AWS_ACCESS_KEY_ID,
    /// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
    #[arg(long, env = "FLOE_AWS_SESSION_DURATION", default_value = "1h", value_parser = parse_duration)]
    aws_session_duration: std::time::Duration,
    /// How often each sink's maintenance looks at the Iceberg table it writes: a
    /// compaction step at most this often (e.g. `1s`, `10s`).
    #[arg(long, env = "FLOE_SINK_MAINTENANCE_PERIOD", default_value = "1s", value_parser = parse_duration)]
    sink_maintenance_period: std::time::Duration,
    /// On a new data directory, create the quickstart objects: a load
    /// generator and a table feeding two sinks into the embedded catalog.
    #[arg(long, env = "FLOE_QUICKSTART")]
    quickstart: bool,
    /// Log filter, e.g. `info` or `floe_adapter=debug` (also `RUST_LOG`).
    #[arg(long, env = "FLOE_LOG", global = true)]
    log_filter: Option<String>,
    #[command(flatten)]
    access: AccessArgs,
    /// Without a command, floe runs the server.
    #[command(subcommand)]
    command: Option<Command>,
}

/// Tools that work on a data directory beside (or without) a running server.
#[derive(Debug, Subcommand)]
enum Command {
    /// Where a sink's Iceberg table is and how to read it, for a reader such as DuckDB
    ///
    /// Resolved through the sink's own connection (the data directory holds it and the
    /// key of its secrets). With a PROGRAM, runs it with the table's access document
    /// (JSON: the metadata location and the storage properties, credentials included) on
    /// its standard input and exits with its status; without one, prints the document
    /// with the credentials as `********`. `scripts/read-sink` reads tables this way.
    SinkAccess {
        /// The sink: `name`, `schema.name` or `database.schema.name`.
        sink: String,
        /// The program (and its arguments) that reads the document on its standard input.
        #[arg(last = true)]
        program: Vec<String>,
    },
}

/// Who may connect and how, and the operations endpoint.
#[derive(Debug, clap::Args)]
struct AccessArgs {
    /// TLS on the SQL port: `disable`, `require` (clients must use TLS),
    /// `verify-ca` (and present a certificate signed by --tls-ca) or `verify-full`
    /// (whose common name is the user name). New certificate files are read on SIGHUP.
    #[arg(long, env = "FLOE_TLS_MODE", default_value = "disable")]
    tls_mode: floe_pgwire::TlsMode,
    /// The server certificate chain (PEM).
    #[arg(long, env = "FLOE_TLS_CERT")]
    tls_cert: Option<PathBuf>,
    /// The server's private key (PEM).
    #[arg(long, env = "FLOE_TLS_KEY")]
    tls_key: Option<PathBuf>,
    /// The certificate authorities client certificates must chain to (PEM), for
    /// --tls-mode verify-ca and verify-full.
    #[arg(long, env = "FLOE_TLS_CA")]
    tls_ca: Option<PathBuf>,
    /// How clients authenticate: `none`, `password` (cleartext, use with TLS) or
    /// `sasl` (SCRAM-SHA-256). The superuser `materialize` takes its password from
    /// the FLOE_SUPERUSER_PASSWORD environment variable.
    #[arg(long, env = "FLOE_AUTHENTICATOR", default_value = "none")]
    authenticator: floe_adapter::auth::AuthMethod,
    /// Allow --authenticator none on an address other than loopback.
    #[arg(long, env = "FLOE_UNSAFE_NO_AUTH")]
    unsafe_no_auth: bool,
    /// Address of the internal HTTP server: /metrics, /api/livez, /api/readyz and
    /// the status page at /.
    #[arg(
        long,
        env = "FLOE_INTERNAL_HTTP_LISTEN",
        default_value = "127.0.0.1:6878"
    )]
    internal_http_listen: SocketAddr,
}

/// A duration such as `90s`, `5m`, `1h` or `250ms` (a bare number is seconds).
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?}: expected a number and a unit"))?;
    let millis = match unit.trim() {
        "ms" => number,
        "" | "s" => number.saturating_mul(1000),
        "m" | "min" => number.saturating_mul(60_000),
        "h" => number.saturating_mul(3_600_000),
        other => {
            return Err(format!(
                "invalid duration unit {other:?}: use ms, s, m or h"
            ));
        }
    };
    Ok(std::time::Duration::from_millis(millis))
}

/// Logs to standard error at `filter`, else `RUST_LOG`, else `default`.
/// Added to the default log filter: the AWS SDK warns about every credential source it
/// probes and finds empty (instance metadata on a machine outside EC2, at each start),
/// while floe logs the outcome itself (its principal, or why it stays unknown). An
/// explicit filter (`--log-filter`, `RUST_LOG`) shows them again.
const QUIET_BY_DEFAULT: &str = "aws_config=error";

fn init_logging(filter: Option<&str>, default: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = match filter {
        Some(f) => EnvFilter::new(f),
        None => EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new(format!("{default},{QUIET_BY_DEFAULT}"))),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Listens for SIGTERM and SIGINT from the moment it is called: a signal that arrives
/// while the data directory is still being opened (the SQL port already accepts
/// connections then) stops the server cleanly once it is open, rather than killing it
/// with the signal's default action.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => info!("received SIGINT"),
            _ = terminate.recv() => info!("received SIGTERM"),
        }
    })
}

/// Runs the quickstart script on a data directory that has no objects yet.
async fn quickstart(coordinator: &Coordinator) -> anyhow::Result<()> {
    if !coordinator.is_empty().await {
        info!("quickstart: the data directory already has objects; nothing to create");
        return Ok(());
    }
    let statements = floe_sql_parser::parse_statements(include_str!("quickstart.sql"))
        .context("parsing the quickstart script")?;
    let mut session = floe_adapter::Session::new("floe");
    for statement in statements {
        let text = statement.to_string();
        let mut notices = Vec::new();
        coordinator
            .execute(&mut session, statement, &mut notices)
            .await
            .with_context(|| format!("quickstart: {text}"))?;
    }
    info!(
        "quickstart: created the auction load generator, table orders, and sinks bids_sink and orders_sink into the embedded catalog"
    );
    Ok(())
}

fn main() -> anyhow::Result<ExitCode> {
    let mut args = Args::parse();
    // A tool's own output is what matters: its log shows warnings and errors only.
    let default_log = if args.command.is_some() {
        "warn"
    } else {
        "info"
    };
    init_logging(args.log_filter.as_deref(), default_log);
    if !floe_allocator::tune() {
        tracing::warn!(
            "the linked mimalloc is not version 3: its options were left at their defaults"
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(floe_adapter::RUNTIME_STACK)
        .build()
        .context("starting the async runtime")?;
    match args.command.take() {
        Some(Command::SinkAccess { sink, program }) => {
            let data_dir = std::path::absolute(&args.data_dir)
                .with_context(|| format!("resolving {}", args.data_dir.display()))?;
            let settings = sink_access::AccessSettings {
                data_dir: &data_dir,
                aws_principal: args.aws_principal.clone(),
                extra_ca_bundle: args.extra_ca_bundle.clone(),
                credentials: credential_settings(&args),
            };
            runtime.block_on(sink_access::run(settings, &sink, &program))
        }
        None => runtime.block_on(run(args)).map(|()| ExitCode::SUCCESS),
    }
}

/// The refresh margins and session lifetime of the server's flags.
fn credential_settings(args: &Args) -> floe_adapter::credentials::CredentialSettings {
    floe_adapter::credentials::CredentialSettings {
        token_refresh_margin: args.token_refresh_margin,
        credential_refresh_margin: args.credential_refresh_margin,
        credential_refresh_interval: args.credential_refresh_interval,
        aws_session_duration: args.aws_session_duration,
        sink_maintenance_period: args.sink_maintenance_period,
    }
}

/// The data directory as an absolute, canonical path, created when missing. Every path
/// floe derives from it (the embedded catalog's warehouse and the `file://` locations of
/// its tables) is then absolute too, whatever the current directory of the process or
/// of a reader later on.
fn absolute_data_dir(data_dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating the data directory {}", data_dir.display()))?;
    data_dir
        .canonicalize()
        .with_context(|| format!("resolving the data directory {}", data_dir.display()))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let shutdown = shutdown_signal()?;
    if let Some(bundle) = &args.extra_ca_bundle {
        anyhow::ensure!(
            bundle.is_file(),
            "--extra-ca-bundle {} is not a readable file",
            bundle.display()
        );
    }
    // Every flag is checked and every port taken before the data directory is
    // opened: a bad flag or a busy port must fail before `--quickstart` creates
    // anything.
    let (security, superuser) = wire_security(&args.access, args.listen)?;
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let http_listener = bind_internal_http(&args.access).await?;
    // The probes answer (not ready) while the data directory opens.
    let http = start_internal_http(http_listener);
    let data_dir = absolute_data_dir(&args.data_dir)?;
    let coordinator = Coordinator::open(CoordinatorConfig {
        data_dir: data_dir.clone(),
        environment_id: args.aws_external_id_prefix.clone(),
        aws_principal: args.aws_principal.clone(),
        extra_ca_bundle: args.extra_ca_bundle.clone(),
        credentials: credential_settings(&args),
    })
    .with_context(|| format!("opening the data directory {}", data_dir.display()))?;
    if args.quickstart {
        quickstart(&coordinator).await?;
    }
    // Roles created with a password log in with the verifier the catalog keeps.
    let security = floe_pgwire::WireSecurity {
        authenticator: std::sync::Arc::new(floe_adapter::auth::Authenticator::new(
            args.access.authenticator,
            std::sync::Arc::new(floe_adapter::login::CatalogVerifiers::new(
                superuser,
                coordinator.clone(),
            )),
        )),
        ..security
    };
    http.loaded(coordinator.clone(), security.authenticator.clone());
    info!(
        address = %listener.local_addr()?,
        version = env!("CARGO_PKG_VERSION"),
        tls = ?args.access.tls_mode,
        authenticator = ?args.access.authenticator,
        "floe is ready: psql -h {} -p {} -U materialize materialize",
        args.listen.ip(),
        listener.local_addr()?.port()
    );
    http.set_ready();
    floe_pgwire::serve(listener, coordinator, security, shutdown).await;
    info!("floe stopped");
    Ok(())
}

/// The wire's TLS and authentication from the flags, and the superuser's verifier;
/// refuses settings that would leave the server open or unusable.
fn wire_security(
    access: &AccessArgs,
    listen: SocketAddr,
) -> anyhow::Result<(floe_pgwire::WireSecurity, Option<ScramVerifier>)> {
    use floe_adapter::auth::{AuthMethod, Authenticator, SuperuserOnly};
    let method = access.authenticator;
    for address in [listen, access.internal_http_listen] {
        anyhow::ensure!(
            method.requires_password() || address.ip().is_loopback() || access.unsafe_no_auth,
            "refusing to listen on {address} without authentication: use --authenticator sasl \
             (or password) with FLOE_SUPERUSER_PASSWORD, or pass --unsafe-no-auth"
        );
    }
    // The password is hashed at once; only its SCRAM verifier is kept.
    let superuser = std::env::var("FLOE_SUPERUSER_PASSWORD")
        .ok()
        .filter(|p| !p.is_empty())
        .map(|password| ScramVerifier::new(&password));
    anyhow::ensure!(
        !method.requires_password() || superuser.is_some(),
        "--authenticator {method:?} needs the superuser's password in FLOE_SUPERUSER_PASSWORD"
    );
    let tls = tls_config(access)?;
    if method == AuthMethod::Password && tls.is_none() {
        tracing::warn!(
            "--authenticator password sends passwords in clear text: use --tls-mode require"
        );
    }
    let security = floe_pgwire::WireSecurity {
        tls_mode: access.tls_mode,
        tls,
        authenticator: std::sync::Arc::new(Authenticator::new(
            method,
            std::sync::Arc::new(SuperuserOnly(superuser.clone())),
        )),
    };
    Ok((security, superuser))
}

/// Loads the certificate files, and reloads them on SIGHUP.
fn tls_config(
    access: &AccessArgs,
) -> anyhow::Result<Option<std::sync::Arc<floe_pgwire::ServerTls>>> {
    if !access.tls_mode.uses_tls() {
        return Ok(None);
    }
    let (Some(cert), Some(key)) = (&access.tls_cert, &access.tls_key) else {
        anyhow::bail!(
            "--tls-mode {:?} needs --tls-cert and --tls-key",
            access.tls_mode
        );
    };
    anyhow::ensure!(
        !access.tls_mode.verifies_clients() || access.tls_ca.is_some(),
        "--tls-mode {:?} needs --tls-ca: the authorities client certificates chain to",
        access.tls_mode
    );
    let tls = floe_pgwire::ServerTls::load(floe_pgwire::TlsFiles {
        cert: cert.clone(),
        key: key.clone(),
        client_ca: access
            .tls_ca
            .clone()
            .filter(|_| access.tls_mode.verifies_clients()),
    })
    .map_err(anyhow::Error::msg)?;
    let tls = std::sync::Arc::new(tls);
    let reloaded = tls.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangup = match signal(SignalKind::hangup()) {
            Ok(hangup) => hangup,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGHUP: certificates will not be reloaded");
                return;
            }
        };
        while hangup.recv().await.is_some() {
            match reloaded.reload() {
                Ok(()) => info!("received SIGHUP: reloaded the TLS certificate"),
                Err(e) => {
                    tracing::error!(error = %e, "received SIGHUP: the TLS certificate could not be reloaded; the previous one stays in use")
                }
            }
        }
    });
    Ok(Some(tls))
}

/// Takes the internal HTTP server's port (metrics, health, status page).
async fn bind_internal_http(access: &AccessArgs) -> anyhow::Result<TcpListener> {
    let address = access.internal_http_listen;
    TcpListener::bind(address)
        .await
        .with_context(|| format!("listening on {address} (--internal-http-listen)"))
}

/// Starts the internal HTTP server on its bound port, for a server still starting.
fn start_internal_http(listener: TcpListener) -> std::sync::Arc<floe_http::HttpState> {
    if let Ok(address) = listener.local_addr() {
        info!(%address, "internal HTTP server listening: /metrics, /api/livez, /api/readyz, /");
    }
    let state = floe_http::HttpState::starting();
    tokio::spawn(floe_http::serve(
        listener,
        state.clone(),
        std::future::pending::<()>(),
    ));
    state
}
