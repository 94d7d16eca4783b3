//! Cypher text → tokens, each with the byte offset it starts at (errors name the line and
//! column from it).

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// A name or a keyword (keywords are told apart by the parser, case-insensitively).
    Ident(String),
    /// A `backquoted` name: never a keyword.
    Quoted(String),
    Str(String),
    Int(i64),
    Float(f64),
    Param(String),
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Colon,
    Comma,
    Dot,
    DotDot,
    Pipe,
    Dash,
    ArrowRight,
    ArrowLeft,
    Lt,
    Gt,
    Le,
    Ge,
    Eq,
    Ne,
    RegexMatch,
    Plus,
    Star,
    Slash,
    Percent,
    Caret,
    Semicolon,
    Eof,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub at: usize,
    /// The byte offset just past the token.
    pub end: usize,
}

pub fn tokenize(text: &str) -> Result<Vec<Token>> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && bytes.get(i + 1) == Some(&b'*') {
            match text[i + 2..].find("*/") {
                Some(end) => i += end + 4,
                None => return Err(Error::syntax(text, start, "a comment that never ends")),
            }
            continue;
        }
        let two = |second: u8| bytes.get(i + 1) == Some(&second);
        let (tok, len) = match c {
            b'(' => (Tok::LParen, 1),
            b')' => (Tok::RParen, 1),
            b'[' => (Tok::LBracket, 1),
            b']' => (Tok::RBracket, 1),
            b'{' => (Tok::LBrace, 1),
            b'}' => (Tok::RBrace, 1),
            b':' => (Tok::Colon, 1),
            b',' => (Tok::Comma, 1),
            b';' => (Tok::Semicolon, 1),
            b'|' => (Tok::Pipe, 1),
            b'+' => (Tok::Plus, 1),
            b'*' => (Tok::Star, 1),
            b'/' => (Tok::Slash, 1),
            b'%' => (Tok::Percent, 1),
            b'^' => (Tok::Caret, 1),
            b'.' if two(b'.') => (Tok::DotDot, 2),
            b'.' if !bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => (Tok::Dot, 1),
            b'-' if two(b'>') => (Tok::ArrowRight, 2),
            b'-' => (Tok::Dash, 1),
            b'<' if two(b'-') => (Tok::ArrowLeft, 2),
            b'<' if two(b'>') => (Tok::Ne, 2),
            b'<' if two(b'=') => (Tok::Le, 2),
            b'<' => (Tok::Lt, 1),
            b'>' if two(b'=') => (Tok::Ge, 2),
            b'>' => (Tok::Gt, 1),
            b'=' if two(b'~') => (Tok::RegexMatch, 2),
            b'=' => (Tok::Eq, 1),
            b'!' if two(b'=') => (Tok::Ne, 2),
            b'\'' | b'"' => {
                let (value, len) = string(text, i)?;
                (Tok::Str(value), len)
            }
            b'`' => match text[i + 1..].find('`') {
                Some(end) => (Tok::Quoted(text[i + 1..i + 1 + end].to_owned()), end + 2),
                None => return Err(Error::syntax(text, start, "a `name` that never ends")),
            },
            b'$' => {
                let len = ident_len(&bytes[i + 1..]);
                if len == 0 {
                    return Err(Error::syntax(text, start, "`$` with no parameter name"));
                }
                (Tok::Param(text[i + 1..i + 1 + len].to_owned()), len + 1)
            }
            b'0'..=b'9' | b'.' => number(text, i)?,
            _ if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 => {
                let len = ident_len(&bytes[i..]);
                (Tok::Ident(text[i..i + len].to_owned()), len)
            }
            _ => {
                let shown = text[i..].chars().next().unwrap_or(' ');
                return Err(Error::syntax(
                    text,
                    start,
                    &format!("unexpected character `{shown}`"),
                ));
            }
        };
        i += len;
        tokens.push(Token {
            tok,
            at: start,
            end: i,
        });
    }
    tokens.push(Token {
        tok: Tok::Eof,
        at: text.len(),
        end: text.len(),
    });
    Ok(tokens)
}

fn ident_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80)
        .count()
}

fn number(text: &str, start: usize) -> Result<(Tok, usize)> {
    let bytes = text.as_bytes();
    let mut end = start;
    let mut float = false;
    while end < bytes.len() {
        match bytes[end] {
            b'0'..=b'9' => end += 1,
            // `1..3` is a range, not the float `1.`.
            b'.' if !float && bytes.get(end + 1) != Some(&b'.') => {
                float = true;
                end += 1;
            }
            b'e' | b'E' if end > start => {
                float = true;
                end += 1;
                if matches!(bytes.get(end), Some(b'+' | b'-')) {
                    end += 1;
                }
            }
            _ => break,
        }
    }
    let literal = &text[start..end];
    let tok = if float {
        literal
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Tok::Float)
    } else {
        literal.parse().map(Tok::Int).ok()
    };
    match tok {
        Some(tok) => Ok((tok, end - start)),
        None => Err(Error::syntax(
            text,
            start,
            &format!("`{literal}` is not a number this query language takes"),
        )),
    }
}

fn string(text: &str, start: usize) -> Result<(String, usize)> {
    let quote = text.as_bytes()[start] as char;
    let mut value = String::new();
    let mut chars = text[start + 1..].char_indices();
    while let Some((offset, c)) = chars.next() {
        match c {
            c if c == quote => return Ok((value, offset + 2)),
            '\\' => match chars.next() {
                Some((_, 'n')) => value.push('\n'),
                Some((_, 't')) => value.push('\t'),
                Some((_, 'r')) => value.push('\r'),
                Some((at, 'u')) => {
                    let digits = text.get(start + 1 + at + 1..start + 1 + at + 5);
                    let decoded = digits
                        .and_then(|d| u32::from_str_radix(d, 16).ok())
                        .and_then(char::from_u32);
                    match decoded {
                        Some(c) => {
                            value.push(c);
                            for _ in 0..4 {
                                chars.next();
                            }
                        }
                        None => {
                            return Err(Error::syntax(
                                text,
                                start + 1 + at,
                                "`\\u` takes four hex digits (`\\u00e9`)",
                            ))
                        }
                    }
                }
                Some((_, other)) => value.push(other),
                None => break,
            },
            c => value.push(c),
        }
    }
    Err(Error::syntax(text, start, "a string that never ends"))
}
