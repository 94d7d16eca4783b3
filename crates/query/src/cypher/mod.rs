//! The read-only openCypher subset: text → tokens → [`ast::Query`] → one SQL `SELECT`.

pub mod ast;
pub mod compile;
mod lexer;
pub mod parser;
