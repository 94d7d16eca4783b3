//! The read-only openCypher subset, as parsed. Every node keeps the byte offset it starts
//! at, so the compiler's errors name the line and column.

#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub matches: Vec<Match>,
    pub ret: Return,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Match {
    pub optional: bool,
    pub patterns: Vec<Pattern>,
    pub filter: Option<Expr>,
    pub at: usize,
}

/// `(a)-[r]->(b)<-[s]-(c)`: a start node and the steps after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    pub start: NodePattern,
    pub steps: Vec<(RelPattern, NodePattern)>,
}

impl Pattern {
    /// Its node patterns, in order.
    pub fn nodes(&self) -> impl Iterator<Item = &NodePattern> {
        std::iter::once(&self.start).chain(self.steps.iter().map(|(_, node)| node))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Name {
    pub name: String,
    pub at: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodePattern {
    pub var: Option<Name>,
    pub label: Option<Name>,
    pub props: Vec<(Name, Expr)>,
    pub at: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `-[]->`
    Right,
    /// `<-[]-`
    Left,
    /// `-[]-`
    Both,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RelPattern {
    pub var: Option<Name>,
    /// `[:A|B]`: any of these edge types; empty for any type the ends allow.
    pub types: Vec<Name>,
    pub direction: Direction,
    /// `*min..max` of a variable-length relationship (`None` max: unbounded, refused).
    pub hops: Option<(u32, Option<u32>)>,
    pub props: Vec<(Name, Expr)>,
    pub at: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Return {
    pub distinct: bool,
    pub items: Vec<ReturnItem>,
    pub order: Vec<(Expr, bool)>,
    pub skip: Option<Expr>,
    pub limit: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReturnItem {
    pub expr: Expr,
    pub alias: Option<String>,
    /// The item as written: its column's name when it has no alias.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Or,
    Xor,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    StartsWith,
    EndsWith,
    Contains,
    In,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Literal(Literal, usize),
    Param(Name),
    Var(Name),
    Property(Name, Name),
    List(Vec<Expr>, usize),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// `NOT e`, with where `NOT` is.
    Not(Box<Expr>, usize),
    /// `-e`, with where `-` is.
    Negate(Box<Expr>, usize),
    IsNull {
        expr: Box<Expr>,
        negated: bool,
    },
    Call {
        name: Name,
        distinct: bool,
        /// `count(*)`.
        star: bool,
        args: Vec<Expr>,
    },
}

impl Expr {
    /// Where the expression starts in the text.
    pub fn at(&self) -> usize {
        match self {
            Expr::Literal(_, at) | Expr::List(_, at) => *at,
            Expr::Param(name) | Expr::Var(name) | Expr::Property(name, _) => name.at,
            Expr::Binary(_, left, _) => left.at(),
            Expr::Not(_, at) | Expr::Negate(_, at) => *at,
            Expr::IsNull { expr, .. } => expr.at(),
            Expr::Call { name, .. } => name.at,
        }
    }
}
