//! floe's own client for the replication protocol (tokio-postgres has no replication
//! mode): a connection started with `replication=database` that runs replication
//! commands (`CREATE_REPLICATION_SLOT`, `START_REPLICATION`) and then streams
//! `XLogData` and keepalives in COPY BOTH mode, answering with standby status updates.
//!
//! Message framing and SCRAM come from `postgres-protocol`; TLS from [`crate::tls`].

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use floe_repr::SqlState;
use postgres_protocol::authentication::sasl::{ChannelBinding, SCRAM_SHA_256, ScramSha256};
use postgres_protocol::message::frontend;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpStream;

use crate::config::{PgConnectionConfig, session_options};
use crate::error::{ErrorKind, PgError, upstream_error};
use crate::lsn::Lsn;
use crate::tls;

/// A byte stream to the server: TCP, or TLS over TCP.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// A message larger than this is refused as corrupt: the server sends one row or one
/// WAL record per message, and PostgreSQL values are at most 1 GiB.
const MAX_MESSAGE_BYTES: usize = 1 << 30;

/// A replication connection before streaming starts.
pub(crate) struct ReplicationConnection {
    stream: Box<dyn Stream>,
    buffer: BytesMut,
}

/// What `CREATE_REPLICATION_SLOT ... EXPORT_SNAPSHOT` answers.
#[derive(Debug, Clone)]
pub(crate) struct CreatedSlot {
    /// Changes committed after this point are in the slot's stream; the snapshot holds
    /// everything committed before it.
    pub consistent_point: Lsn,
    /// For `SET TRANSACTION SNAPSHOT` while this connection stays idle.
    pub snapshot_name: String,
}

fn protocol_error(message: impl Into<String>) -> PgError {
    PgError::protocol(message)
}

impl ReplicationConnection {
    /// Connects (TLS as configured), authenticates (cleartext, MD5 or SCRAM-SHA-256) and
    /// waits until the server is ready.
    pub async fn connect(config: &PgConnectionConfig) -> Result<ReplicationConnection, PgError> {
        let address = (config.host.as_str(), config.port);
        let tcp = tokio::time::timeout(config.connect_timeout, TcpStream::connect(address))
            .await
            .map_err(|_| {
                PgError::connection(format!(
                    "error connecting to server: timed out connecting to {}:{}",
                    config.host, config.port
                ))
            })?
            .map_err(|e| {
                PgError::connection(format!(
                    "error connecting to server at {}:{}: {e}",
                    config.host, config.port
                ))
            })?;
        let _ = tcp.set_nodelay(true);
        let stream: Box<dyn Stream> = match tls::client_config(config)? {
            None => Box::new(tcp),
            Some(tls_config) => Box::new(start_tls(tcp, tls_config, &config.host).await?),
        };
        let mut connection = ReplicationConnection {
            stream,
            buffer: BytesMut::with_capacity(64 * 1024),
        };
        connection.startup(config).await?;
        Ok(connection)
    }

    async fn startup(&mut self, config: &PgConnectionConfig) -> Result<(), PgError> {
        let options = session_options();
        let parameters = [
            ("user", config.user.as_str()),
            ("database", config.database.as_str()),
            ("replication", "database"),
            ("application_name", "floe postgres source"),
            ("options", options.as_str()),
        ];
        let mut out = BytesMut::new();
        frontend::startup_message(parameters.iter().copied(), &mut out)?;
        self.send(&out).await?;
        let mut scram: Option<ScramSha256> = None;
        loop {
            let (tag, mut body) = self.read_message().await?;
            match tag {
                b'R' => self.authenticate(config, &mut body, &mut scram).await?,
                b'E' => return Err(error_response(&body)),
                b'Z' => return Ok(()),
                // ParameterStatus, BackendKeyData, NoticeResponse.
                b'S' | b'K' | b'N' => {}
                other => {
                    return Err(protocol_error(format!(
                        "unexpected message '{}' during startup",
                        other as char
                    )));
                }
            }
        }
    }

    async fn authenticate(
        &mut self,
        config: &PgConnectionConfig,
        body: &mut Bytes,
        scram: &mut Option<ScramSha256>,
    ) -> Result<(), PgError> {
        let kind = get_i32(body)?;
        let password = || {
            config.password.as_deref().ok_or_else(|| {
                PgError::new(
                    ErrorKind::Authentication,
                    SqlState::INVALID_PASSWORD,
                    "password authentication failed: the server asks for a password and the connection has none",
                )
                .with_retryable(false)
            })
        };
        let mut out = BytesMut::new();
        match kind {
            0 => return Ok(()),
            3 => frontend::password_message(password()?.as_bytes(), &mut out)?,
            5 => {
                let salt = take(body, 4)?;
                let salt = [salt[0], salt[1], salt[2], salt[3]];
                let hash = postgres_protocol::authentication::md5_hash(
                    config.user.as_bytes(),
                    password()?.as_bytes(),
                    salt,
                );
                frontend::password_message(hash.as_bytes(), &mut out)?;
            }
            10 => {
                let mechanisms = body
                    .split(|b| *b == 0)
                    .any(|m| m == SCRAM_SHA_256.as_bytes());
                if !mechanisms {
                    return Err(protocol_error(
                        "the server offers no SASL mechanism floe supports (SCRAM-SHA-256)",
                    ));
                }
                let client =
                    ScramSha256::new(password()?.as_bytes(), ChannelBinding::unsupported());
                frontend::sasl_initial_response(SCRAM_SHA_256, client.message(), &mut out)?;
                *scram = Some(client);
            }
            11 | 12 => {
                let client = scram
                    .as_mut()
                    .ok_or_else(|| protocol_error("SASL message without a SASL exchange"))?;
                if kind == 11 {
                    client.update(body).map_err(|e| authentication_error(&e))?;
                    frontend::sasl_response(client.message(), &mut out)?;
                } else {
                    client.finish(body).map_err(|e| authentication_error(&e))?;
                    return Ok(());
                }
            }
            other => {
                return Err(protocol_error(format!(
                    "unsupported authentication method {other} (floe supports password, MD5 and SCRAM-SHA-256)"
                )));
            }
        }
        self.send(&out).await
    }

    async fn send(&mut self, bytes: &[u8]) -> Result<(), PgError> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await?;
        Ok(())
    }

    async fn read_message(&mut self) -> Result<(u8, Bytes), PgError> {
        read_message(&mut self.stream, &mut self.buffer).await
    }

    /// Runs a replication command and returns its rows (text values).
    pub async fn simple_query(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, PgError> {
        let mut out = BytesMut::new();
        frontend::query(sql, &mut out)?;
        self.send(&out).await?;
        let mut rows = Vec::new();
        let mut failure = None;
        loop {
            let (tag, body) = self.read_message().await?;
            match tag {
                b'D' => rows.push(data_row(body)?),
                b'E' => failure = Some(error_response(&body)),
                b'Z' => break,
                b'T' | b'C' | b'I' | b'N' | b'S' => {}
                other => {
                    return Err(protocol_error(format!(
                        "unexpected message '{}' in answer to a replication command",
                        other as char
                    )));
                }
            }
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(rows),
        }
    }

    /// Creates a logical slot (pgoutput) and exports its snapshot, valid while this
    /// connection runs no other command.
    pub async fn create_slot(
        &mut self,
        slot: &str,
        temporary: bool,
    ) -> Result<CreatedSlot, PgError> {
        let temporary = if temporary { " TEMPORARY" } else { "" };
        let rows = self
            .simple_query(&format!(
                "CREATE_REPLICATION_SLOT {}{temporary} LOGICAL pgoutput EXPORT_SNAPSHOT",
                quote_identifier(slot)
            ))
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| protocol_error("CREATE_REPLICATION_SLOT returned no row"))?;
        let field = |index: usize| row.get(index).cloned().flatten();
        let consistent_point = field(1)
            .ok_or_else(|| protocol_error("CREATE_REPLICATION_SLOT returned no consistent point"))?
            .parse::<Lsn>()
            .map_err(protocol_error)?;
        let snapshot_name = field(2)
            .ok_or_else(|| protocol_error("CREATE_REPLICATION_SLOT exported no snapshot"))?;
        Ok(CreatedSlot {
            consistent_point,
            snapshot_name,
        })
    }

    /// Starts streaming the slot's changes from `start` (the server begins at the later
    /// of `start` and the slot's confirmed position).
    pub async fn start_replication(
        mut self,
        slot: &str,
        start: Lsn,
        publication: &str,
    ) -> Result<ReplicationStream, PgError> {
        let publication_names = quote_literal(&quote_identifier(publication));
        let command = format!(
            "START_REPLICATION SLOT {} LOGICAL {start} (\"proto_version\" '1', \"publication_names\" {publication_names})",
            quote_identifier(slot)
        );
        let mut out = BytesMut::new();
        frontend::query(&command, &mut out)?;
        self.send(&out).await?;
        loop {
            let (tag, body) = self.read_message().await?;
            match tag {
                // CopyBothResponse: streaming has begun.
                b'W' => break,
                b'E' => return Err(error_response(&body)),
                b'N' | b'S' => {}
                other => {
                    return Err(protocol_error(format!(
                        "unexpected message '{}' in answer to START_REPLICATION",
                        other as char
                    )));
                }
            }
        }
        let (reader, writer) = tokio::io::split(self.stream);
        Ok(ReplicationStream {
            reader,
            writer,
            buffer: self.buffer,
        })
    }
}

async fn start_tls(
    mut tcp: TcpStream,
    config: std::sync::Arc<rustls::ClientConfig>,
    host: &str,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, PgError> {
    let mut request = BytesMut::new();
    frontend::ssl_request(&mut request);
    tcp.write_all(&request).await?;
    let mut answer = [0u8; 1];
    tcp.read_exact(&mut answer).await?;
    if answer[0] != b'S' {
        return Err(PgError::new(
            ErrorKind::Tls,
            SqlState::SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
            "the server does not support TLS",
        )
        .with_hint("Use SSL MODE 'disable', or enable ssl on the server."));
    }
    let name = tls::server_name(host)?;
    tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| {
            PgError::new(
                ErrorKind::Tls,
                SqlState::SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
                format!("TLS handshake with {host} failed: {e}"),
            )
        })
}

fn authentication_error(error: &std::io::Error) -> PgError {
    PgError::new(
        ErrorKind::Authentication,
        SqlState::INVALID_PASSWORD,
        format!("SCRAM authentication failed: {error}"),
    )
}

/// A message from the replication stream.
#[derive(Debug)]
pub(crate) enum StreamMessage {
    /// WAL data: a pgoutput message, and where the server's WAL ends.
    XLogData { wal_end: Lsn, data: Bytes },
    /// The server is alive; `wal_end` is where it has read up to.
    Keepalive { wal_end: Lsn, reply_requested: bool },
}

/// A replication connection in streaming mode.
pub(crate) struct ReplicationStream {
    reader: ReadHalf<Box<dyn Stream>>,
    writer: WriteHalf<Box<dyn Stream>>,
    buffer: BytesMut,
}

impl ReplicationStream {
    /// Splits the stream so one task can read while another sends status updates.
    pub fn split(self) -> (StreamReader, StatusSender) {
        (
            StreamReader {
                reader: self.reader,
                buffer: self.buffer,
            },
            StatusSender {
                writer: self.writer,
            },
        )
    }
}

/// The reading half of a streaming replication connection.
pub(crate) struct StreamReader {
    reader: ReadHalf<Box<dyn Stream>>,
    buffer: BytesMut,
}

impl StreamReader {
    /// The next message already received, without waiting.
    pub fn next_buffered(&mut self) -> Result<Option<(StreamMessage, usize)>, PgError> {
        while let Some((tag, body)) = split_message(&mut self.buffer)? {
            let size = body.len() + 5;
            if let Some(message) = stream_message(tag, body)? {
                return Ok(Some((message, size)));
            }
        }
        Ok(None)
    }

    /// Waits for more bytes from the server (cancel safe: bytes read are kept).
    pub async fn fill(&mut self) -> Result<(), PgError> {
        let read = self.reader.read_buf(&mut self.buffer).await?;
        if read == 0 {
            return Err(PgError::connection(
                "the server closed the replication connection",
            ));
        }
        Ok(())
    }
}

/// The writing half: standby status updates.
pub(crate) struct StatusSender {
    writer: WriteHalf<Box<dyn Stream>>,
}

impl StatusSender {
    /// Tells the server everything before `lsn` is durable in floe: it may recycle that
    /// WAL, and a restart of the slot begins there.
    pub async fn send_status(&mut self, lsn: Lsn) -> Result<(), PgError> {
        let mut update = BytesMut::with_capacity(34);
        update.put_u8(b'r');
        update.put_u64(lsn.0); // written
        update.put_u64(lsn.0); // flushed
        update.put_u64(lsn.0); // applied
        update.put_i64(postgres_epoch_micros());
        update.put_u8(0); // no reply requested
        let mut out = BytesMut::new();
        frontend::CopyData::new(&update[..])?.write(&mut out);
        self.writer.write_all(&out).await?;
        self.writer.flush().await?;
        Ok(())
    }
}

/// Microseconds since 2000-01-01, the replication protocol's clock.
fn postgres_epoch_micros() -> i64 {
    const UNIX_TO_POSTGRES_EPOCH_SECONDS: i64 = 946_684_800;
    let since_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0);
    since_unix - UNIX_TO_POSTGRES_EPOCH_SECONDS * 1_000_000
}

/// Decodes a message of the COPY BOTH stream; `None` for messages without meaning here.
fn stream_message(tag: u8, mut body: Bytes) -> Result<Option<StreamMessage>, PgError> {
    match tag {
        b'd' => {
            let kind = take(&mut body, 1)?[0];
            match kind {
                b'w' => {
                    let _wal_start = get_u64(&mut body)?;
                    let wal_end = Lsn(get_u64(&mut body)?);
                    let _send_time = get_u64(&mut body)?;
                    Ok(Some(StreamMessage::XLogData {
                        wal_end,
                        data: body,
                    }))
                }
                b'k' => {
                    let wal_end = Lsn(get_u64(&mut body)?);
                    let _send_time = get_u64(&mut body)?;
                    let reply_requested = take(&mut body, 1)?[0] == 1;
                    Ok(Some(StreamMessage::Keepalive {
                        wal_end,
                        reply_requested,
                    }))
                }
                other => Err(protocol_error(format!(
                    "unknown replication message '{}'",
                    other as char
                ))),
            }
        }
        b'E' => Err(error_response(&body)),
        b'c' => Err(PgError::connection(
            "the server ended the replication stream",
        )),
        b'N' | b'S' => Ok(None),
        other => Err(protocol_error(format!(
            "unexpected message '{}' while streaming",
            other as char
        ))),
    }
}

/// Reads one whole message: its tag and body.
async fn read_message<R: AsyncRead + Unpin>(
    reader: &mut R,
    buffer: &mut BytesMut,
) -> Result<(u8, Bytes), PgError> {
    loop {
        if let Some(message) = split_message(buffer)? {
            return Ok(message);
        }
        if reader.read_buf(buffer).await? == 0 {
            return Err(PgError::connection("the server closed the connection"));
        }
    }
}

/// Takes one whole message off the front of `buffer`, if it holds one.
fn split_message(buffer: &mut BytesMut) -> Result<Option<(u8, Bytes)>, PgError> {
    if buffer.len() < 5 {
        return Ok(None);
    }
    let tag = buffer[0];
    let length = u32::from_be_bytes([buffer[1], buffer[2], buffer[3], buffer[4]]) as usize;
    if !(4..=MAX_MESSAGE_BYTES).contains(&length) {
        return Err(protocol_error(format!(
            "invalid message length {length} from the server"
        )));
    }
    if buffer.len() < length + 1 {
        buffer.reserve(length + 1 - buffer.len());
        return Ok(None);
    }
    let mut message = buffer.split_to(length + 1);
    message.advance(5);
    Ok(Some((tag, message.freeze())))
}

/// The fields of an ErrorResponse as a [`PgError`].
fn error_response(body: &[u8]) -> PgError {
    let mut code = "XX000".to_string();
    let mut message = String::from("the server reported an error");
    let mut detail = None;
    let mut hint = None;
    for field in body.split(|b| *b == 0) {
        let Some((&kind, value)) = field.split_first() else {
            continue;
        };
        let value = String::from_utf8_lossy(value).into_owned();
        match kind {
            b'C' => code = value,
            b'M' => message = value,
            b'D' => detail = Some(value),
            b'H' => hint = Some(value),
            _ => {}
        }
    }
    upstream_error(&code, &message, detail.as_deref(), hint.as_deref())
}

/// A DataRow's values as text.
fn data_row(mut body: Bytes) -> Result<Vec<Option<String>>, PgError> {
    let count = get_i16(&mut body)?;
    let mut values = Vec::with_capacity(count.max(0) as usize);
    for _ in 0..count {
        let length = get_i32(&mut body)?;
        if length < 0 {
            values.push(None);
        } else {
            let bytes = take(&mut body, length as usize)?;
            values.push(Some(String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    Ok(values)
}

fn truncated() -> PgError {
    protocol_error("truncated message from the server")
}

pub(crate) fn take(body: &mut Bytes, count: usize) -> Result<Bytes, PgError> {
    if body.len() < count {
        return Err(truncated());
    }
    Ok(body.split_to(count))
}

pub(crate) fn get_u64(body: &mut Bytes) -> Result<u64, PgError> {
    if body.len() < 8 {
        return Err(truncated());
    }
    Ok(body.get_u64())
}

pub(crate) fn get_i32(body: &mut Bytes) -> Result<i32, PgError> {
    if body.len() < 4 {
        return Err(truncated());
    }
    Ok(body.get_i32())
}

pub(crate) fn get_i16(body: &mut Bytes) -> Result<i16, PgError> {
    if body.len() < 2 {
        return Err(truncated());
    }
    Ok(body.get_i16())
}

/// `"name"` with embedded quotes doubled.
pub(crate) fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `'text'` with embedded quotes doubled.
pub(crate) fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_messages_and_refuses_bad_lengths() {
        let mut buffer = BytesMut::from(&b"Z\x00\x00\x00\x05I"[..]);
        buffer.extend_from_slice(b"C\x00\x00");
        let (tag, body) = split_message(&mut buffer).unwrap().unwrap();
        assert_eq!((tag, &body[..]), (b'Z', &b"I"[..]));
        // An incomplete message waits for more bytes.
        assert!(split_message(&mut buffer).unwrap().is_none());
        let mut bad = BytesMut::from(&b"D\x00\x00\x00\x01"[..]);
        assert!(split_message(&mut bad).is_err());
        let mut huge = BytesMut::from(&b"D\x7f\xff\xff\xff"[..]);
        assert!(split_message(&mut huge).is_err());
    }

    #[test]
    fn decodes_keepalives_and_refuses_truncated_ones() {
        let mut body = BytesMut::new();
        body.put_u8(b'k');
        body.put_u64(0x1_0000_0010);
        body.put_u64(0);
        body.put_u8(1);
        match stream_message(b'd', body.clone().freeze()).unwrap() {
            Some(StreamMessage::Keepalive {
                wal_end,
                reply_requested,
            }) => {
                assert_eq!(wal_end, Lsn(0x1_0000_0010));
                assert!(reply_requested);
            }
            other => panic!("unexpected {other:?}"),
        }
        let short = body.freeze().slice(0..9);
        assert!(stream_message(b'd', short).is_err());
    }

    #[test]
    fn error_responses_keep_code_message_detail_and_hint() {
        let body = b"SERROR\0C42704\0Mreplication slot \"s\" does not exist\0Hdo this\0\0";
        let error = error_response(body);
        assert_eq!(error.message, "replication slot \"s\" does not exist");
        assert_eq!(error.hint.as_deref(), Some("do this"));
        assert!(error.detail.unwrap().contains("42704"));
        assert!(!error.retryable);
    }

    #[test]
    fn quotes_names_and_literals() {
        assert_eq!(quote_identifier("my \"pub\""), "\"my \"\"pub\"\"\"");
        assert_eq!(quote_literal("it's"), "'it''s'");
    }
}
