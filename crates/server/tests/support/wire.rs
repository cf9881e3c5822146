//! A bare Postgres wire-protocol client, for what drivers do not let a test say:
//! several extended-protocol Executes before one Sync (a driver's pipelined batch).
//! Messages are written and read as the protocol documents them, byte by byte.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One message from the server: its type byte and body.
#[derive(Debug, Clone)]
pub struct Message {
    pub kind: u8,
    pub body: Vec<u8>,
}

impl Message {
    /// A CommandComplete's tag, or an ErrorResponse's SQLSTATE (as `E:<code>`),
    /// or a ReadyForQuery's status (as `Z:<status>`); the type byte otherwise.
    pub fn summary(&self) -> String {
        match self.kind {
            b'C' => String::from_utf8_lossy(self.body.split(|b| *b == 0).next().unwrap_or(&[]))
                .into_owned(),
            b'E' => format!("E:{}", self.field(b'C').unwrap_or_default()),
            b'Z' => format!("Z:{}", self.body.first().map(|b| *b as char).unwrap_or('?')),
            other => (other as char).to_string(),
        }
    }

    /// A DataRow's values as text (NULL as `None`).
    pub fn values(&self) -> Vec<Option<String>> {
        let mut values = Vec::new();
        let mut at = 2;
        while let Some(length) = self.body.get(at..at + 4) {
            let length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
            at += 4;
            if length < 0 {
                values.push(None);
                continue;
            }
            let end = at + length as usize;
            values.push(Some(
                String::from_utf8_lossy(&self.body[at..end]).into_owned(),
            ));
            at = end;
        }
        values
    }

    /// A field of an ErrorResponse or NoticeResponse.
    pub fn field(&self, code: u8) -> Option<String> {
        self.body
            .split(|b| *b == 0)
            .find(|field| field.first() == Some(&code))
            .map(|field| String::from_utf8_lossy(&field[1..]).into_owned())
    }
}

/// A connection speaking the protocol by hand.
pub struct WireClient {
    stream: TcpStream,
}

fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn cstring(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(text.as_bytes());
    out.push(0);
}

/// Parse and Bind of `sql` into the unnamed statement and portal (no parameters,
/// results as text).
fn parse_and_bind(sql: &str) -> Vec<u8> {
    let mut parse = Vec::new();
    cstring(&mut parse, "");
    cstring(&mut parse, sql);
    parse.extend_from_slice(&0i16.to_be_bytes());
    let mut out = message(b'P', &parse);
    let mut bind = Vec::new();
    cstring(&mut bind, "");
    cstring(&mut bind, "");
    for _ in 0..3 {
        bind.extend_from_slice(&0i16.to_be_bytes());
    }
    out.extend(message(b'B', &bind));
    out
}

/// Execute of the unnamed portal for at most `max_rows` rows (0: all).
fn execute(max_rows: i32) -> Vec<u8> {
    let mut execute = Vec::new();
    cstring(&mut execute, "");
    execute.extend_from_slice(&max_rows.to_be_bytes());
    message(b'E', &execute)
}

impl WireClient {
    /// Connects as `materialize` and reads up to the first ReadyForQuery.
    pub fn connect(port: u16) -> WireClient {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut client = WireClient { stream };
        let mut body = 196608i32.to_be_bytes().to_vec();
        cstring(&mut body, "user");
        cstring(&mut body, "materialize");
        body.push(0);
        let mut startup = (body.len() as i32 + 4).to_be_bytes().to_vec();
        startup.extend_from_slice(&body);
        client.stream.write_all(&startup).unwrap();
        let messages = client.read_until_ready();
        assert!(
            messages.iter().any(|m| m.kind == b'R'),
            "no authentication message: {messages:?}"
        );
        client
    }

    /// Sends Parse, Bind and Execute of each statement (unnamed, no parameters),
    /// then one Sync, and returns every message up to ReadyForQuery.
    pub fn pipeline(&mut self, statements: &[&str]) -> Vec<Message> {
        let mut out = Vec::new();
        for sql in statements {
            out.extend(parse_and_bind(sql));
            out.extend(execute(0));
        }
        out.extend(message(b'S', &[]));
        self.stream.write_all(&out).unwrap();
        self.read_until_ready()
    }

    /// Parses and binds `sql` into the unnamed portal, then Flush (no Sync: the
    /// portal stays); the ParseComplete and BindComplete (or an error).
    pub fn bind(&mut self, sql: &str) -> Vec<Message> {
        let mut out = parse_and_bind(sql);
        out.extend(message(b'H', &[]));
        self.stream.write_all(&out).unwrap();
        let mut messages = Vec::new();
        while messages.len() < 2 && !messages.iter().any(|m: &Message| m.kind == b'E') {
            messages.push(self.read_message());
        }
        messages
    }

    /// Executes the unnamed portal for at most `max_rows` rows (0: all), then Flush;
    /// the messages up to PortalSuspended, CommandComplete or an ErrorResponse.
    pub fn execute(&mut self, max_rows: i32) -> Vec<Message> {
        let mut out = execute(max_rows);
        out.extend(message(b'H', &[]));
        self.stream.write_all(&out).unwrap();
        let mut messages = Vec::new();
        loop {
            let next = self.read_message();
            let done = matches!(next.kind, b's' | b'C' | b'E');
            messages.push(next);
            if done {
                return messages;
            }
        }
    }

    /// Sends Parse, Bind and Execute of `sql` and nothing after them (no Sync, no
    /// Flush).
    pub fn send_unsynced(&mut self, sql: &str) {
        let mut out = parse_and_bind(sql);
        out.extend(execute(0));
        self.stream.write_all(&out).unwrap();
    }

    /// Whether any byte arrives from the server within `wait`.
    pub fn anything_within(&mut self, wait: Duration) -> bool {
        self.stream.set_read_timeout(Some(wait)).unwrap();
        let mut byte = [0u8; 1];
        let arrived = matches!(self.stream.peek(&mut byte), Ok(n) if n > 0);
        self.stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        arrived
    }

    /// Flush; the next `count` messages.
    pub fn flush(&mut self, count: usize) -> Vec<Message> {
        self.stream.write_all(&message(b'H', &[])).unwrap();
        (0..count).map(|_| self.read_message()).collect()
    }

    /// Sync; every message up to ReadyForQuery.
    pub fn sync(&mut self) -> Vec<Message> {
        self.stream.write_all(&message(b'S', &[])).unwrap();
        self.read_until_ready()
    }

    /// A simple query; every message up to ReadyForQuery.
    pub fn simple(&mut self, sql: &str) -> Vec<Message> {
        let mut body = Vec::new();
        cstring(&mut body, sql);
        self.stream.write_all(&message(b'Q', &body)).unwrap();
        self.read_until_ready()
    }

    fn read_message(&mut self) -> Message {
        let mut header = [0u8; 5];
        self.stream.read_exact(&mut header).unwrap();
        let length = i32::from_be_bytes([header[1], header[2], header[3], header[4]]);
        let mut body = vec![0u8; (length - 4) as usize];
        self.stream.read_exact(&mut body).unwrap();
        Message {
            kind: header[0],
            body,
        }
    }

    fn read_until_ready(&mut self) -> Vec<Message> {
        let mut messages = Vec::new();
        loop {
            let next = self.read_message();
            let done = next.kind == b'Z';
            messages.push(next);
            if done {
                return messages;
            }
        }
    }
}

/// The summaries of the messages that say what happened: command tags, errors
/// and the final status (parse/bind acknowledgements, rows and notices left out).
pub fn outcome(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| matches!(m.kind, b'C' | b'E' | b'Z'))
        .map(Message::summary)
        .collect()
}
