//! The extended protocol's acknowledgements (ParseComplete, BindComplete,
//! CommandComplete, ...) wait in the connection's buffer for the client's Sync or
//! Flush, as PostgreSQL's do: a client reads them only after sending one of those.
//!
//! pgwire's handlers flush after each of them, so a prepared INSERT cost three sends
//! (BindComplete, CommandComplete, ReadyForQuery), each waking the client, where
//! PostgreSQL makes one; with 32 clients inserting at once, the sends and the wake-ups
//! they cause were a fifth of the server's time. [`DeferredFlush`] wraps a connection
//! for the Parse, Bind, Describe and Execute handlers and lets a flush through only
//! when the last message is one the client may be waiting for without a Sync (a
//! CopyInResponse, CopyData, a notice, an error).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Sink, SinkExt};
use pgwire::api::portal::Portal;
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{
    ClientInfo, ClientPortalStore, DEFAULT_NAME, PgWireConnectionState, SessionExtensions,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::extendedquery::{Bind, BindComplete, Parse, ParseComplete};
use pgwire::messages::response::TransactionStatus;
use pgwire::messages::startup::SecretKey;
use pgwire::messages::{PgWireBackendMessage, ProtocolVersion};
use rustls::pki_types::CertificateDer;

/// A connection whose flushes wait while the last message sent is an acknowledgement
/// (see the module's comment). Its buffer is still bounded: the connection writes
/// out when it fills, whatever the messages.
pub struct DeferredFlush<'a, C> {
    client: &'a mut C,
    /// Whether the last message sent may wait for the client's Sync or Flush.
    deferrable: bool,
}

impl<'a, C> DeferredFlush<'a, C> {
    pub fn new(client: &'a mut C) -> Self {
        DeferredFlush {
            client,
            deferrable: false,
        }
    }
}

/// Messages a client reads only after its Sync or Flush. Not a data row: the rows of a
/// query are not flushed one by one anyway, and a subscription's are flushed as they
/// come, for a client that reads them while the statement runs.
fn waits_for_sync(message: &PgWireBackendMessage) -> bool {
    matches!(
        message,
        PgWireBackendMessage::ParseComplete(_)
            | PgWireBackendMessage::BindComplete(_)
            | PgWireBackendMessage::CloseComplete(_)
            | PgWireBackendMessage::CommandComplete(_)
            | PgWireBackendMessage::EmptyQueryResponse(_)
            | PgWireBackendMessage::ParameterDescription(_)
            | PgWireBackendMessage::RowDescription(_)
            | PgWireBackendMessage::NoData(_)
    )
}

impl<C> Sink<PgWireBackendMessage> for DeferredFlush<'_, C>
where
    C: Sink<PgWireBackendMessage> + Unpin,
{
    type Error = C::Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::new(&mut *self.get_mut().client).poll_ready(cx)
    }

    fn start_send(self: Pin<&mut Self>, message: PgWireBackendMessage) -> Result<(), Self::Error> {
        let this = self.get_mut();
        this.deferrable = waits_for_sync(&message);
        Pin::new(&mut *this.client).start_send(message)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let this = self.get_mut();
        if this.deferrable {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut *this.client).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::new(&mut *self.get_mut().client).poll_close(cx)
    }
}

impl<C: ClientInfo> ClientInfo for DeferredFlush<'_, C> {
    fn socket_addr(&self) -> SocketAddr {
        self.client.socket_addr()
    }

    fn is_secure(&self) -> bool {
        self.client.is_secure()
    }

    fn protocol_version(&self) -> ProtocolVersion {
        self.client.protocol_version()
    }

    fn set_protocol_version(&mut self, version: ProtocolVersion) {
        self.client.set_protocol_version(version)
    }

    fn pid_and_secret_key(&self) -> (i32, SecretKey) {
        self.client.pid_and_secret_key()
    }

    fn set_pid_and_secret_key(&mut self, pid: i32, secret_key: SecretKey) {
        self.client.set_pid_and_secret_key(pid, secret_key)
    }

    fn state(&self) -> PgWireConnectionState {
        self.client.state()
    }

    fn set_state(&mut self, new_state: PgWireConnectionState) {
        self.client.set_state(new_state)
    }

    fn transaction_status(&self) -> TransactionStatus {
        self.client.transaction_status()
    }

    fn set_transaction_status(&mut self, new_status: TransactionStatus) {
        self.client.set_transaction_status(new_status)
    }

    fn metadata(&self) -> &HashMap<String, String> {
        self.client.metadata()
    }

    fn metadata_mut(&mut self) -> &mut HashMap<String, String> {
        self.client.metadata_mut()
    }

    fn session_extensions(&self) -> &SessionExtensions {
        self.client.session_extensions()
    }

    fn sni_server_name(&self) -> Option<&str> {
        self.client.sni_server_name()
    }

    fn client_certificates<'b>(&self) -> Option<&[CertificateDer<'b>]> {
        self.client.client_certificates()
    }
}

impl<C: ClientPortalStore> ClientPortalStore for DeferredFlush<'_, C> {
    type PortalStore = C::PortalStore;

    fn portal_store(&self) -> &Self::PortalStore {
        self.client.portal_store()
    }
}

/// Parse: the statement is parsed and stored under its name (the unnamed one when it
/// has none); ParseComplete waits for Sync or Flush.
pub async fn parse<C, P>(client: &mut C, parser: Arc<P>, message: Parse) -> PgWireResult<()>
where
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore<Statement = P::Statement>,
    P: QueryParser + Send + Sync,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let name = message.name.as_deref().unwrap_or(DEFAULT_NAME).to_string();
    match StoredStatement::parse(client, &message, parser).await? {
        Some(statement) => client.portal_store().put_statement(Arc::new(statement)),
        // An empty query string: its portal answers EmptyQueryResponse.
        None => client.portal_store().put_empty_statement(&name),
    }
    DeferredFlush::new(client)
        .send(PgWireBackendMessage::ParseComplete(ParseComplete::new()))
        .await?;
    Ok(())
}

/// Bind: a portal of a stored statement with the client's parameters; BindComplete
/// waits for Sync or Flush.
pub async fn bind<C, S>(client: &mut C, message: Bind) -> PgWireResult<()>
where
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore<Statement = S>,
    S: Clone + Send + Sync,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let statement_name = message.statement_name.as_deref().unwrap_or(DEFAULT_NAME);
    let portal_name = message.portal_name.as_deref().unwrap_or(DEFAULT_NAME);
    match client.portal_store().get_statement(statement_name) {
        Some(Entry::Value(statement)) => {
            let portal = Portal::try_new(&message, statement)?;
            client.portal_store().put_portal(Arc::new(portal));
        }
        Some(Entry::Empty) if message.parameters.is_empty() => {
            client.portal_store().put_empty_portal(portal_name);
        }
        Some(Entry::Empty) => {
            return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                "ERROR".to_string(),
                "08P01".to_string(),
                format!(
                    "bind message supplies {} parameters, but prepared statement \"{}\" requires 0",
                    message.parameters.len(),
                    message.statement_name.as_deref().unwrap_or_default()
                ),
            ))));
        }
        None => return Err(PgWireError::StatementNotFound(statement_name.to_string())),
    }
    DeferredFlush::new(client)
        .send(PgWireBackendMessage::BindComplete(BindComplete::new()))
        .await?;
    Ok(())
}
