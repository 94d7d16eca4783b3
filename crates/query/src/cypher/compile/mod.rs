//! A parsed query + the catalog → one SQL `SELECT` over one table per type (a node type's
//! table is named after it, with `id` and its fields; an edge type's has `id`, `src`,
//! `dst` and its properties).
//!
//! - A relationship is its edge table joined on `src`/`dst`; an undirected one between
//!   two nodes of one type reads the table both ways (a self-loop once).
//! - A node's table is joined only when the query reads a field of it other than its key
//!   (or returns it whole, or it stands alone): an edge's `src`/`dst` *is* the key of a
//!   node that exists, because every commit holds its edges' ends. So
//!   `(a:Person {name: 'ada'})-[:Knows]->(b) RETURN count(b)` reads one edge table,
//!   filtered on `src`, which Lance answers from its `src` index.
//! - Relationships of one `MATCH` never repeat an edge (openCypher's trail semantics).
//! - A variable-length relationship `*min..max` is the union of its fixed-length chains.
//! - Cypher's implicit grouping: the items without an aggregate are the `GROUP BY`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use tributary_schema::{nearest_name, Catalog, FieldType, TypeDef, TypeKind};

use super::ast::*;

mod anchor;
mod bind;
mod expr;
mod optional;

use optional::OptionalPart;

use crate::error::{Error, Result};
use crate::params::Params;
use crate::quote::{ident, string_literal};
use expr::has_aggregate;

/// What the names the compiler makes up start with.
const GENERATED: &str = "__";

/// The longest variable-length relationship a query may ask for.
pub const MAX_HOPS: u32 = 8;

const AGGREGATES: &[&str] = &["count", "sum", "min", "max", "avg", "collect"];
const FUNCTIONS: &[&str] = &[
    "count",
    "sum",
    "min",
    "max",
    "avg",
    "collect",
    "id",
    "type",
    "toLower",
    "toUpper",
    "trim",
    "size",
    "coalesce",
    "abs",
    "round",
    "floor",
    "ceil",
    "toString",
    "toInteger",
    "toFloat",
];

/// The SQL of a query, the names of the columns it returns, and the edge tables to read
/// by key before it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Compiled {
    pub sql: String,
    pub columns: Vec<String>,
    pub expansions: Vec<Expansion>,
    /// The node and edge types the query reads (`None`: any, as SQL may): the only
    /// tables to open for it.
    pub types: Option<BTreeSet<String>>,
    /// Compiled from Cypher (its SQL is worth showing in an explanation).
    pub cypher: bool,
}

/// An edge table a query reads only where one end is among keys it already knows: the
/// anchor's (`{name: 'ada'}`), or those the previous expansion reached. Run in order
/// before the query, each is one lookup in the table's `src` or `dst` index; the query
/// then reads the rows found under `name` instead of the whole table. What it finds is
/// a superset of the rows the query can use, so the answer is the same.
#[derive(Debug, Clone, PartialEq)]
pub struct Expansion {
    /// The name the query reads the rows under.
    pub name: String,
    /// The edge table.
    pub table: String,
    /// The end matched against the keys: `src`, `dst`, or either (an undirected step).
    pub near: Vec<&'static str>,
    pub seed: Seed,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Seed {
    /// Keys written in the query.
    Keys(Vec<String>),
    /// The other ends of the rows an earlier expansion found.
    Reached {
        expansion: String,
        columns: Vec<&'static str>,
    },
}

pub fn compile(text: &str, query: &Query, catalog: &Catalog, params: &Params) -> Result<Compiled> {
    // Every MATCH first, then the OPTIONAL MATCHes.
    let split = query
        .matches
        .iter()
        .position(|m| m.optional)
        .unwrap_or(query.matches.len());
    let (required, optional) = query.matches.split_at(split);
    if let Some(late) = optional.iter().find(|m| !m.optional) {
        return Err(Error::syntax(
            text,
            late.at,
            "a `MATCH` after an `OPTIONAL MATCH` is not in the supported subset: put every `MATCH` first",
        ));
    }
    if required.is_empty() {
        return Err(Error::syntax(
            text,
            query.matches.first().map_or(0, |m| m.at),
            "a query starts with a `MATCH`: `OPTIONAL MATCH` extends what one found",
        ));
    }
    let mut compiler = Compiler::new(text, catalog, params);
    compiler.bind(required)?;
    compiler.infer()?;
    // Each clause reads only what the clauses up to it bind: the MATCHes' conditions
    // before any OPTIONAL MATCH binds, each OPTIONAL MATCH's WHERE before the next one.
    compiler.mark_joins(required, None)?;
    let mut optionals = Vec::new();
    for (k, m) in optional.iter().enumerate() {
        let part = compiler.optional(k, m)?;
        if let Some(filter) = part.filter {
            compiler.mark_expr(filter, &BTreeSet::new())?;
        }
        optionals.push(part);
    }
    compiler.mark_joins(&[], Some(&query.ret))?;
    compiler.plan_expansions(required);
    let (from, conditions) = compiler.tables_and_conditions(required)?;
    compiler.projection(&query.ret, from, conditions, &optionals)
}

#[derive(Debug)]
struct Binding<'c> {
    name: String,
    /// Where it first appears (for messages).
    at: usize,
    kind: TypeKind,
    ty: Option<&'c TypeDef>,
    /// The SQL alias of its table (or of the derived table of a variable-length step).
    alias: String,
    /// A node: whether its table is in the `FROM` (see the module's comment).
    joined: bool,
    /// A node: the SQL expression of its key, once a `FROM` item provides it.
    id: Option<String>,
    /// Bound by a variable-length relationship (a list of edges: nothing to read).
    path: bool,
    /// Bound by an `OPTIONAL MATCH`: its columns are `alias."prefix.field"`.
    prefix: Option<String>,
}

#[derive(Debug)]
struct Step<'q> {
    rel: &'q RelPattern,
    edge: String,
    left: String,
    right: String,
    /// Which clause the step is in: edges are distinct within one `MATCH`.
    clause: usize,
    /// Resolved: the edge type, and whether `left` is its `src` (else its `dst`).
    ty: Option<String>,
    left_is_src: bool,
    both_ways: bool,
}

struct Compiler<'q, 'c> {
    text: &'q str,
    catalog: &'c Catalog,
    params: &'q Params,
    vars: BTreeMap<String, Binding<'c>>,
    /// Variables in order of appearance.
    order: Vec<String>,
    steps: Vec<Step<'q>>,
    anonymous: usize,
    /// Edge variable → its expansion, in the order they run.
    expansions: Vec<(String, Expansion)>,
    /// Types read by the `OPTIONAL MATCH`es compiled into this query.
    optional_types: BTreeSet<String>,
}

impl<'q, 'c> Compiler<'q, 'c> {
    fn new(text: &'q str, catalog: &'c Catalog, params: &'q Params) -> Compiler<'q, 'c> {
        Compiler {
            text,
            catalog,
            params,
            vars: BTreeMap::new(),
            order: Vec::new(),
            steps: Vec::new(),
            anonymous: 0,
            expansions: Vec::new(),
            optional_types: BTreeSet::new(),
        }
    }

    /// The types this query reads: its variables', its relationships', its optional
    /// clauses'.
    fn read_types(&self) -> BTreeSet<String> {
        let bound = self
            .vars
            .values()
            .filter_map(|b| b.ty)
            .map(|t| t.name.clone());
        let walked = self.steps.iter().filter_map(|s| s.ty.clone());
        bound
            .chain(walked)
            .chain(self.optional_types.iter().cloned())
            .collect()
    }

    fn error<T>(&self, at: usize, message: impl AsRef<str>) -> Result<T> {
        Err(Error::syntax(self.text, at, message.as_ref()))
    }

    /// A name for an anonymous node or relationship: `__` starts only these (a user's
    /// variable may not), so none is ever a user's.
    fn fresh_name(&mut self, prefix: &str) -> String {
        self.anonymous += 1;
        format!("{GENERATED}{prefix}{}", self.anonymous)
    }

    /// The `FROM` items and the conditions of `matches`.
    fn tables_and_conditions(
        &mut self,
        matches: &'q [Match],
    ) -> Result<(Vec<String>, Vec<String>)> {
        // `FROM` items with the order they go in: DataFusion joins from the first one
        // outwards over the join conditions, and builds each hash join's table from the
        // side it has so far. So start small: edges read by key, then node tables (each
        // at most one row per node, often filtered), then whole edge tables.
        let mut from: Vec<(u8, String)> = Vec::new();
        let mut conditions: Vec<String> = Vec::new();
        // Joined nodes in order of appearance, each before the steps that reach it.
        let mut placed: BTreeSet<String> = BTreeSet::new();
        let order = self.order.clone();
        let steps = std::mem::take(&mut self.steps);
        let mut step_of_edge: BTreeMap<&str, &Step> = BTreeMap::new();
        for step in &steps {
            step_of_edge.insert(step.edge.as_str(), step);
        }
        for name in &order {
            let binding = &self.vars[name];
            if binding.kind == TypeKind::Node {
                if binding.joined && placed.insert(name.clone()) {
                    let table = binding.ty.map(|t| t.name.clone()).unwrap_or_default();
                    let source = self.source_of(name, &table);
                    let order = if source == table { 1 } else { 0 };
                    from.push((
                        order,
                        format!("{} AS {}", ident(&source), ident(&binding.alias)),
                    ));
                    let own = format!("{}.{}", ident(&binding.alias), ident("id"));
                    if let Some(existing) = &binding.id {
                        conditions.push(format!("{own} = {existing}"));
                    }
                    if let Some(b) = self.vars.get_mut(name) {
                        b.id = Some(own);
                    }
                }
                continue;
            }
            let Some(step) = step_of_edge.get(name.as_str()) else {
                continue;
            };
            let (item, left_col, right_col) = self.edge_item(step)?;
            let expanded = self.expansions.iter().any(|(edge, _)| edge == &step.edge);
            from.push((if expanded { 0 } else { 2 }, item));
            for (var, column) in [(&step.left, left_col), (&step.right, right_col)] {
                let column = format!("{}.{}", ident(&step.edge), ident(&column));
                match &self.vars[var.as_str()].id {
                    Some(id) => conditions.push(format!("{column} = {id}")),
                    None => {
                        if let Some(b) = self.vars.get_mut(var.as_str()) {
                            b.id = Some(column);
                        }
                    }
                }
            }
        }
        // Trail semantics: two fixed-length relationships of one type in one MATCH are
        // two different edges.
        for (i, a) in steps.iter().enumerate() {
            for b in &steps[i + 1..] {
                if a.clause == b.clause && a.ty == b.ty {
                    conditions.extend(distinct_edges(a, b));
                }
            }
        }
        // Inline properties.
        for m in matches {
            for pattern in &m.patterns {
                let nodes = pattern.nodes();
                for node in nodes {
                    let name = self.node_name(node)?;
                    conditions.extend(self.inline_properties(&name, &node.props)?);
                }
                for (rel, _) in &pattern.steps {
                    let Some(step) = steps.iter().find(|s| std::ptr::eq(s.rel, rel)) else {
                        continue;
                    };
                    conditions.extend(self.inline_properties(&step.edge, &rel.props)?);
                }
            }
            // An OPTIONAL MATCH's WHERE is its left join's condition (it may read the
            // variables of the clauses before it), not its derived table's.
            if let Some(filter) = m.filter.as_ref().filter(|_| !m.optional) {
                conditions.push(self.expr(filter, &BTreeMap::new())?);
            }
        }
        self.steps = steps;
        from.sort_by_key(|(order, _)| *order);
        Ok((from.into_iter().map(|(_, item)| item).collect(), conditions))
    }

    /// `{field: value, …}` of the pattern bound to `name`: one equality each.
    fn inline_properties(&self, name: &str, props: &[(Name, Expr)]) -> Result<Vec<String>> {
        let mut conditions = Vec::new();
        for (field, value) in props {
            let property = Expr::Property(
                Name {
                    name: name.to_owned(),
                    at: field.at,
                },
                field.clone(),
            );
            self.check_comparable(BinaryOp::Eq, &property, value)?;
            let column = self.column(name, &field.name);
            let value = self.expr(value, &BTreeMap::new())?;
            conditions.push(format!("{column} = {value}"));
        }
        Ok(conditions)
    }

    /// The `FROM` item of a step, and the columns that hold its left and right ends.
    fn edge_item(&self, step: &Step) -> Result<(String, String, String)> {
        let table = step.ty.clone().unwrap_or_default();
        let alias = ident(&step.edge);
        let (left_col, right_col) = if step.both_ways {
            ("_near", "_far")
        } else if step.left_is_src {
            ("src", "dst")
        } else {
            ("dst", "src")
        };
        let Some((min, Some(max))) = step.rel.hops else {
            let source = self.edge_source(step);
            let item = if step.both_ways {
                format!(
                    "({}) AS {alias}",
                    both_ways(&source, self.catalog.get(&table))
                )
            } else {
                format!("{} AS {alias}", ident(&source))
            };
            return Ok((item, left_col.to_owned(), right_col.to_owned()));
        };
        // A variable-length step: the union of its chains, from `_from` to `_to` in the
        // edges' direction (or both ways).
        let mut chains = Vec::new();
        let ty = self.catalog.get(&table);
        let base = if step.both_ways {
            format!("({})", both_ways(&table, ty))
        } else {
            ident(&table)
        };
        // Each chain also names its edges, `_h1`…`_h{max}` (null past its length), so
        // other relationships of the clause can be held to other edges.
        let hop_ids = |hops: u32| -> String {
            (1..=max)
                .map(|h| {
                    let id = if h <= hops {
                        format!("{}.{}", ident(&format!("h{h}")), ident("id"))
                    } else {
                        "CAST(NULL AS VARCHAR)".to_owned()
                    };
                    format!(", {id} AS {}", ident(&format!("_h{h}")))
                })
                .collect()
        };
        if min == 0 {
            let ends = ty.and_then(|t| t.edge.as_ref());
            if let Some(ends) = ends.filter(|e| e.from == e.to) {
                chains.push(format!(
                    "SELECT {id} AS {f}, {id} AS {t}{} FROM {}",
                    hop_ids(0),
                    ident(&ends.from),
                    id = ident("id"),
                    f = ident("_from"),
                    t = ident("_to"),
                ));
            }
        }
        // A chain follows each hop's far end to the next hop's near end: `src` to `dst`,
        // or both ways `_near` to `_far`.
        let (near, far) = if step.both_ways {
            (ident("_near"), ident("_far"))
        } else {
            (ident("src"), ident("dst"))
        };
        for hops in min.max(1)..=max {
            let hop = |h: u32| ident(&format!("h{h}"));
            let mut sql = format!(
                "SELECT {}.{near} AS {}, {}.{far} AS {}{} FROM ",
                hop(1),
                ident("_from"),
                hop(hops),
                ident("_to"),
                hop_ids(hops)
            );
            let items: Vec<String> = (1..=hops)
                .map(|h| format!("{base} AS {}", hop(h)))
                .collect();
            sql.push_str(&items.join(", "));
            let mut conds = Vec::new();
            for h in 2..=hops {
                conds.push(format!("{}.{near} = {}.{far}", hop(h), hop(h - 1)));
            }
            for a in 1..=hops {
                for b in a + 1..=hops {
                    conds.push(format!(
                        "{}.{} <> {}.{}",
                        hop(a),
                        ident("id"),
                        hop(b),
                        ident("id")
                    ));
                }
            }
            if !conds.is_empty() {
                let _ = write!(sql, " WHERE {}", conds.join(" AND "));
            }
            chains.push(sql);
        }
        if chains.is_empty() {
            return self.error(
                step.rel.at,
                format!("`{table}` joins two node types, so a path of 0 hops over it never ends where it starts: start at 1"),
            );
        }
        let item = format!("({}) AS {alias}", chains.join(" UNION ALL "));
        let (left, right) = if step.left_is_src {
            ("_from", "_to")
        } else {
            ("_to", "_from")
        };
        Ok((item, left.to_owned(), right.to_owned()))
    }

    /// `SELECT … FROM … WHERE … GROUP BY … ORDER BY … LIMIT … OFFSET …`.
    fn projection(
        &self,
        ret: &Return,
        from: Vec<String>,
        conditions: Vec<String>,
        optionals: &[OptionalPart<'q>],
    ) -> Result<Compiled> {
        let mut select = Vec::new();
        let mut columns: Vec<String> = Vec::new();
        let mut group = Vec::new();
        let aggregated = ret.items.iter().any(|item| has_aggregate(&item.expr));
        // What ORDER BY may name: an alias, or an item's expression. Columns are named
        // `__c0`, `__c1`… in the SQL (a name with a dot reads as a qualified column to
        // DataFusion) and given their own names when the rows come back.
        let mut named: BTreeMap<String, String> = BTreeMap::new();
        let mut item_column: Vec<String> = Vec::new();
        for item in &ret.items {
            let mut outputs: Vec<(String, String)> = Vec::new();
            match &item.expr {
                Expr::Var(var) if self.vars.contains_key(&var.name) => {
                    let binding = &self.vars[&var.name];
                    match binding.ty {
                        Some(ty) => {
                            let prefix = item.alias.clone().unwrap_or_else(|| var.name.clone());
                            for column in whole_columns(ty) {
                                outputs.push((
                                    self.column(&var.name, column),
                                    format!("{prefix}.{column}"),
                                ));
                            }
                        }
                        None => outputs.push((self.identity(var)?, item.text.clone())),
                    }
                }
                expr => {
                    let sql = self.expr(expr, &BTreeMap::new())?;
                    let name = item.alias.clone().unwrap_or_else(|| item.text.clone());
                    outputs.push((sql, name));
                }
            }
            item_column.push(ident(&format!("__c{}", columns.len())));
            for (sql, name) in outputs {
                if columns.contains(&name) {
                    let whole = if matches!(item.expr, Expr::Var(_)) {
                        " (a node returned whole is a column per field)"
                    } else {
                        ""
                    };
                    return Err(Error::refused(format!(
                        "two columns are named `{name}`{whole}: give one an alias (`AS`)"
                    )));
                }
                // A constant groups nothing (and DataFusion reads `GROUP BY 3` as a
                // column's position).
                let constant = matches!(item.expr, Expr::Literal(..) | Expr::Param(_));
                if aggregated && !has_aggregate(&item.expr) && !constant {
                    group.push(sql.clone());
                }
                let internal = ident(&format!("__c{}", columns.len()));
                select.push(format!("{sql} AS {internal}"));
                named.insert(name.clone(), internal);
                columns.push(name);
            }
        }
        let mut sql = String::from("SELECT ");
        if ret.distinct {
            sql.push_str("DISTINCT ");
        }
        sql.push_str(&select.join(", "));
        if optionals.is_empty() {
            let _ = write!(sql, " FROM {}", from.join(", "));
        } else {
            // Joins written out, so each LEFT JOIN comes after everything before it.
            let _ = write!(sql, " FROM {}", from.join(" CROSS JOIN "));
            for part in optionals {
                let mut on = Vec::new();
                for name in &part.shared {
                    let key = self.identity(&Name {
                        name: name.clone(),
                        at: 0,
                    })?;
                    on.push(format!(
                        "{}.{} = {key}",
                        ident(&part.alias),
                        ident(&format!("__key.{name}"))
                    ));
                }
                if let Some(filter) = part.filter {
                    on.push(self.expr(filter, &BTreeMap::new())?);
                }
                if on.is_empty() {
                    on.push("true".to_owned());
                }
                let _ = write!(
                    sql,
                    " LEFT JOIN ({}) AS {} ON {}",
                    part.sql,
                    ident(&part.alias),
                    on.join(" AND ")
                );
            }
        }
        if !conditions.is_empty() {
            let _ = write!(sql, " WHERE {}", conditions.join(" AND "));
        }
        if !group.is_empty() {
            let _ = write!(sql, " GROUP BY {}", group.join(", "));
        }
        if ret.distinct && !ret.order.is_empty() {
            // DataFusion reads an ORDER BY of a DISTINCT's alias as the expression behind
            // it, which it then wants in the select list: order the distinct rows outside.
            sql = format!("SELECT * FROM ({sql}) AS {}", ident("__distinct"));
        }
        if !ret.order.is_empty() {
            let mut keys = Vec::new();
            // Ordering by a constant orders nothing (and `ORDER BY 1` is a position).
            for (expr, descending) in ret
                .order
                .iter()
                .filter(|(e, _)| !matches!(e, Expr::Literal(..) | Expr::Param(_)))
            {
                // An item is the same expression when it compiles to the same SQL (the
                // texts differ at least in where they are).
                let wanted = self.expr(expr, &BTreeMap::new()).ok();
                let by_item = ret
                    .items
                    .iter()
                    .position(|item| {
                        !matches!(item.expr, Expr::Var(_))
                            && wanted.is_some()
                            && self.expr(&item.expr, &BTreeMap::new()).ok() == wanted
                    })
                    .map(|i| item_column[i].clone());
                let by_alias = match expr {
                    Expr::Var(var) => named.get(&var.name).cloned(),
                    _ => None,
                };
                let key = match by_item.or(by_alias) {
                    Some(key) => key,
                    None if ret.distinct => {
                        return self.error(
                            expr.at(),
                            "with `RETURN DISTINCT`, `ORDER BY` takes what is returned (an item or its alias)",
                        )
                    }
                    None if aggregated && !has_aggregate(expr) => {
                        return self.error(
                            expr.at(),
                            "with an aggregate in `RETURN`, `ORDER BY` takes what is returned (an item or its alias) or an aggregate",
                        )
                    }
                    None => self.expr(expr, &named)?,
                };
                keys.push(format!(
                    "{key}{}",
                    if *descending { " DESC" } else { " ASC" }
                ));
            }
            let _ = write!(sql, " ORDER BY {}", keys.join(", "));
        }
        if let Some(limit) = &ret.limit {
            let _ = write!(sql, " LIMIT {}", self.count(limit, "LIMIT")?);
        }
        if let Some(skip) = &ret.skip {
            let _ = write!(sql, " OFFSET {}", self.count(skip, "SKIP")?);
        }
        Ok(Compiled {
            sql,
            columns,
            expansions: self.expansions.iter().map(|(_, e)| e.clone()).collect(),
            types: Some(self.read_types()),
            cypher: true,
        })
    }

    /// A `SKIP` or `LIMIT`: a whole number, written or a parameter.
    fn count(&self, expr: &Expr, clause: &str) -> Result<u64> {
        let value = match expr {
            Expr::Literal(Literal::Int(n), _) => Some(*n),
            Expr::Param(name) => match self.params.get(&name.name) {
                Some(value) => value.as_i64(),
                None => return Err(self.missing_param(name)),
            },
            _ => None,
        };
        match value.and_then(|n| u64::try_from(n).ok()) {
            Some(n) => Ok(n),
            None => self.error(
                expr.at(),
                format!("`{clause}` takes a whole number of rows"),
            ),
        }
    }
}

/// An edge table read both ways: every edge as it is, and reversed (a self-loop once).
/// `src`, `dst` and the properties stay as stored; `_near` and `_far` are the ends in the
/// way it is read.
fn both_ways(table: &str, ty: Option<&TypeDef>) -> String {
    let props: Vec<String> = ty
        .map(|t| t.fields.iter().map(|f| ident(&f.name)).collect())
        .unwrap_or_default();
    let rest = if props.is_empty() {
        String::new()
    } else {
        format!(", {}", props.join(", "))
    };
    let (id, src, dst) = (ident("id"), ident("src"), ident("dst"));
    let (near, far) = (ident("_near"), ident("_far"));
    let t = ident(table);
    format!(
        "SELECT {id}, {src}, {dst}{rest}, {src} AS {near}, {dst} AS {far} FROM {t} UNION ALL SELECT {id}, {src}, {dst}{rest}, {dst} AS {near}, {src} AS {far} FROM {t} WHERE {src} <> {dst}"
    )
}

/// The columns a variable returned whole shows: a node's fields, an edge's ends and
/// properties.
fn whole_columns(ty: &TypeDef) -> Vec<&str> {
    let system: &[&str] = match ty.kind {
        TypeKind::Node => &[],
        TypeKind::Edge => &["src", "dst"],
    };
    system
        .iter()
        .copied()
        .chain(ty.fields.iter().map(|f| f.name.as_str()))
        .collect()
}

fn column_names(ty: &TypeDef) -> Vec<&str> {
    let system: &[&str] = match ty.kind {
        TypeKind::Node => &["id"],
        TypeKind::Edge => &["id", "src", "dst"],
    };
    system
        .iter()
        .copied()
        .chain(ty.fields.iter().map(|f| f.name.as_str()))
        .collect()
}

/// `id`, or a node's `@key` field when it is a string (stored as the `id` itself).
fn is_key_field(ty: Option<&TypeDef>, field: &str) -> bool {
    let Some(ty) = ty else { return false };
    if ty.kind != TypeKind::Node {
        return false;
    }
    field == "id"
        || ty
            .field(field)
            .is_some_and(|f| f.key && f.ty == FieldType::String)
}

/// The conditions that keep two relationships of one clause on different edges: their
/// ids, or for a variable-length one each of its hops' (`_h1`…, null past its length).
fn distinct_edges(a: &Step, b: &Step) -> Vec<String> {
    let ids = |step: &Step| -> Vec<String> {
        match step.rel.hops {
            None => vec![format!("{}.{}", ident(&step.edge), ident("id"))],
            Some((_, max)) => (1..=max.unwrap_or(0))
                .map(|h| format!("{}.{}", ident(&step.edge), ident(&format!("_h{h}"))))
                .collect(),
        }
    };
    let both_fixed = a.rel.hops.is_none() && b.rel.hops.is_none();
    let mut conditions = Vec::new();
    for x in ids(a) {
        for y in ids(b) {
            conditions.push(if both_fixed {
                format!("{x} <> {y}")
            } else {
                format!("coalesce({x} <> {y}, true)")
            });
        }
    }
    conditions
}
