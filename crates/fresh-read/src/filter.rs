//! Lance parses a filter as `SELECT 1 FROM t WHERE <filter>` and keeps the first statement's
//! `WHERE` clause: whatever follows a complete expression (`age > 3 garbage`,
//! `age > 3 LIMIT 1`, `x > 1; DROP TABLE y`) is dropped without a word, so a typo returns
//! the wrong rows. The filter is parsed here the way Lance parses it (the generic SQL
//! dialect, `==` read as `=`) and refused when input is left after the expression.

use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer};

/// The first token left after the filter's expression, if any. `None` also when the
/// filter does not parse here: Lance then reports what is wrong with it.
pub(crate) fn trailing_input(filter: &str) -> Option<String> {
    let dialect = GenericDialect {};
    let tokens = Tokenizer::new(&dialect, filter).tokenize().ok()?;
    let mut kept: Vec<Token> = Vec::with_capacity(tokens.len());
    for token in tokens {
        if token == Token::Eq && kept.last() == Some(&Token::Eq) {
            continue;
        }
        kept.push(token);
    }
    let mut parser = Parser::new(&dialect).with_tokens(kept);
    parser.parse_expr().ok()?;
    match parser.peek_token().token {
        Token::EOF => None,
        rest => Some(rest.to_string()),
    }
}
