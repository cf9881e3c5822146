//! The Postgres wire protocol front end (simple and extended query), built on
//! the `pgwire` crate. Protocol only: every statement goes to the adapter.

mod deferred_flush;
pub mod encode;
mod position;
pub mod startup;
pub mod tls;

pub use startup::WireSecurity;
pub use tls::{ServerTls, TlsFiles, TlsMode};

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::BytesMut;
use futures::{Sink, SinkExt, stream};
use pgwire::api::auth::StartupHandler;
use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::copy::{send_copy_both_response, send_copy_in_response, send_copy_out_response};
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::query::{send_execution_response, send_query_response};
use pgwire::api::results::{
    CopyResponse, DescribePortalResponse, DescribeResponse, DescribeStatementResponse, FieldFormat,
    FieldInfo, QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::PortalStore;
use pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionHandle, ConnectionManager, DEFAULT_NAME,
    PgWireConnectionState, PgWireServerHandlers, Type,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail, CopyOutResponse};
use pgwire::messages::data::DataRow;
use pgwire::messages::extendedquery::{Bind, Describe, Execute, Parse, Sync as PgSync};
use pgwire::messages::response::{
    EmptyQueryResponse, NoticeResponse, ReadyForQuery, TransactionStatus,
};
use pgwire::messages::simplequery::Query;
use pgwire::messages::startup::ParameterStatus;
use tokio::net::TcpListener;
use tokio::sync::Mutex;
use tracing::{debug, info, warn};

use floe_adapter::{AdapterError, Coordinator, ExecuteResponse, Notice, Session};
use floe_repr::{ColumnDesc, Datum};
use floe_sql_parser::ast::Statement;

use crate::deferred_flush::DeferredFlush;
use crate::encode::{encode_binary_as, encode_text, wire_type};

/// The handlers of one server; connections share them.
pub struct Handlers {
    coordinator: Arc<Coordinator>,
    manager: Arc<ConnectionManager>,
    cancel: Arc<DefaultCancelHandler>,
    parser: Arc<FloeQueryParser>,
    security: WireSecurity,
}

impl Handlers {
    pub fn new(coordinator: Arc<Coordinator>, security: WireSecurity) -> Arc<Handlers> {
        let manager = Arc::new(ConnectionManager::new());
        Arc::new(Handlers {
            coordinator,
            cancel: Arc::new(DefaultCancelHandler::new(manager.clone())),
            manager,
            parser: Arc::new(FloeQueryParser),
            security,
        })
    }

    /// The handlers of a new connection, with the TLS configuration in force now
    /// (a certificate reloaded later applies to later connections).
    fn connection(self: &Arc<Self>) -> (Arc<Factory>, Option<pgwire::tokio::TlsAcceptor>) {
        let tls = self.security.tls.as_ref().map(|tls| tls.current());
        let acceptor = tls.as_ref().map(|state| state.acceptor.clone());
        let startup = startup::ConnectionStartup::new(
            self.security.clone(),
            tls,
            self.manager.clone(),
            self.coordinator.clone(),
        );
        (
            Arc::new(Factory {
                handlers: self.clone(),
                startup: Arc::new(startup),
            }),
            acceptor,
        )
    }
}

/// Accepts connections until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    coordinator: Arc<Coordinator>,
    security: WireSecurity,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let handlers = Handlers::new(coordinator, security);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => {
                info!("no longer accepting connections");
                return;
            }
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    debug!(%peer, "connection accepted");
                    let (factory, acceptor) = handlers.connection();
                    tokio::spawn(async move {
                        if let Err(e) = pgwire::tokio::process_socket(socket, acceptor, factory).await {
                            debug!(%peer, error = %e, "connection ended with an error");
                        }
                    });
                }
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    }
}

/// The handlers of one connection.
struct Factory {
    handlers: Arc<Handlers>,
    startup: Arc<startup::ConnectionStartup>,
}

impl PgWireServerHandlers for Factory {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.handlers.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.handlers.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.startup.clone()
    }

    fn cancel_handler(&self) -> Arc<impl pgwire::api::cancel::CancelHandler> {
        self.handlers.cancel.clone()
    }

    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        self.handlers.clone()
    }
}

#[async_trait]
impl CopyHandler for Handlers {
    async fn on_copy_data<C>(&self, client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let session = session_of(client)?;
        let mut session = session.lock().await;
        self.coordinator.copy_data(&mut session, &copy_data.data);
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let session = session_of(client)?;
        let result = {
            let mut session = session.lock().await;
            self.coordinator.copy_done(&mut session).await
        };
        match result {
            Ok(rows) => {
                client
                    .send(PgWireBackendMessage::CommandComplete(
                        Tag::new("COPY").with_rows(rows).into(),
                    ))
                    .await?;
                Ok(())
            }
            Err(error) => Err(user_error(&error)),
        }
    }

    async fn on_copy_fail<C>(&self, client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Ok(session) = session_of(client) {
            let mut session = session.lock().await;
            self.coordinator.copy_fail(&mut session);
        }
        user_error(&AdapterError::Query {
            code: floe_repr::SqlState::QUERY_CANCELED,
            message: format!("COPY from stdin failed: {}", fail.message),
        })
    }
}

/// The session of a connection, kept in its extensions.
type SharedSession = Arc<Mutex<Session>>;

fn session_of<C: ClientInfo>(client: &C) -> PgWireResult<SharedSession> {
    client
        .session_extensions()
        .get::<Mutex<Session>>()
        .ok_or_else(|| user_error(&AdapterError::Internal("connection has no session".into())))
}

fn user_error(error: &AdapterError) -> PgWireError {
    let mut info = ErrorInfo::new(
        "ERROR".to_string(),
        error.code().code().to_string(),
        error.to_string(),
    );
    info.detail = error.detail();
    info.hint = error.hint();
    PgWireError::UserError(Box::new(info))
}

async fn send_notices<C>(client: &mut C, notices: Vec<Notice>) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    for notice in notices {
        let mut info = ErrorInfo::new("NOTICE".to_string(), "00000".to_string(), notice.message);
        info.hint = notice.hint;
        client
            .feed(PgWireBackendMessage::NoticeResponse(NoticeResponse::from(
                info,
            )))
            .await?;
    }
    Ok(())
}

fn field_infos(desc: &[ColumnDesc], format: &Format) -> Vec<FieldInfo> {
    desc.iter()
        .enumerate()
        .map(|(i, column)| {
            FieldInfo::new(
                column.name.clone(),
                None,
                None,
                wire_type(column.pg_type),
                format.format_for(i),
            )
        })
        .collect()
}

/// The floe type of a result column, from its wire type.
fn column_type(field: &FieldInfo) -> floe_repr::PgType {
    encode::pg_type_from_oid(field.datatype().oid()).unwrap_or(floe_repr::PgType::Text)
}

/// Encodes a row for the wire in each column's requested format.
fn data_row(row: &[Datum], fields: &[FieldInfo]) -> DataRow {
    let mut data = BytesMut::new();
    for (datum, field) in row.iter().zip(fields) {
        let encoded = match field.format() {
            FieldFormat::Text => encode_text(datum).map(|s| BytesMut::from(s.as_bytes())),
            FieldFormat::Binary => encode_binary_as(datum, column_type(field)),
        };
        match encoded {
            None => data.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(bytes) => {
                data.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
                data.extend_from_slice(&bytes);
            }
        }
    }
    DataRow::new(data, row.len() as i16)
}

fn to_response(result: ExecuteResponse, format: &Format) -> Response {
    match result {
        ExecuteResponse::Rows { desc, rows, tag } => {
            let fields = Arc::new(field_infos(&desc, format));
            let row_fields = fields.clone();
            let encoded: Vec<PgWireResult<DataRow>> = rows
                .iter()
                .map(|row| Ok(data_row(row, &row_fields)))
                .collect();
            // The library appends the row count to the tag.
            let mut response = QueryResponse::new(fields, stream::iter(encoded));
            if let Some(tag) = tag {
                response.set_command_tag(&tag);
            }
            Response::Query(response)
        }
        ExecuteResponse::Command { tag } => Response::Execution(Tag::new(&tag)),
        ExecuteResponse::TransactionStarted => Response::TransactionStart(Tag::new("BEGIN")),
        ExecuteResponse::TransactionEnded { tag } => Response::TransactionEnd(Tag::new(tag)),
        ExecuteResponse::CopyIn { columns } => {
            Response::CopyIn(CopyResponse::new(0, columns, stream::empty()))
        }
        // The library counts each CopyData as a row of the `COPY n` tag.
        ExecuteResponse::CopyOut { columns, lines } => Response::CopyOut(CopyResponse::new(
            0,
            columns,
            stream::iter(lines.into_iter().map(|line| Ok(CopyData::new(line.into())))),
        )),
        // Streamed by `stream_subscribe` before a response is built.
        ExecuteResponse::Subscribe { .. } => Response::Error(Box::new(ErrorInfo::new(
            "ERROR".into(),
            "XX000".into(),
            "a subscription reached the response encoder".into(),
        ))),
    }
}

/// How long a subscription's stream may be silent before the socket is probed.
const SUBSCRIBE_PROBE: std::time::Duration = std::time::Duration::from_secs(1);

/// Streams a subscription's rows as they come, each flushed at once (the library's
/// responses flush at the end, and a subscription has none): as COPY data for
/// `COPY (SUBSCRIBE ...) TO STDOUT`, else as data rows in `format`, after a row
/// description when `describe` (the simple protocol; the extended one described the
/// portal). Ends when the subscription fails (an ErrorResponse), the client goes away
/// (a send fails) or the query is canceled (the library drops this future): each drops
/// the rows and so stops the subscription.
async fn stream_subscribe<C>(
    client: &mut C,
    columns: Vec<ColumnDesc>,
    copy: bool,
    rows: &floe_adapter::subscribe::SubscribeLines,
    format: &Format,
    describe: bool,
) -> PgWireResult<Response>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let Some(mut rows) = rows.take() else {
        return Ok(Response::EmptyQuery);
    };
    let fields = field_infos(&columns, format);
    if copy {
        let width = i16::try_from(columns.len()).unwrap_or(i16::MAX);
        let message = CopyOutResponse::new(0, width, vec![0; columns.len()]);
        client
            .send(PgWireBackendMessage::CopyOutResponse(message))
            .await?;
    } else if describe {
        let description =
            pgwire::messages::data::RowDescription::new(fields.iter().map(Into::into).collect());
        client
            .send(PgWireBackendMessage::RowDescription(description))
            .await?;
    }
    let mut sent = 0;
    // The connection does not read while a statement runs, so a client that went away
    // is noticed only when a write fails: while no row comes, a message every client
    // takes at any time and ignores (a parameter's unchanged value) probes the socket.
    let mut probe = tokio::time::interval(SUBSCRIBE_PROBE);
    probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let row = tokio::select! {
            row = rows.recv() => row,
            _ = probe.tick() => {
                let unchanged = ParameterStatus::new("server_encoding".into(), "UTF8".into());
                client.send(PgWireBackendMessage::ParameterStatus(unchanged)).await?;
                continue;
            }
        };
        let row = match row {
            None => break,
            Some(Ok(row)) => row,
            Some(Err(error)) => return Ok(Response::Error(Box::new(error_info(&error)))),
        };
        probe.reset();
        let message = if copy {
            let line = floe_adapter::subscribe::copy_line(row);
            PgWireBackendMessage::CopyData(CopyData::new(line.into()))
        } else {
            PgWireBackendMessage::DataRow(data_row(&row, &fields))
        };
        client.send(message).await?;
        sent += 1;
    }
    if copy {
        client
            .send(PgWireBackendMessage::CopyDone(CopyDone::new()))
            .await?;
        return Ok(Response::Execution(Tag::new("COPY").with_rows(sent)));
    }
    Ok(Response::Execution(Tag::new("SUBSCRIBE").with_rows(sent)))
}

/// A subscription executed with a row limit (Execute's `max_rows`, as JDBC's fetch
/// size sends it): a portal whose rows the library takes `max_rows` at a time,
/// waiting for them as they come, then suspends (PortalSuspended) until the next
/// Execute, as Postgres and Materialize do. The subscription runs while the portal
/// holds the rows: closing the portal, or the transaction ending, stops it. Its error
/// ends the portal with an ErrorResponse.
fn suspendable_subscription(
    columns: &[ColumnDesc],
    rows: &floe_adapter::subscribe::SubscribeLines,
    format: &Format,
) -> Response {
    let Some(receiver) = rows.take() else {
        return Response::EmptyQuery;
    };
    let fields = Arc::new(field_infos(columns, format));
    let row_fields = fields.clone();
    let data_rows = stream::unfold(receiver, move |mut receiver| {
        let fields = row_fields.clone();
        async move {
            let row = match receiver.recv().await? {
                Ok(row) => Ok(data_row(&row, &fields)),
                Err(error) => Err(user_error(&error)),
            };
            Some((row, receiver))
        }
    });
    let mut response = QueryResponse::new(fields, data_rows);
    response.set_command_tag("SUBSCRIBE");
    Response::Query(response)
}

#[async_trait]
impl SimpleQueryHandler for Handlers {
    /// pgwire's own `on_query`, except that ReadyForQuery reports the session's
    /// transaction status rather than one guessed from the responses' kinds: a
    /// failed COMMIT ends the block (`I`, where the guess says `E`).
    async fn on_query<C>(&self, client: &mut C, query: Query) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        client.set_state(PgWireConnectionState::QueryInProgress);
        let responses = match client.session_extensions().get::<Arc<ConnectionHandle>>() {
            // A cancel request (Ctrl-C in psql) ends the query's future.
            Some(handle) => {
                let canceled = handle.start_query().await;
                tokio::select! {
                    responses = SimpleQueryHandler::do_query(self, client, &query.query) => responses,
                    Ok(()) = canceled => Err(PgWireError::QueryCanceled),
                }
            }
            None => SimpleQueryHandler::do_query(self, client, &query.query).await,
        }?;
        for response in responses {
            send_response(client, response).await?;
        }
        if matches!(client.state(), PgWireConnectionState::CopyInProgress(_)) {
            // COPY FROM STDIN goes on; its end sends ReadyForQuery.
            return Ok(());
        }
        client.set_state(PgWireConnectionState::ReadyForQuery);
        self.send_ready_for_query(client).await
    }

    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let session = session_of(client)?;
        let statements = match floe_sql_parser::parse_statements(query) {
            Ok(statements) => statements,
            Err(e) => {
                return Ok(vec![Response::Error(Box::new(positioned(
                    error_info(&AdapterError::from(e)),
                    query,
                )))]);
            }
        };
        let mut responses = Vec::new();
        // The statements of a multi-statement string run in one implicit
        // transaction: their writes commit together when the string ends.
        let implicit = statements.len() > 1;
        if implicit {
            let mut session = session.lock().await;
            self.coordinator.start_implicit_transaction(&mut session);
        }
        for statement in statements {
            // The integer constants a query compares against are read when its plan
            // runs, so the same query with other constants runs on one plan; the
            // statement as written is what it runs as otherwise.
            let statement = match floe_adapter::params::literal_parameters(&statement) {
                Some((generic, parameters)) => {
                    session.lock().await.parameters = Some(parameters);
                    generic
                }
                None => statement,
            };
            let result = self
                .run_statement(client, &session, statement, &Format::UnifiedText, None)
                .await?;
            match result {
                Ok(response) => responses.push(response),
                Err(error) => {
                    responses.push(Response::Error(Box::new(positioned(
                        error_info(&error),
                        query,
                    ))));
                    // The rest of a multi-statement string is not run.
                    break;
                }
            }
        }
        if implicit {
            let mut session = session.lock().await;
            if let Err(error) = self
                .coordinator
                .end_implicit_transaction(&mut session)
                .await
            {
                responses.push(Response::Error(Box::new(error_info(&error))));
            }
        }
        if responses.is_empty() {
            responses.push(Response::EmptyQuery);
        }
        Ok(responses)
    }
}

/// Sends one response of a simple query's statements.
async fn send_response<C>(client: &mut C, response: Response) -> PgWireResult<()>
where
    C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    match response {
        Response::EmptyQuery => {
            client
                .feed(PgWireBackendMessage::EmptyQueryResponse(
                    EmptyQueryResponse::new(),
                ))
                .await?;
        }
        Response::Query(results) => send_query_response(client, results, true).await?,
        Response::Execution(tag)
        | Response::TransactionStart(tag)
        | Response::TransactionEnd(tag) => send_execution_response(client, tag).await?,
        Response::Error(error) => {
            client
                .feed(PgWireBackendMessage::ErrorResponse((*error).into()))
                .await?;
        }
        Response::CopyIn(result) => {
            send_copy_in_response(client, result).await?;
            client.set_state(PgWireConnectionState::CopyInProgress(false));
        }
        Response::CopyOut(result) => send_copy_out_response(client, result).await?,
        Response::CopyBoth(result) => {
            send_copy_both_response(client, result).await?;
            client.set_state(PgWireConnectionState::CopyInProgress(false));
        }
    }
    Ok(())
}

/// The status ReadyForQuery reports for a session.
fn wire_transaction_status(session: &Session) -> TransactionStatus {
    match session.transaction_status() {
        floe_adapter::TransactionStatus::Idle => TransactionStatus::Idle,
        floe_adapter::TransactionStatus::InTransaction => TransactionStatus::Transaction,
        floe_adapter::TransactionStatus::Failed => TransactionStatus::Error,
    }
}

impl Handlers {
    /// Runs one statement for either protocol: executes it in the session, sends the notices
    /// it raised and makes its response. `max_rows` is `None` for the simple protocol and
    /// the extended protocol's row limit of an Execute. `Ok(Err(error))` is the statement's
    /// own error.
    async fn run_statement<C>(
        &self,
        client: &mut C,
        session: &SharedSession,
        statement: Statement,
        format: &Format,
        max_rows: Option<usize>,
    ) -> PgWireResult<Result<Response, AdapterError>>
    where
        C: Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let extended = max_rows.is_some();
        let mut notices = Vec::new();
        let result = {
            let mut session = session.lock().await;
            // The writes executed before a Sync commit together, as in Postgres (a
            // driver's batch is all or nothing): the first write begins an implicit
            // transaction that Sync ends; what follows it up to the Sync joins it.
            // Reads and DDL outside it run alone, as a one-statement query string.
            if extended
                && session.transaction.is_none()
                && floe_adapter::transaction::writes_tables(&statement)
            {
                self.coordinator.start_implicit_transaction(&mut session);
            }
            self.coordinator
                .execute(&mut session, statement, &mut notices)
                .await
        };
        send_notices(client, notices).await?;
        let response = match result {
            Ok(ExecuteResponse::Subscribe {
                columns,
                copy,
                rows,
            }) => {
                // A portal fetched a few rows at a time keeps the subscription open.
                if max_rows.is_some_and(|max_rows| max_rows > 0) && !copy {
                    suspendable_subscription(&columns, &rows, format)
                } else {
                    stream_subscribe(client, columns, copy, &rows, format, !extended).await?
                }
            }
            Ok(result) => to_response(result, format),
            Err(error) => return Ok(Err(error)),
        };
        Ok(Ok(response))
    }

    /// Tells the client the connection is ready, with the session's transaction
    /// status.
    async fn send_ready_for_query<C>(&self, client: &mut C) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let status = wire_transaction_status(&*session_of(client)?.lock().await);
        client.set_transaction_status(status);
        client
            .send(PgWireBackendMessage::ReadyForQuery(ReadyForQuery::new(
                status,
            )))
            .await?;
        Ok(())
    }
}

/// A bound parameter's value as text: text-format values as sent, binary
/// ones decoded by their type.
fn decode_parameter(
    bytes: &[u8],
    format: FieldFormat,
    pg_type: Option<floe_repr::PgType>,
) -> PgWireResult<String> {
    let invalid = |message: String| {
        user_error(&AdapterError::Query {
            code: floe_repr::SqlState::INVALID_PARAMETER_VALUE,
            message,
        })
    };
    match format {
        FieldFormat::Text => String::from_utf8(bytes.to_vec())
            .map_err(|_| invalid("parameter is not valid UTF-8".into())),
        FieldFormat::Binary => {
            let pg_type = pg_type.unwrap_or(floe_repr::PgType::Text);
            let datum = crate::encode::decode_binary(pg_type, bytes)
                .map_err(|e| invalid(format!("invalid binary parameter: {}", e.message)))?;
            Ok(floe_repr::strconv::format_datum(&datum))
        }
    }
}

/// An error with the position in `query` it points at, where one is found.
fn positioned(mut info: ErrorInfo, query: &str) -> ErrorInfo {
    info.position = position::error_position(query, &info.message).map(|p| p.to_string());
    info
}

/// [`user_error`] with the position in `query` it points at.
fn positioned_error(error: &AdapterError, query: &str) -> PgWireError {
    PgWireError::UserError(Box::new(positioned(error_info(error), query)))
}

fn error_info(error: &AdapterError) -> ErrorInfo {
    match user_error(error) {
        PgWireError::UserError(info) => *info,
        _ => ErrorInfo::new("ERROR".into(), "XX000".into(), error.to_string()),
    }
}

/// A parsed statement of the extended protocol.
#[derive(Debug, Clone)]
pub struct ParsedStatement {
    pub statement: Statement,
    /// The statement as the client sent it: where its errors point.
    pub text: String,
    /// How many `$n` parameters the text uses.
    pub parameter_count: usize,
    /// The parameter types the engine inferred the first time the statement was
    /// described. As in PostgreSQL, a prepared statement's parameter types are
    /// fixed once known; keeping them spares each Execute a second planning of
    /// the statement (and a turn at the catalog lock) before its own.
    pub inferred_parameters: std::sync::OnceLock<Vec<Option<floe_repr::PgType>>>,
    /// What Describe last answered, and under what: a driver describes the portal
    /// of every execution (libpq's `PQexecPrepared`), and outside a transaction
    /// block the answer holds while the catalog and the session's name resolution
    /// are the same.
    pub described: Arc<std::sync::Mutex<Option<KeptDescription>>>,
}

/// A statement's description and what it was made under.
#[derive(Debug)]
pub struct KeptDescription {
    under: DescribedUnder,
    columns: Option<Vec<floe_repr::ColumnDesc>>,
    parameters: Vec<Option<floe_repr::PgType>>,
}

/// What a statement's description depends on besides its text.
#[derive(Debug, PartialEq)]
struct DescribedUnder {
    revision: u64,
    cluster: String,
    search_path: String,
}

/// Parses extended-protocol statements with floe's parser.
pub struct FloeQueryParser;

fn count_parameters(sql: &str) -> usize {
    let mut max = 0;
    let bytes = sql.as_bytes();
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' => in_string = !in_string,
            b'$' if !in_string => {
                let start = i + 1;
                let mut end = start;
                while end < bytes.len() && bytes[end].is_ascii_digit() {
                    end += 1;
                }
                if end > start
                    && let Ok(n) = sql[start..end].parse::<usize>()
                {
                    max = max.max(n);
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    max
}

#[async_trait]
impl QueryParser for FloeQueryParser {
    type Statement = ParsedStatement;

    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        _types: &[Option<Type>],
    ) -> PgWireResult<Option<ParsedStatement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let mut statements = floe_sql_parser::parse_statements(sql)
            .map_err(|e| positioned_error(&AdapterError::from(e), sql))?;
        match statements.len() {
            0 => Ok(None),
            1 => Ok(Some(ParsedStatement {
                statement: statements.remove(0),
                text: sql.to_string(),
                parameter_count: count_parameters(sql),
                inferred_parameters: std::sync::OnceLock::new(),
                described: Default::default(),
            })),
            _ => Err(user_error(&AdapterError::Query {
                code: floe_repr::SqlState::SYNTAX_ERROR,
                message: "cannot insert multiple commands into a prepared statement".into(),
            })),
        }
    }

    fn get_parameter_types(&self, statement: &ParsedStatement) -> PgWireResult<Vec<Type>> {
        Ok(vec![Type::TEXT; statement.parameter_count])
    }

    fn get_result_schema(
        &self,
        _statement: &ParsedStatement,
        _format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        // Described asynchronously by the handler, which asks the coordinator.
        Ok(Vec::new())
    }
}

impl Handlers {
    async fn describe_fields<C: ClientInfo>(
        &self,
        client: &C,
        stored: &StoredStatement<ParsedStatement>,
        format: &Format,
    ) -> PgWireResult<(Option<Vec<FieldInfo>>, Vec<Option<floe_repr::PgType>>)> {
        let statement = &stored.statement;
        let declared = Handlers::parameter_types(stored, &[]);
        let session = session_of(client)?;
        let mut session = session.lock().await;
        // In a transaction block the tables are as it first read them: described anew.
        let under = match &session.transaction {
            Some(_) => None,
            None => Some(DescribedUnder {
                revision: self.coordinator.catalog_revision().await,
                cluster: session.get("cluster").map_err(|e| user_error(&e))?,
                search_path: session.get("search_path").map_err(|e| user_error(&e))?,
            }),
        };
        if let Some(under) = &under
            && let Ok(kept) = statement.described.lock()
            && let Some(kept) = kept.as_ref()
            && kept.under == *under
        {
            return Ok((
                kept.columns.as_ref().map(|d| field_infos(d, format)),
                kept.parameters.clone(),
            ));
        }
        let described = self
            .coordinator
            .describe(
                &mut session,
                floe_adapter::params::with_declared_types(&statement.statement, &declared),
            )
            .await
            .map_err(|e| positioned_error(&e, &statement.text))?;
        let _ = statement
            .inferred_parameters
            .set(described.parameters.clone());
        if let Some(under) = under
            && let Ok(mut kept) = statement.described.lock()
        {
            *kept = Some(KeptDescription {
                under,
                columns: described.columns.clone(),
                parameters: described.parameters.clone(),
            });
        }
        Ok((
            described.columns.map(|d| field_infos(&d, format)),
            described.parameters,
        ))
    }

    /// The type of each parameter: the client's when it gave one, else the
    /// engine's inference, else text.
    fn parameter_types(
        statement: &StoredStatement<ParsedStatement>,
        inferred: &[Option<floe_repr::PgType>],
    ) -> Vec<Option<floe_repr::PgType>> {
        (0..statement.statement.parameter_count)
            .map(|i| {
                statement
                    .parameter_types
                    .get(i)
                    .cloned()
                    .flatten()
                    .and_then(|t| crate::encode::pg_type_from_oid(t.oid()))
                    .or_else(|| inferred.get(i).copied().flatten())
            })
            .collect()
    }
}

#[async_trait]
impl ExtendedQueryHandler for Handlers {
    type Statement = ParsedStatement;
    type QueryParser = FloeQueryParser;

    /// Sync ends the implicit transaction of the statements executed since the
    /// last one: their writes commit (an error here is the batch's error), or,
    /// after an error, are discarded. ReadyForQuery reports the session's status.
    async fn on_sync<C>(&self, client: &mut C, _message: PgSync) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        client.portal_store().rm_portal(DEFAULT_NAME);
        let session = session_of(client)?;
        let ended = {
            let mut session = session.lock().await;
            self.coordinator
                .end_implicit_transaction(&mut session)
                .await
        };
        if let Err(error) = ended {
            client
                .send(PgWireBackendMessage::ErrorResponse(
                    error_info(&error).into(),
                ))
                .await?;
        }
        self.send_ready_for_query(client).await?;
        client.flush().await?;
        Ok(())
    }

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        self.parser.clone()
    }

    // Parse, Bind, Describe and Execute answer into the connection's buffer, sent at the
    // client's Sync or Flush (see `deferred_flush`).

    async fn on_parse<C>(&self, client: &mut C, message: Parse) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        deferred_flush::parse(client, self.query_parser(), message).await
    }

    async fn on_bind<C>(&self, client: &mut C, message: Bind) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        deferred_flush::bind(client, message).await
    }

    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self._on_describe(&mut DeferredFlush::new(client), message)
            .await
    }

    async fn on_execute<C>(&self, client: &mut C, message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self._on_execute(&mut DeferredFlush::new(client), message)
            .await
    }

    async fn do_describe_statement<C>(
        &self,
        client: &mut C,
        target: &StoredStatement<Self::Statement>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let (fields, inferred) = self
            .describe_fields(client, target, &Format::UnifiedText)
            .await?;
        let parameters: Vec<Type> = Handlers::parameter_types(target, &inferred)
            .into_iter()
            .map(|t| t.map(wire_type).unwrap_or(Type::TEXT))
            .collect();
        match fields {
            Some(fields) => Ok(DescribeStatementResponse::new(parameters, fields)),
            None => {
                let mut response = DescribeStatementResponse::no_data();
                response.parameters = parameters;
                Ok(response)
            }
        }
    }

    async fn do_describe_portal<C>(
        &self,
        client: &mut C,
        target: &Portal<Self::Statement>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match self
            .describe_fields(client, &target.statement, &target.result_column_format)
            .await?
            .0
        {
            Some(fields) => Ok(DescribePortalResponse::new(fields)),
            None => Ok(DescribePortalResponse::no_data()),
        }
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let mut statement = portal.statement.statement.statement.clone();
        let mut late = None;
        if portal.statement.statement.parameter_count > 0 {
            let parsed = &portal.statement.statement;
            let inferred = match parsed.inferred_parameters.get() {
                Some(inferred) => inferred.clone(),
                None => {
                    self.describe_fields(client, &portal.statement, &Format::UnifiedText)
                        .await?
                        .1
                }
            };
            let types = Handlers::parameter_types(&portal.statement, &inferred);
            let mut values = Vec::with_capacity(portal.parameters.len());
            for (index, bytes) in portal.parameters.iter().enumerate() {
                let value = match bytes {
                    None => None,
                    Some(bytes) => Some(decode_parameter(
                        bytes,
                        portal.parameter_format.format_for(index),
                        types.get(index).copied().flatten(),
                    )?),
                };
                values.push(value);
            }
            // A query runs on one plan for every value of its parameters when it can;
            // the bound statement is what it runs as otherwise.
            match floe_adapter::params::late_parameters(statement, &values, &types) {
                Ok((generic, parameters)) => {
                    statement = generic;
                    late = Some(parameters);
                }
                Err(original) => {
                    statement = floe_adapter::params::bind(*original, &values, &types)
                        .map_err(|e| user_error(&e))?;
                }
            }
        }
        let session = session_of(client)?;
        session.lock().await.parameters = late;
        let format = &portal.result_column_format;
        self.run_statement(client, &session, statement, format, Some(max_rows))
            .await?
            .map_err(|error| positioned_error(&error, &portal.statement.statement.text))
    }
}
