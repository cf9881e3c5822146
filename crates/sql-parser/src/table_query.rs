//! `TABLE t`, PostgreSQL's (and Materialize's) short form of `SELECT * FROM
//! t`, which sqlparser reads only inside a set operation and the engine does
//! not plan. Before parsing, `TABLE` where a query may begin (a statement's
//! start, after `(`, after `UNION`, `INTERSECT`, `EXCEPT` and their `ALL` or
//! `DISTINCT`, after a view's `AS`) and followed by a name becomes `SELECT *
//! FROM`. Elsewhere (`CREATE TABLE`, `DROP TABLE`, `SHOW CREATE TABLE`)
//! `TABLE` is left as it is.

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan, Whitespace, Word};

/// Whether `sql` may hold a `TABLE t` query (a cheap test before tokenizing).
pub fn may_have_table_query(sql: &str) -> bool {
    sql.len() > 6 && sql.to_ascii_lowercase().contains("table")
}

/// `tokens` with each `TABLE` that begins a query made `SELECT * FROM`.
pub fn expand_table_queries(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    for (at, token) in tokens.iter().enumerate() {
        if is_keyword(&token.token, Keyword::TABLE)
            && begins_query(&out)
            && names_follow(&tokens, at + 1)
        {
            let span = token.span;
            let space = || TokenWithSpan::new(Token::Whitespace(Whitespace::Space), span);
            out.push(TokenWithSpan::new(keyword("SELECT", Keyword::SELECT), span));
            out.push(space());
            out.push(TokenWithSpan::new(Token::Mul, span));
            out.push(space());
            out.push(TokenWithSpan::new(keyword("FROM", Keyword::FROM), span));
            continue;
        }
        out.push(token.clone());
    }
    out
}

fn keyword(value: &str, keyword: Keyword) -> Token {
    Token::Word(Word {
        value: value.to_string(),
        quote_style: None,
        keyword,
    })
}

fn is_keyword(token: &Token, keyword: Keyword) -> bool {
    matches!(token, Token::Word(word) if word.keyword == keyword && word.quote_style.is_none())
}

/// Whether a query may begin after the tokens `before` (whitespace and
/// comments aside).
fn begins_query(before: &[TokenWithSpan]) -> bool {
    let mut significant = before
        .iter()
        .rev()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)));
    let Some(last) = significant.next() else {
        return true;
    };
    let set_operation = |token: &Token| {
        [Keyword::UNION, Keyword::INTERSECT, Keyword::EXCEPT]
            .iter()
            .any(|k| is_keyword(token, *k))
    };
    match &last.token {
        Token::SemiColon | Token::LParen => true,
        token if set_operation(token) => true,
        token if is_keyword(token, Keyword::ALL) || is_keyword(token, Keyword::DISTINCT) => {
            significant.next().is_some_and(|t| set_operation(&t.token))
        }
        // `CREATE VIEW v AS TABLE t`, `WITH w AS TABLE t` is not SQL.
        token if is_keyword(token, Keyword::AS) => true,
        _ => false,
    }
}

/// Whether a name (`t`, `s.t`, `"T"`) follows at `at`, ending the query or
/// followed by what may follow a table in a query.
fn names_follow(tokens: &[TokenWithSpan], mut at: usize) -> bool {
    let significant = |at: &mut usize| {
        while matches!(
            tokens.get(*at).map(|t| &t.token),
            Some(Token::Whitespace(_))
        ) {
            *at += 1;
        }
        tokens.get(*at).map(|t| &t.token)
    };
    loop {
        match significant(&mut at) {
            Some(Token::Word(_)) => at += 1,
            _ => return false,
        }
        match significant(&mut at) {
            Some(Token::Period) => at += 1,
            _ => return true,
        }
    }
}
