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
            let mut parse = Vec::new();
            cstring(&mut parse, "");
            cstring(&mut parse, sql);
            parse.extend_from_slice(&0i16.to_be_bytes());
            out.extend(message(b'P', &parse));
            let mut bind = Vec::new();
            cstring(&mut bind, "");
            cstring(&mut bind, "");
            for _ in 0..3 {
                bind.extend_from_slice(&0i16.to_be_bytes());
            }
            out.extend(message(b'B', &bind));
            let mut execute = Vec::new();
            cstring(&mut execute, "");
            execute.extend_from_slice(&0i32.to_be_bytes());
            out.extend(message(b'E', &execute));
        }
        out.extend(message(b'S', &[]));
        self.stream.write_all(&out).unwrap();
        self.read_until_ready()
    }

    /// A simple query; every message up to ReadyForQuery.
    pub fn simple(&mut self, sql: &str) -> Vec<Message> {
        let mut body = Vec::new();
        cstring(&mut body, sql);
        self.stream.write_all(&message(b'Q', &body)).unwrap();
        self.read_until_ready()
    }

    fn read_until_ready(&mut self) -> Vec<Message> {
        let mut messages = Vec::new();
        loop {
            let mut header = [0u8; 5];
            self.stream.read_exact(&mut header).unwrap();
            let length = i32::from_be_bytes([header[1], header[2], header[3], header[4]]);
            let mut body = vec![0u8; (length - 4) as usize];
            self.stream.read_exact(&mut body).unwrap();
            let done = header[0] == b'Z';
            messages.push(Message {
                kind: header[0],
                body,
            });
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
