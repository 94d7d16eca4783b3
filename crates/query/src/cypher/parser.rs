//! Tokens → [`Query`], by recursive descent. Anything outside the subset is refused by
//! name at its place, never skipped.

use super::ast::*;
use super::lexer::{tokenize, Tok, Token};
use crate::error::{Error, Result};

/// Clauses of openCypher this subset refuses, and why.
const WRITE_CLAUSES: &[&str] = &["CREATE", "MERGE", "SET", "DELETE", "DETACH", "REMOVE"];
const OTHER_CLAUSES: &[&str] = &[
    "WITH", "UNWIND", "UNION", "CALL", "FOREACH", "LOAD", "USE", "YIELD",
];

pub fn parse(text: &str) -> Result<Query> {
    let tokens = tokenize(text)?;
    let mut parser = Parser {
        text,
        tokens,
        next: 0,
        depth: 0,
        operators: 0,
    };
    parser.query()
}

struct Parser<'t> {
    text: &'t str,
    tokens: Vec<Token>,
    next: usize,
    /// How deep expressions nest here, and how many binary operators the query has:
    /// both bounded, so a hostile query cannot exhaust the stack of whoever compiles it.
    depth: usize,
    operators: usize,
}

/// The deepest expressions nest (parentheses, lists, arguments, NOT, unary minus).
const MAX_DEPTH: usize = 24;
/// The most binary operators (AND, OR, comparisons, arithmetic) one query holds.
const MAX_OPERATORS: usize = 96;

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        &self.tokens[self.next].tok
    }

    fn peek_at(&self, ahead: usize) -> &Tok {
        let last = self.tokens.len() - 1;
        &self.tokens[(self.next + ahead).min(last)].tok
    }

    fn at(&self) -> usize {
        self.tokens[self.next].at
    }

    /// Where the last consumed token ended.
    fn prev_end(&self) -> usize {
        self.next
            .checked_sub(1)
            .map_or(0, |prev| self.tokens[prev].end)
    }

    fn bump(&mut self) -> Token {
        let token = self.tokens[self.next].clone();
        if self.next < self.tokens.len() - 1 {
            self.next += 1;
        }
        token
    }

    fn error<T>(&self, at: usize, message: impl AsRef<str>) -> Result<T> {
        Err(Error::syntax(self.text, at, message.as_ref()))
    }

    /// What the next token is, for "expected X, found Y".
    fn found(&self) -> String {
        let token = &self.tokens[self.next];
        match token.tok {
            Tok::Eof => "the end of the query".to_owned(),
            _ => format!("`{}`", &self.text[token.at..token.end]),
        }
    }

    fn expected<T>(&self, what: &str) -> Result<T> {
        self.error(
            self.at(),
            format!("expected {what}, found {}", self.found()),
        )
    }

    fn is_keyword(&self, keyword: &str) -> bool {
        matches!(self.peek(), Tok::Ident(word) if word.eq_ignore_ascii_case(keyword))
    }

    fn is_keyword_ahead(&self, ahead: usize, keyword: &str) -> bool {
        matches!(self.peek_at(ahead), Tok::Ident(word) if word.eq_ignore_ascii_case(keyword))
    }

    fn eat_keyword(&mut self, keyword: &str) -> bool {
        if self.is_keyword(keyword) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect_keyword(&mut self, keyword: &str) -> Result<()> {
        if self.eat_keyword(keyword) {
            Ok(())
        } else {
            self.expected(&format!("`{keyword}`"))
        }
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek() == tok {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, tok: &Tok, shown: &str) -> Result<()> {
        if self.eat(tok) {
            Ok(())
        } else {
            self.expected(&format!("`{shown}`"))
        }
    }

    fn name(&mut self, what: &str) -> Result<Name> {
        let at = self.at();
        match self.peek().clone() {
            Tok::Ident(name) | Tok::Quoted(name) => {
                self.bump();
                Ok(Name { name, at })
            }
            _ => self.expected(what),
        }
    }

    /// Refuse a clause keyword outside the subset, by name.
    fn refuse_clause(&self) -> Result<()> {
        let Tok::Ident(word) = self.peek() else {
            return Ok(());
        };
        let upper = word.to_ascii_uppercase();
        if WRITE_CLAUSES.contains(&upper.as_str()) {
            return self.error(
                self.at(),
                format!(
                    "`{upper}` writes, and queries are read-only: write with `tributary load` or `tributary ingest`"
                ),
            );
        }
        if OTHER_CLAUSES.contains(&upper.as_str()) {
            return self.error(
                self.at(),
                format!(
                    "`{upper}` is not in the supported Cypher subset (MATCH, OPTIONAL MATCH, WHERE, RETURN, ORDER BY, SKIP, LIMIT)"
                ),
            );
        }
        Ok(())
    }

    fn query(&mut self) -> Result<Query> {
        let mut matches = Vec::new();
        loop {
            self.refuse_clause()?;
            let at = self.at();
            let optional = if self.is_keyword("OPTIONAL") && self.is_keyword_ahead(1, "MATCH") {
                self.bump();
                true
            } else {
                false
            };
            if !self.eat_keyword("MATCH") {
                break;
            }
            let mut patterns = vec![self.pattern()?];
            while self.eat(&Tok::Comma) {
                patterns.push(self.pattern()?);
            }
            let filter = if self.eat_keyword("WHERE") {
                Some(self.expr()?)
            } else {
                None
            };
            matches.push(Match {
                optional,
                patterns,
                filter,
                at,
            });
        }
        if matches.is_empty() {
            return self.expected("`MATCH`");
        }
        if !self.eat_keyword("RETURN") {
            return self.expected("`MATCH`, `OPTIONAL MATCH`, `WHERE` or `RETURN`");
        }
        let ret = self.return_clause()?;
        self.eat(&Tok::Semicolon);
        if self.peek() != &Tok::Eof {
            self.refuse_clause()?;
            return self.expected("the end of the query");
        }
        Ok(Query { matches, ret })
    }

    fn pattern(&mut self) -> Result<Pattern> {
        if matches!(self.peek(), Tok::Ident(_)) && self.peek_at(1) == &Tok::Eq {
            return self.error(
                self.at(),
                "a path variable (`p = (...)`) is not in the supported Cypher subset: name the nodes and relationships instead",
            );
        }
        let start = self.node()?;
        let mut steps = Vec::new();
        while matches!(self.peek(), Tok::Dash | Tok::ArrowLeft) {
            let rel = self.relationship()?;
            let node = self.node()?;
            steps.push((rel, node));
        }
        Ok(Pattern { start, steps })
    }

    fn node(&mut self) -> Result<NodePattern> {
        let at = self.at();
        self.expect(&Tok::LParen, "(")?;
        let var = match self.peek() {
            Tok::Ident(_) | Tok::Quoted(_) => Some(self.name("a variable")?),
            _ => None,
        };
        let label = if self.eat(&Tok::Colon) {
            Some(self.name("a node type after `:`")?)
        } else {
            None
        };
        if self.peek() == &Tok::Colon {
            return self.error(
                self.at(),
                "a node has one type here: several labels (`:A:B`) are not in the supported subset",
            );
        }
        let props = self.properties()?;
        self.expect(&Tok::RParen, ")")?;
        Ok(NodePattern {
            var,
            label,
            props,
            at,
        })
    }

    fn properties(&mut self) -> Result<Vec<(Name, Expr)>> {
        let mut props = Vec::new();
        if !self.eat(&Tok::LBrace) {
            return Ok(props);
        }
        if self.eat(&Tok::RBrace) {
            return Ok(props);
        }
        loop {
            let key = self.name("a property name")?;
            self.expect(&Tok::Colon, ":")?;
            props.push((key, self.expr()?));
            if self.eat(&Tok::RBrace) {
                return Ok(props);
            }
            self.expect(&Tok::Comma, ", or }")?;
        }
    }

    fn relationship(&mut self) -> Result<RelPattern> {
        let at = self.at();
        let left = self.eat(&Tok::ArrowLeft);
        if !left {
            self.expect(&Tok::Dash, "-")?;
        }
        let mut rel = RelPattern {
            var: None,
            types: Vec::new(),
            direction: Direction::Both,
            hops: None,
            props: Vec::new(),
            at,
        };
        if self.eat(&Tok::LBracket) {
            if matches!(self.peek(), Tok::Ident(_) | Tok::Quoted(_)) {
                rel.var = Some(self.name("a variable")?);
            }
            if self.eat(&Tok::Colon) {
                rel.types.push(self.name("an edge type after `:`")?);
                while self.eat(&Tok::Pipe) {
                    self.eat(&Tok::Colon);
                    rel.types.push(self.name("an edge type after `|`")?);
                }
            }
            if self.peek() == &Tok::Star {
                rel.hops = Some(self.hops()?);
            }
            rel.props = self.properties()?;
            self.expect(&Tok::RBracket, "]")?;
        }
        let right = if self.eat(&Tok::ArrowRight) {
            true
        } else {
            self.expect(&Tok::Dash, "-` or `->")?;
            false
        };
        rel.direction = match (left, right) {
            (false, true) => Direction::Right,
            (true, false) => Direction::Left,
            _ => Direction::Both,
        };
        Ok(rel)
    }

    /// `*`, `*n`, `*min..max`, `*..max`, `*min..`.
    fn hops(&mut self) -> Result<(u32, Option<u32>)> {
        self.bump();
        let min = self.hop_count()?;
        if self.eat(&Tok::DotDot) {
            let max = self.hop_count()?;
            return Ok((min.unwrap_or(1), max));
        }
        match min {
            Some(exact) => Ok((exact, Some(exact))),
            None => Ok((1, None)),
        }
    }

    fn hop_count(&mut self) -> Result<Option<u32>> {
        let at = self.at();
        match *self.peek() {
            Tok::Int(n) => {
                self.bump();
                match u32::try_from(n) {
                    Ok(n) => Ok(Some(n)),
                    Err(_) => self.error(at, format!("`{n}` hops is not a count of hops")),
                }
            }
            _ => Ok(None),
        }
    }

    fn return_clause(&mut self) -> Result<Return> {
        let distinct = self.eat_keyword("DISTINCT");
        if self.peek() == &Tok::Star {
            return self.error(
                self.at(),
                "`RETURN *` is not in the supported subset: name the variables or properties to return",
            );
        }
        let mut items = vec![self.return_item()?];
        while self.eat(&Tok::Comma) {
            items.push(self.return_item()?);
        }
        let mut order = Vec::new();
        if self.eat_keyword("ORDER") {
            self.expect_keyword("BY")?;
            loop {
                let expr = self.expr()?;
                let descending = if self.eat_keyword("DESC") || self.eat_keyword("DESCENDING") {
                    true
                } else {
                    let _ = self.eat_keyword("ASC") || self.eat_keyword("ASCENDING");
                    false
                };
                order.push((expr, descending));
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
        }
        let skip = if self.eat_keyword("SKIP") || self.eat_keyword("OFFSET") {
            Some(self.expr()?)
        } else {
            None
        };
        let limit = if self.eat_keyword("LIMIT") {
            Some(self.expr()?)
        } else {
            None
        };
        Ok(Return {
            distinct,
            items,
            order,
            skip,
            limit,
        })
    }

    fn return_item(&mut self) -> Result<ReturnItem> {
        let start = self.at();
        let expr = self.expr()?;
        let text = self.text[start..self.prev_end()].to_owned();
        let alias = if self.eat_keyword("AS") {
            Some(self.name("a name after `AS`")?.name)
        } else {
            None
        };
        Ok(ReturnItem { expr, alias, text })
    }

    fn expr(&mut self) -> Result<Expr> {
        self.deeper()?;
        let expr = self.binary_level(0);
        self.depth -= 1;
        expr
    }

    fn deeper(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.error(
                self.at(),
                format!("the query nests expressions deeper than {MAX_DEPTH} levels"),
            );
        }
        Ok(())
    }

    /// One more binary operator.
    fn operator(&mut self, at: usize) -> Result<()> {
        self.operators += 1;
        if self.operators > MAX_OPERATORS {
            return self.error(
                at,
                format!("the query has more than {MAX_OPERATORS} operators: split it, or use IN [...] for a list of values"),
            );
        }
        Ok(())
    }

    /// Binary operators by precedence, loosest first.
    fn binary_level(&mut self, level: usize) -> Result<Expr> {
        const LEVELS: [&[(&str, BinaryOp)]; 3] = [
            &[("OR", BinaryOp::Or)],
            &[("XOR", BinaryOp::Xor)],
            &[("AND", BinaryOp::And)],
        ];
        if level == LEVELS.len() {
            return self.not_expr();
        }
        let mut left = self.binary_level(level + 1)?;
        'outer: loop {
            for (word, op) in LEVELS[level] {
                if self.eat_keyword(word) {
                    self.operator(self.at())?;
                    let right = self.binary_level(level + 1)?;
                    left = Expr::Binary(*op, Box::new(left), Box::new(right));
                    continue 'outer;
                }
            }
            return Ok(left);
        }
    }

    fn not_expr(&mut self) -> Result<Expr> {
        let at = self.at();
        if self.eat_keyword("NOT") {
            self.deeper()?;
            let inner = self.not_expr();
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner?), at));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Expr> {
        let mut left = self.additive()?;
        // `a < b <= c` is `a < b AND b <= c`: the last comparison's right side.
        let mut chained: Option<Expr> = None;
        loop {
            let op = match self.peek() {
                Tok::Eq => Some(BinaryOp::Eq),
                Tok::Ne => Some(BinaryOp::Ne),
                Tok::Lt => Some(BinaryOp::Lt),
                Tok::Le => Some(BinaryOp::Le),
                Tok::Gt => Some(BinaryOp::Gt),
                Tok::Ge => Some(BinaryOp::Ge),
                Tok::RegexMatch => {
                    return self.error(
                        self.at(),
                        "`=~` (regular expressions) is not in the supported subset: use STARTS WITH, ENDS WITH or CONTAINS",
                    )
                }
                _ => None,
            };
            if let Some(op) = op {
                self.bump();
                self.operator(self.at())?;
                let right = self.additive()?;
                left = match chained.take() {
                    Some(middle) => Expr::Binary(
                        BinaryOp::And,
                        Box::new(left),
                        Box::new(Expr::Binary(op, Box::new(middle), Box::new(right.clone()))),
                    ),
                    None => Expr::Binary(op, Box::new(left), Box::new(right.clone())),
                };
                chained = Some(right);
                continue;
            }
            chained = None;
            if self.is_keyword("IS") {
                self.bump();
                let negated = self.eat_keyword("NOT");
                self.expect_keyword("NULL")?;
                left = Expr::IsNull {
                    expr: Box::new(left),
                    negated,
                };
                continue;
            }
            let op = if self.is_keyword("IN") {
                self.bump();
                BinaryOp::In
            } else if self.is_keyword("CONTAINS") {
                self.bump();
                BinaryOp::Contains
            } else if self.is_keyword("STARTS") && self.is_keyword_ahead(1, "WITH") {
                self.bump();
                self.bump();
                BinaryOp::StartsWith
            } else if self.is_keyword("ENDS") && self.is_keyword_ahead(1, "WITH") {
                self.bump();
                self.bump();
                BinaryOp::EndsWith
            } else {
                return Ok(left);
            };
            self.operator(self.at())?;
            let right = self.additive()?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
    }

    fn additive(&mut self) -> Result<Expr> {
        let mut left = self.multiplicative()?;
        loop {
            let op = match self.peek() {
                Tok::Plus => BinaryOp::Add,
                Tok::Dash => BinaryOp::Sub,
                _ => return Ok(left),
            };
            self.bump();
            self.operator(self.at())?;
            let right = self.multiplicative()?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
    }

    fn multiplicative(&mut self) -> Result<Expr> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek() {
                Tok::Star => BinaryOp::Mul,
                Tok::Slash => BinaryOp::Div,
                Tok::Percent => BinaryOp::Mod,
                Tok::Caret => {
                    return self.error(self.at(), "`^` (power) is not in the supported subset")
                }
                _ => return Ok(left),
            };
            self.bump();
            self.operator(self.at())?;
            let right = self.unary()?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
    }

    fn unary(&mut self) -> Result<Expr> {
        let at = self.at();
        if self.eat(&Tok::Dash) {
            self.deeper()?;
            let inner = self.unary();
            self.depth -= 1;
            return Ok(Expr::Negate(Box::new(inner?), at));
        }
        if self.eat(&Tok::Plus) {
            return self.unary();
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr> {
        let at = self.at();
        let expr = match self.peek().clone() {
            Tok::Int(n) => {
                self.bump();
                Expr::Literal(Literal::Int(n), at)
            }
            Tok::Float(f) => {
                self.bump();
                Expr::Literal(Literal::Float(f), at)
            }
            Tok::Str(s) => {
                self.bump();
                Expr::Literal(Literal::Str(s), at)
            }
            Tok::Param(name) => {
                self.bump();
                Expr::Param(Name { name, at })
            }
            Tok::LParen => {
                self.bump();
                let inner = self.expr()?;
                if self.peek() != &Tok::RParen {
                    return self.expected("`)`");
                }
                self.bump();
                inner
            }
            Tok::LBracket => {
                self.bump();
                let mut items = Vec::new();
                if !self.eat(&Tok::RBracket) {
                    loop {
                        items.push(self.expr()?);
                        if self.eat(&Tok::RBracket) {
                            break;
                        }
                        self.expect(&Tok::Comma, ", or ]")?;
                    }
                }
                Expr::List(items, at)
            }
            Tok::LBrace => {
                return self.error(at, "map literals are not in the supported subset");
            }
            Tok::Quoted(name) => {
                self.bump();
                Expr::Var(Name { name, at })
            }
            Tok::Ident(word) => {
                let upper = word.to_ascii_uppercase();
                match upper.as_str() {
                    "TRUE" | "FALSE" => {
                        self.bump();
                        Expr::Literal(Literal::Bool(upper == "TRUE"), at)
                    }
                    "NULL" => {
                        self.bump();
                        Expr::Literal(Literal::Null, at)
                    }
                    "CASE" | "EXISTS" | "ALL" | "ANY" | "NONE" | "SINGLE" | "REDUCE" => {
                        return self.error(
                            at,
                            format!("`{upper}` expressions are not in the supported subset"),
                        );
                    }
                    _ => {
                        self.bump();
                        let name = Name { name: word, at };
                        if self.peek() == &Tok::LParen {
                            self.call(name)?
                        } else {
                            Expr::Var(name)
                        }
                    }
                }
            }
            _ => return self.expected("an expression"),
        };
        self.property_access(expr)
    }

    fn call(&mut self, name: Name) -> Result<Expr> {
        self.bump();
        let distinct = self.eat_keyword("DISTINCT");
        if self.eat(&Tok::Star) {
            self.expect(&Tok::RParen, ")")?;
            return Ok(Expr::Call {
                name,
                distinct,
                star: true,
                args: Vec::new(),
            });
        }
        let mut args = Vec::new();
        if !self.eat(&Tok::RParen) {
            loop {
                args.push(self.expr()?);
                if self.eat(&Tok::RParen) {
                    break;
                }
                self.expect(&Tok::Comma, ", or )")?;
            }
        }
        Ok(Expr::Call {
            name,
            distinct,
            star: false,
            args,
        })
    }

    fn property_access(&mut self, expr: Expr) -> Result<Expr> {
        if self.peek() != &Tok::Dot {
            return Ok(expr);
        }
        let Expr::Var(var) = expr else {
            return self.error(
                self.at(),
                "a property can be read only from a variable here (`n.name`)",
            );
        };
        self.bump();
        let property = self.name("a property name after `.`")?;
        if self.peek() == &Tok::Dot {
            return self.error(
                self.at(),
                "nested properties (`a.b.c`) are not in the supported subset",
            );
        }
        if self.peek() == &Tok::LBracket {
            return self.error(
                self.at(),
                "indexing (`x[i]`) is not in the supported subset",
            );
        }
        Ok(Expr::Property(var, property))
    }
}
