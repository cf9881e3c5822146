//! `JOIN ... USING (a, b) AS j`, PostgreSQL's alias of a join's merged
//! columns, which sqlparser does not read. Before parsing, the alias leaves
//! the text and joins the USING list as one more column, [`JOIN_ALIAS`]
//! followed by its name; floe-query's USING rewrite takes it out again and
//! reads `j.a` as the merged column.

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan, Word};

/// The prefix of the USING column that carries a join's alias (a
/// private-use character no client writes).
pub const JOIN_ALIAS: &str = "\u{E004}join alias ";

/// `tokens` with each `USING (...) AS alias` made `USING (..., "<JOIN_ALIAS>alias")`.
pub fn move_join_aliases(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut at = 0;
    while at < tokens.len() {
        if is_keyword(&tokens[at].token, Keyword::USING)
            && let Some((close, alias, end)) = aliased_list(&tokens, at + 1)
        {
            out.extend_from_slice(&tokens[at..close]);
            let span = tokens[close].span;
            out.push(TokenWithSpan::new(Token::Comma, span));
            let marker = Word {
                value: format!("{JOIN_ALIAS}{}", alias.value),
                quote_style: Some('"'),
                keyword: Keyword::NoKeyword,
            };
            out.push(TokenWithSpan::new(Token::Word(marker), span));
            out.push(tokens[close].clone());
            at = end;
            continue;
        }
        out.push(tokens[at].clone());
        at += 1;
    }
    out
}

fn is_keyword(token: &Token, keyword: Keyword) -> bool {
    matches!(token, Token::Word(word) if word.keyword == keyword && word.quote_style.is_none())
}

fn skip_whitespace(tokens: &[TokenWithSpan], mut at: usize) -> usize {
    while matches!(tokens.get(at).map(|t| &t.token), Some(Token::Whitespace(_))) {
        at += 1;
    }
    at
}

/// After `USING` at `at`: a parenthesized list of names followed by `AS
/// alias`, as the position of its `)`, the alias and the position after it.
fn aliased_list(tokens: &[TokenWithSpan], at: usize) -> Option<(usize, Word, usize)> {
    let mut at = skip_whitespace(tokens, at);
    if tokens.get(at)?.token != Token::LParen {
        return None;
    }
    at += 1;
    let close = loop {
        match &tokens.get(at)?.token {
            Token::RParen => break at,
            Token::Word(_) | Token::Comma | Token::Whitespace(_) => at += 1,
            _ => return None,
        }
    };
    let after = skip_whitespace(tokens, close + 1);
    if !is_keyword(&tokens.get(after)?.token, Keyword::AS) {
        return None;
    }
    let name_at = skip_whitespace(tokens, after + 1);
    match &tokens.get(name_at)?.token {
        Token::Word(alias) => Some((close, alias.clone(), name_at + 1)),
        _ => None,
    }
}
