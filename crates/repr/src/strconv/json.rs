//! `jsonb`: parsing (with Postgres' errors) and the normalized text floe
//! keeps inside the engine.

use super::*;

/// A JSON value as `jsonb` holds it: objects keep one value per key (the
/// last given) in key order; numbers are exact decimals that keep their
/// scale, as Postgres' numeric does (`1.50` stays `1.50`, `1e2` is `100`).
#[derive(Debug, Clone)]
pub enum Json {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(BTreeMap<String, Json>),
}

/// Numbers are equal by value (`1.5` and `1.50` are the same number), as
/// Postgres compares jsonb.
impl PartialEq for Json {
    fn eq(&self, other: &Json) -> bool {
        match (self, other) {
            (Json::Null, Json::Null) => true,
            (Json::Bool(a), Json::Bool(b)) => a == b,
            (Json::Number(a), Json::Number(b)) => {
                a == b
                    || matches!((Decimal::parse(a), Decimal::parse(b)),
                        (Ok(Some(x)), Ok(Some(y))) if x.cmp(&y) == Ordering::Equal)
            }
            (Json::String(a), Json::String(b)) => a == b,
            (Json::Array(a), Json::Array(b)) => a == b,
            (Json::Object(a), Json::Object(b)) => a == b,
            _ => false,
        }
    }
}

/// A token of JSON text.
enum Token {
    ObjectStart,
    ObjectEnd,
    ArrayStart,
    ArrayEnd,
    Comma,
    Colon,
    String(String),
    Number(String),
    /// `true`, `false` or `null`.
    Word(Json),
    End,
}

/// A token and the bytes of the input it spans (messages quote them).
struct Lexed {
    token: Token,
    start: usize,
    end: usize,
}

/// Postgres' JSON lexer and parser, with its messages: an error names the
/// offending token (`Token "tru" is invalid.`, `Expected ":", but found
/// "1".`) in the DETAIL of `invalid input syntax for type json`.
pub(super) struct JsonParser<'a> {
    bytes: &'a [u8],
    text: &'a str,
    at: usize,
}

/// The characters Postgres' lexer reads as one word (bytes of non-ASCII
/// characters included), so `truex` and `01` are one invalid token.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

fn syntax_error(detail: impl Into<String>) -> ValueError {
    ValueError::new(
        SqlState::INVALID_TEXT_REPRESENTATION,
        "invalid input syntax for type json",
    )
    .with_detail(detail)
}

fn low_surrogate_expected() -> ValueError {
    syntax_error("Unicode low surrogate must follow a high surrogate.")
}

impl<'a> JsonParser<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn invalid_token(&self, start: usize, end: usize) -> ValueError {
        syntax_error(format!("Token \"{}\" is invalid.", &self.text[start..end]))
    }

    /// The error for a token the parser did not expect here.
    fn unexpected(&self, lexed: &Lexed, expected: &str) -> ValueError {
        if let Token::End = lexed.token {
            return syntax_error("The input string ended unexpectedly.");
        }
        let found = &self.text[lexed.start..lexed.end];
        syntax_error(format!("{expected}, but found \"{found}\"."))
    }

    fn skip_ws(&mut self) {
        while self
            .peek()
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.at += 1;
        }
    }

    /// Skips a run of bytes `accept` takes; how many it skipped.
    fn skip_while(&mut self, accept: impl Fn(u8) -> bool) -> usize {
        let from = self.at;
        while self.peek().is_some_and(&accept) {
            self.at += 1;
        }
        self.at - from
    }

    fn lex(&mut self) -> Result<Lexed, ValueError> {
        self.skip_ws();
        let start = self.at;
        let structural = match self.peek() {
            None => Some(Token::End),
            Some(b'{') => Some(Token::ObjectStart),
            Some(b'}') => Some(Token::ObjectEnd),
            Some(b'[') => Some(Token::ArrayStart),
            Some(b']') => Some(Token::ArrayEnd),
            Some(b',') => Some(Token::Comma),
            Some(b':') => Some(Token::Colon),
            _ => None,
        };
        let token = match structural {
            Some(token) => {
                if !matches!(token, Token::End) {
                    self.at += 1;
                }
                token
            }
            None => match self.peek() {
                Some(b'"') => Token::String(self.string(start)?),
                Some(b'-' | b'0'..=b'9') => Token::Number(self.number(start)?),
                _ => Token::Word(self.word(start)?),
            },
        };
        Ok(Lexed {
            token,
            start,
            end: self.at,
        })
    }

    fn word(&mut self, start: usize) -> Result<Json, ValueError> {
        if self.skip_while(is_word_byte) == 0 {
            // A lone punctuation character is a token of its own.
            return Err(self.invalid_token(start, start + 1));
        }
        match &self.text[start..self.at] {
            "true" => Ok(Json::Bool(true)),
            "false" => Ok(Json::Bool(false)),
            "null" => Ok(Json::Null),
            _ => Err(self.invalid_token(start, self.at)),
        }
    }

    /// A number's text as Postgres' numeric prints it (its scale kept).
    fn number(&mut self, start: usize) -> Result<String, ValueError> {
        let digit = |b: u8| b.is_ascii_digit();
        let mut valid = true;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                self.skip_while(digit);
            }
            _ => valid = false,
        }
        if valid && self.peek() == Some(b'.') {
            self.at += 1;
            valid = self.skip_while(digit) > 0;
        }
        if valid && matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            valid = self.skip_while(digit) > 0;
        }
        // Letters or digits right after a number make it one invalid token.
        if self.skip_while(is_word_byte) > 0 || !valid {
            return Err(self.invalid_token(start, self.at));
        }
        let text = &self.text[start..self.at];
        let decimal = Decimal::parse(text)?.ok_or_else(|| self.invalid_token(start, self.at))?;
        check_bare_numeric(&decimal)?;
        Ok(decimal.format(Some(decimal.fraction.len())))
    }

    /// The four hex digits of a `\u` escape; the string started at `start`.
    fn hex4(&mut self, start: usize) -> Result<u32, ValueError> {
        let mut value = 0;
        for _ in 0..4 {
            let Some(b) = self.peek() else {
                return Err(self.invalid_token(start, self.bytes.len()));
            };
            let digit = (b as char).to_digit(16).ok_or_else(|| {
                syntax_error("\"\\u\" must be followed by four hexadecimal digits.")
            })?;
            value = value * 16 + digit;
            self.at += 1;
        }
        Ok(value)
    }

    /// A `\u` escape's code point into `out`, pairing surrogates through
    /// `high` (a high surrogate waiting for its low one).
    fn unicode_escape(
        &mut self,
        start: usize,
        out: &mut String,
        high: &mut Option<u32>,
    ) -> Result<(), ValueError> {
        let code = self.hex4(start)?;
        let code = match code {
            0xD800..=0xDBFF => {
                if high.replace(code).is_some() {
                    return Err(syntax_error(
                        "Unicode high surrogate must not follow a high surrogate.",
                    ));
                }
                return Ok(());
            }
            0xDC00..=0xDFFF => {
                let first = high.take().ok_or_else(low_surrogate_expected)?;
                0x10000 + ((first - 0xD800) << 10) + (code - 0xDC00)
            }
            _ if high.is_some() => return Err(low_surrogate_expected()),
            0 => {
                return Err(ValueError::new(
                    SqlState::UNTRANSLATABLE_CHARACTER,
                    "unsupported Unicode escape sequence",
                )
                .with_detail("\\u0000 cannot be converted to text."));
            }
            code => code,
        };
        out.push(char::from_u32(code).ok_or_else(low_surrogate_expected)?);
        Ok(())
    }

    fn string(&mut self, start: usize) -> Result<String, ValueError> {
        self.at += 1;
        let mut out = String::new();
        let mut high = None;
        loop {
            let Some(b) = self.peek() else {
                // An unterminated string is one invalid token to the end.
                return Err(self.invalid_token(start, self.bytes.len()));
            };
            if b != b'\\' && high.is_some() {
                return Err(low_surrogate_expected());
            }
            match b {
                b'"' => {
                    self.at += 1;
                    return Ok(out);
                }
                b'\\' => {
                    self.at += 1;
                    self.escape(start, &mut out, &mut high)?;
                }
                b if b < 0x20 => {
                    return Err(syntax_error(format!(
                        "Character with value 0x{b:02x} must be escaped."
                    )));
                }
                _ => {
                    let from = self.at;
                    self.skip_while(|b| b != b'"' && b != b'\\' && b >= 0x20);
                    out.push_str(&self.text[from..self.at]);
                }
            }
        }
    }

    /// The escape after a backslash into `out`.
    fn escape(
        &mut self,
        start: usize,
        out: &mut String,
        high: &mut Option<u32>,
    ) -> Result<(), ValueError> {
        let Some(escape) = self.text[self.at..].chars().next() else {
            return Err(self.invalid_token(start, self.bytes.len()));
        };
        self.at += escape.len_utf8();
        if escape == 'u' {
            return self.unicode_escape(start, out, high);
        }
        if high.is_some() {
            return Err(low_surrogate_expected());
        }
        out.push(match escape {
            '"' => '"',
            '\\' => '\\',
            '/' => '/',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            other => {
                return Err(syntax_error(format!(
                    "Escape sequence \"\\{other}\" is invalid."
                )));
            }
        });
        Ok(())
    }

    /// The value that starts with `lexed`.
    fn value(&mut self, lexed: Lexed, depth: usize) -> Result<Json, ValueError> {
        match lexed.token {
            Token::String(s) => Ok(Json::String(s)),
            Token::Number(n) => Ok(Json::Number(n)),
            Token::Word(json) => Ok(json),
            Token::ArrayStart => self.array(depth + 1),
            Token::ObjectStart => self.object(depth + 1),
            _ => Err(self.unexpected(&lexed, "Expected JSON value")),
        }
    }

    fn check_depth(depth: usize) -> Result<(), ValueError> {
        if depth > MAX_NESTING {
            return Err(ValueError::new(
                SqlState::PROGRAM_LIMIT_EXCEEDED,
                "jsonb value is too deeply nested",
            ));
        }
        Ok(())
    }

    fn array(&mut self, depth: usize) -> Result<Json, ValueError> {
        Self::check_depth(depth)?;
        let mut items = Vec::new();
        let mut next = self.lex()?;
        if let Token::ArrayEnd = next.token {
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value(next, depth)?);
            let separator = self.lex()?;
            match separator.token {
                Token::Comma => next = self.lex()?,
                Token::ArrayEnd => return Ok(Json::Array(items)),
                _ => return Err(self.unexpected(&separator, "Expected \",\" or \"]\"")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json, ValueError> {
        Self::check_depth(depth)?;
        let mut object = BTreeMap::new();
        let mut next = self.lex()?;
        if let Token::ObjectEnd = next.token {
            return Ok(Json::Object(object));
        }
        // The first key may also be the end of an empty object.
        let mut expected = "Expected string or \"}\"";
        loop {
            let Token::String(key) = next.token else {
                return Err(self.unexpected(&next, expected));
            };
            let colon = self.lex()?;
            if !matches!(colon.token, Token::Colon) {
                return Err(self.unexpected(&colon, "Expected \":\""));
            }
            let start = self.lex()?;
            object.insert(key, self.value(start, depth)?);
            let separator = self.lex()?;
            match separator.token {
                Token::Comma => next = self.lex()?,
                Token::ObjectEnd => return Ok(Json::Object(object)),
                _ => return Err(self.unexpected(&separator, "Expected \",\" or \"}\"")),
            }
            expected = "Expected string";
        }
    }
}

pub(super) fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

pub(super) fn write_json(out: &mut String, json: &Json) {
    match json {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => out.push_str(n),
        Json::String(s) => write_json_string(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        Json::Object(object) => {
            out.push('{');
            for (i, (key, value)) in object.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(out, key);
                out.push(':');
                write_json(out, value);
            }
            out.push('}');
        }
    }
}

/// Parses JSON text into a [`Json`] value (`jsonb`'s input rules).
pub fn parse_json(text: &str) -> Result<Json, ValueError> {
    let mut parser = JsonParser {
        bytes: text.as_bytes(),
        text,
        at: 0,
    };
    let first = parser.lex()?;
    let json = parser.value(first, 0)?;
    let last = parser.lex()?;
    if !matches!(last.token, Token::End) {
        return Err(parser.unexpected(&last, "Expected end of input"));
    }
    Ok(json)
}

/// The normalized text of a [`Json`] value (as [`parse_jsonb`] produces).
pub fn json_text(json: &Json) -> String {
    let mut out = String::new();
    write_json(&mut out, json);
    out
}

/// The text [`Json`] values equal by value share (`1.50` and `1.5` are one
/// number): the normalized text with every number in its shortest form.
/// Grouping, DISTINCT and joins compare it, as Postgres compares jsonb by
/// value while printing each number as written.
pub fn json_key_text(json: &Json) -> String {
    json_text(&shortest_numbers(json))
}

/// [`json_key_text`] of normalized text ([`parse_jsonb`]'s output).
pub fn jsonb_key_text(normalized: &str) -> Result<String, ValueError> {
    // Numbers read from text are written as numeric prints them, so only a
    // fraction can hold zeros another spelling leaves out; a float's
    // conversion (`to_jsonb`) may also write an exponent (`1e+20`).
    if !normalized.contains('.') && !normalized.contains("e+") && !normalized.contains("e-") {
        return Ok(normalized.to_string());
    }
    parse_json(normalized).map(|json| json_key_text(&json))
}

fn shortest_numbers(json: &Json) -> Json {
    match json {
        Json::Number(text) => match Decimal::parse(text) {
            Ok(Some(decimal)) => Json::Number(decimal.format(None)),
            _ => json.clone(),
        },
        Json::Array(items) => Json::Array(items.iter().map(shortest_numbers).collect()),
        Json::Object(object) => Json::Object(
            object
                .iter()
                .map(|(key, value)| (key.clone(), shortest_numbers(value)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `jsonb` input, normalized: no insignificant whitespace, object keys in
/// order with the last of duplicates kept, numbers as Postgres' numeric
/// prints them (`1.50` stays `1.50`, `1e2` is `100`).
pub fn parse_jsonb(text: &str) -> Result<String, ValueError> {
    parse_json(text).map(|json| json_text(&json))
}

/// A step into a JSON value: an object's member by key, or an array's element
/// by position (from 0; a negative one counts from the end).
pub enum JsonStep<'a> {
    Key(&'a str),
    Index(i64),
}

/// The text of the value `step` reaches in JSON text, as written there (`json`'s
/// `->` keeps the input's spelling): of an object, its last member of the key;
/// `None` where there is no such value.
pub fn json_step_text<'t>(
    text: &'t str,
    step: JsonStep<'_>,
) -> Result<Option<&'t str>, ValueError> {
    let mut parser = JsonParser {
        bytes: text.as_bytes(),
        text,
        at: 0,
    };
    let first = parser.lex()?;
    match (first.token, step) {
        (Token::ObjectStart, JsonStep::Key(key)) => parser.member_text(key),
        (Token::ArrayStart, JsonStep::Index(index)) => parser.element_text(index),
        _ => Ok(None),
    }
}

/// The elements of JSON text that is an array, each as written there (`json`'s
/// `json_array_elements`); `None` where it is no array.
pub fn json_elements_text(text: &str) -> Result<Option<Vec<&str>>, ValueError> {
    let mut parser = JsonParser {
        bytes: text.as_bytes(),
        text,
        at: 0,
    };
    match parser.lex()?.token {
        Token::ArrayStart => parser.elements().map(Some),
        _ => Ok(None),
    }
}

/// The members of JSON text that is an object, in order and duplicates kept,
/// each key and its value as written there (`json`'s `json_each`); `None`
/// where it is no object.
pub fn json_members_text(text: &str) -> Result<Option<Vec<(String, &str)>>, ValueError> {
    let mut parser = JsonParser {
        bytes: text.as_bytes(),
        text,
        at: 0,
    };
    match parser.lex()?.token {
        Token::ObjectStart => parser.members().map(Some),
        _ => Ok(None),
    }
}

impl<'a> JsonParser<'a> {
    /// The next value's text, as written.
    fn value_text(&mut self) -> Result<&'a str, ValueError> {
        let first = self.lex()?;
        let start = first.start;
        self.value(first, 1)?;
        Ok(&self.text[start..self.at])
    }

    /// The text of the last member named `key` of the object being read.
    fn member_text(&mut self, key: &str) -> Result<Option<&'a str>, ValueError> {
        let members = self.members()?;
        Ok(members
            .into_iter()
            .rev()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value))
    }

    /// The members of the object being read, as written.
    fn members(&mut self) -> Result<Vec<(String, &'a str)>, ValueError> {
        let mut members = Vec::new();
        let mut next = self.lex()?;
        loop {
            let Token::String(name) = next.token else {
                return Ok(members);
            };
            let colon = self.lex()?;
            if !matches!(colon.token, Token::Colon) {
                return Err(self.unexpected(&colon, "Expected \":\""));
            }
            members.push((name, self.value_text()?));
            let separator = self.lex()?;
            match separator.token {
                Token::Comma => next = self.lex()?,
                Token::ObjectEnd => return Ok(members),
                _ => return Err(self.unexpected(&separator, "Expected \",\" or \"}\"")),
            }
        }
    }

    /// The text of element `index` of the array being read.
    fn element_text(&mut self, index: i64) -> Result<Option<&'a str>, ValueError> {
        let elements = self.elements()?;
        let position = if index < 0 {
            i64::try_from(elements.len()).ok().map(|len| len + index)
        } else {
            Some(index)
        };
        Ok(position
            .and_then(|p| usize::try_from(p).ok())
            .and_then(|p| elements.get(p).copied()))
    }

    /// The elements of the array being read, as written.
    fn elements(&mut self) -> Result<Vec<&'a str>, ValueError> {
        let mut elements = Vec::new();
        let mut at = self.at;
        if let Token::ArrayEnd = self.lex()?.token {
            return Ok(elements);
        }
        loop {
            // Read again from before the element's first token.
            self.at = at;
            elements.push(self.value_text()?);
            let separator = self.lex()?;
            match separator.token {
                Token::Comma => at = self.at,
                Token::ArrayEnd => return Ok(elements),
                _ => return Err(self.unexpected(&separator, "Expected \",\" or \"]\"")),
            }
        }
    }
}
