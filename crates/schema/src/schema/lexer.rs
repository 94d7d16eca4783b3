//! Tokenizer for the schema language. Newlines are plain whitespace: the grammar never
//! needs them, which lets a whole type sit on one line (`node Company { name: String @key }`).

use super::error::{Position, SchemaError, SyntaxSnafu};
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
    Int(i64),
    Float(f64),
    Str(String),
    LBrace,
    RBrace,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Colon,
    Comma,
    Semicolon,
    Question,
    Equals,
    At,
    Arrow,
    DotDot,
    Eof,
}

impl fmt::Display for Tok {
    /// How a token is named in "found …" messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let punct = match self {
            Tok::Ident(name) => return write!(f, "'{name}'"),
            Tok::Int(value) => return write!(f, "number {value}"),
            Tok::Float(value) => return write!(f, "number {value:?}"),
            Tok::Str(text) => return write!(f, "string {text:?}"),
            Tok::Eof => return f.write_str("end of input"),
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::Colon => ":",
            Tok::Comma => ",",
            Tok::Semicolon => ";",
            Tok::Question => "?",
            Tok::Equals => "=",
            Tok::At => "@",
            Tok::Arrow => "->",
            Tok::DotDot => "..",
        };
        write!(f, "'{punct}'")
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    pub at: Position,
}

/// Split `source` into tokens, ending with a single `Tok::Eof`.
pub(crate) fn tokenize(source: &str) -> Result<Vec<Token>, SchemaError> {
    let mut lexer = Lexer {
        chars: source.chars().collect(),
        index: 0,
        line: 1,
        column: 1,
    };
    let mut tokens = Vec::new();
    loop {
        let token = lexer.next_token()?;
        let done = token.tok == Tok::Eof;
        tokens.push(token);
        if done {
            return Ok(tokens);
        }
    }
}

struct Lexer {
    chars: Vec<char>,
    index: usize,
    line: u32,
    column: u32,
}

impl Lexer {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.index + ahead).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.get(self.index).copied()?;
        self.index += 1;
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn position(&self) -> Position {
        Position {
            line: self.line,
            column: self.column,
        }
    }

    fn skip_blanks_and_comments(&mut self) {
        loop {
            match self.peek(0) {
                Some(c) if c.is_whitespace() => {
                    self.bump();
                }
                Some('/') if self.peek(1) == Some('/') => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.bump();
                    }
                }
                _ => return,
            }
        }
    }

    fn next_token(&mut self) -> Result<Token, SchemaError> {
        self.skip_blanks_and_comments();
        let at = self.position();
        let Some(c) = self.peek(0) else {
            return Ok(Token { tok: Tok::Eof, at });
        };
        let tok = match c {
            '{' | '}' | '(' | ')' | '[' | ']' | ':' | ',' | ';' | '?' | '=' | '@' => {
                self.bump();
                match c {
                    '{' => Tok::LBrace,
                    '}' => Tok::RBrace,
                    '(' => Tok::LParen,
                    ')' => Tok::RParen,
                    '[' => Tok::LBracket,
                    ']' => Tok::RBracket,
                    ':' => Tok::Colon,
                    ',' => Tok::Comma,
                    ';' => Tok::Semicolon,
                    '?' => Tok::Question,
                    '=' => Tok::Equals,
                    _ => Tok::At,
                }
            }
            '-' if self.peek(1) == Some('>') => {
                self.bump();
                self.bump();
                Tok::Arrow
            }
            '-' if self.peek(1).is_some_and(|d| d.is_ascii_digit()) => self.number(at)?,
            '.' if self.peek(1) == Some('.') => {
                self.bump();
                self.bump();
                Tok::DotDot
            }
            '"' => self.string(at)?,
            c if c.is_ascii_digit() => self.number(at)?,
            c if c.is_alphabetic() || c == '_' => {
                let mut name = String::new();
                while let Some(c) = self.peek(0).filter(|c| c.is_alphanumeric() || *c == '_') {
                    name.push(c);
                    self.bump();
                }
                Tok::Ident(name)
            }
            other => {
                return SyntaxSnafu {
                    at,
                    expected: "a declaration, field, type or annotation",
                    found: format!("'{other}'"),
                }
                .fail()
            }
        };
        Ok(Token { tok, at })
    }

    /// Integers and decimals. `0..150` must lex as `0` `..` `150`, so a '.' only starts a
    /// fraction when a digit follows it.
    fn number(&mut self, at: Position) -> Result<Tok, SchemaError> {
        let mut text = String::new();
        if self.peek(0) == Some('-') {
            text.push('-');
            self.bump();
        }
        self.take_digits(&mut text);
        let mut is_float = false;
        if self.peek(0) == Some('.') && self.peek(1).is_some_and(|d| d.is_ascii_digit()) {
            is_float = true;
            text.push('.');
            self.bump();
            self.take_digits(&mut text);
        }
        if matches!(self.peek(0), Some('e' | 'E')) {
            let sign = usize::from(matches!(self.peek(1), Some('+' | '-')));
            if self.peek(1 + sign).is_some_and(|d| d.is_ascii_digit()) {
                is_float = true;
                for _ in 0..=sign {
                    text.extend(self.bump());
                }
                self.take_digits(&mut text);
            }
        }
        let parsed = if is_float {
            text.parse::<f64>().ok().map(Tok::Float)
        } else {
            text.parse::<i64>().ok().map(Tok::Int)
        };
        parsed.ok_or_else(|| SchemaError::Syntax {
            at,
            expected: "a number that fits in 64 bits".into(),
            found: text,
        })
    }

    fn take_digits(&mut self, text: &mut String) {
        while let Some(d) = self.peek(0).filter(char::is_ascii_digit) {
            text.push(d);
            self.bump();
        }
    }

    /// Only `\"` and `\\` are escapes; any other backslash is kept verbatim so that regex
    /// patterns such as `"\d+"` need no doubling.
    fn string(&mut self, at: Position) -> Result<Tok, SchemaError> {
        self.bump(); // opening quote
        let mut text = String::new();
        loop {
            match self.peek(0) {
                None | Some('\n') => {
                    return SyntaxSnafu {
                        at,
                        expected: "a closing '\"' before the end of the line",
                        found: format!("unterminated string \"{text}"),
                    }
                    .fail()
                }
                Some('"') => {
                    self.bump();
                    return Ok(Tok::Str(text));
                }
                Some('\\') if matches!(self.peek(1), Some('"' | '\\')) => {
                    self.bump();
                    text.extend(self.bump());
                }
                Some(c) => {
                    text.push(c);
                    self.bump();
                }
            }
        }
    }
}
