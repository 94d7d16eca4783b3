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
use crate::error::{Error, Result};
use crate::params::Params;
use crate::sql::{ident, string_literal};

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
    if let Some(optional) = query.matches.iter().find(|m| m.optional) {
        return Err(Error::syntax(
            text,
            optional.at,
            "`OPTIONAL MATCH` is not in the supported subset yet: run the optional part as a query of its own",
        ));
    }
    let mut compiler = Compiler {
        text,
        catalog,
        params,
        vars: BTreeMap::new(),
        order: Vec::new(),
        steps: Vec::new(),
        anonymous: 0,
        expansions: Vec::new(),
    };
    compiler.bind(query)?;
    compiler.infer()?;
    compiler.mark_joins(query)?;
    compiler.plan_expansions(query);
    compiler.select(query)
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
}

impl<'q, 'c> Compiler<'q, 'c> {
    fn error<T>(&self, at: usize, message: impl AsRef<str>) -> Result<T> {
        Err(Error::syntax(self.text, at, message.as_ref()))
    }

    fn fresh_name(&mut self, prefix: &str) -> String {
        self.anonymous += 1;
        format!("_{prefix}{}", self.anonymous)
    }

    /// Every variable and relationship of every `MATCH`, with the types named in them.
    fn bind(&mut self, query: &'q Query) -> Result<()> {
        for (clause, m) in query.matches.iter().enumerate() {
            for pattern in &m.patterns {
                let mut left = self.bind_node(&pattern.start)?;
                for (rel, node) in &pattern.steps {
                    let edge = self.bind_rel(rel)?;
                    let right = self.bind_node(node)?;
                    self.steps.push(Step {
                        rel,
                        edge,
                        left,
                        right: right.clone(),
                        clause,
                        ty: None,
                        left_is_src: true,
                        both_ways: false,
                    });
                    left = right;
                }
            }
        }
        Ok(())
    }

    fn bind_node(&mut self, node: &NodePattern) -> Result<String> {
        let ty = match &node.label {
            Some(label) => Some(self.type_named(label, TypeKind::Node)?),
            None => None,
        };
        let name = match &node.var {
            Some(var) => var.name.clone(),
            None => self.fresh_name("n"),
        };
        let at = node.var.as_ref().map_or(node.at, |v| v.at);
        if let Some(existing) = self.vars.get_mut(&name) {
            if existing.kind != TypeKind::Node {
                return Err(Error::syntax(
                    self.text,
                    at,
                    &format!("`{name}` is a relationship, so it cannot be a node here"),
                ));
            }
            match (existing.ty, ty) {
                (Some(a), Some(b)) if a.name != b.name => {
                    return Err(Error::syntax(
                        self.text,
                        at,
                        &format!(
                            "`{name}` is a {} and a {}: a node has one type",
                            a.name, b.name
                        ),
                    ))
                }
                (None, Some(b)) => existing.ty = Some(b),
                _ => {}
            }
            return Ok(name);
        }
        let alias = name.clone();
        self.vars.insert(
            name.clone(),
            Binding {
                name: name.clone(),
                at,
                kind: TypeKind::Node,
                ty,
                alias,
                joined: false,
                id: None,
                path: false,
            },
        );
        self.order.push(name.clone());
        Ok(name)
    }

    fn bind_rel(&mut self, rel: &RelPattern) -> Result<String> {
        if let Some((_, max)) = rel.hops {
            match max {
                None => {
                    return self.error(
                        rel.at,
                        format!(
                            "a variable-length relationship needs an upper bound: write `*1..3` (at most {MAX_HOPS} hops)"
                        ),
                    )
                }
                Some(max) if max > MAX_HOPS => {
                    return self.error(
                        rel.at,
                        format!("{max} hops is more than the {MAX_HOPS} a query may follow"),
                    )
                }
                _ => {}
            }
        }
        if rel.types.len() > 1 {
            return self.error(
                rel.types[1].at,
                "several edge types (`:A|B`) are not in the supported subset: match each in a query of its own",
            );
        }
        let ty = match rel.types.first() {
            Some(name) => Some(self.type_named(name, TypeKind::Edge)?),
            None => None,
        };
        let name = match &rel.var {
            Some(var) => {
                if self.vars.contains_key(&var.name) {
                    return self.error(
                        var.at,
                        format!(
                            "`{}` is bound already: a relationship variable names one relationship",
                            var.name
                        ),
                    );
                }
                var.name.clone()
            }
            None => self.fresh_name("e"),
        };
        self.vars.insert(
            name.clone(),
            Binding {
                name: name.clone(),
                at: rel.var.as_ref().map_or(rel.at, |v| v.at),
                kind: TypeKind::Edge,
                ty,
                alias: name.clone(),
                joined: true,
                id: None,
                path: rel.hops.is_some(),
            },
        );
        self.order.push(name.clone());
        Ok(name)
    }

    /// The type named `name`, of `kind`; otherwise an error with the nearest name.
    fn type_named(&self, name: &Name, kind: TypeKind) -> Result<&'c TypeDef> {
        let what = match kind {
            TypeKind::Node => "node type",
            TypeKind::Edge => "edge type",
        };
        match self.catalog.get(&name.name) {
            Some(ty) if ty.kind == kind => Ok(ty),
            Some(_) => self.error(
                name.at,
                match kind {
                    TypeKind::Node => format!(
                        "`{}` is an edge type: a node takes a node type (`(n:Person)`), a relationship an edge type (`-[:{}]->`)",
                        name.name, name.name
                    ),
                    TypeKind::Edge => format!(
                        "`{}` is a node type: a relationship takes an edge type (`-[:Knows]->`)",
                        name.name
                    ),
                },
            ),
            None => {
                let names: Vec<&str> = self
                    .catalog
                    .types
                    .iter()
                    .filter(|t| t.kind == kind)
                    .map(|t| t.name.as_str())
                    .collect();
                let hint = nearest_name(&name.name, names.iter().copied())
                    .map(|n| format!(" (did you mean `{n}`?)"))
                    .unwrap_or_default();
                self.error(
                    name.at,
                    format!(
                        "unknown {what} `{}`{hint}; {what}s: {}",
                        name.name,
                        names.join(", ")
                    ),
                )
            }
        }
    }

    fn node_type(&self, var: &str) -> Option<&'c TypeDef> {
        self.vars.get(var).and_then(|b| b.ty)
    }

    /// Edge types of relationships that name none, from their ends' types; node types
    /// from the edges they meet; until nothing changes.
    fn infer(&mut self) -> Result<()> {
        loop {
            let mut changed = false;
            for i in 0..self.steps.len() {
                changed |= self.infer_step(i)?;
            }
            if !changed {
                break;
            }
        }
        for name in &self.order {
            let binding = &self.vars[name];
            if binding.kind == TypeKind::Node && binding.ty.is_none() {
                let shown = if name.starts_with('_') {
                    "this node".to_owned()
                } else {
                    format!("the node `{name}`")
                };
                return self.error(
                    binding.at,
                    format!("{shown} needs a type: write it as `(x:Person)` or reach it over a typed relationship"),
                );
            }
        }
        Ok(())
    }

    fn infer_step(&mut self, i: usize) -> Result<bool> {
        let (rel, left, right, edge) = {
            let step = &self.steps[i];
            (
                step.rel,
                step.left.clone(),
                step.right.clone(),
                step.edge.clone(),
            )
        };
        let left_ty = self.node_type(&left).map(|t| t.name.clone());
        let right_ty = self.node_type(&right).map(|t| t.name.clone());
        let mut changed = false;
        let edge_ty = match self.vars[&edge].ty {
            Some(ty) => ty,
            None => {
                let candidates: Vec<&'c TypeDef> = self
                    .catalog
                    .types
                    .iter()
                    .filter(|t| t.kind == TypeKind::Edge)
                    .filter(|t| fits(t, rel.direction, left_ty.as_deref(), right_ty.as_deref()))
                    .collect();
                match candidates.as_slice() {
                    [one] => {
                        if let Some(b) = self.vars.get_mut(&edge) {
                            b.ty = Some(one);
                        }
                        changed = true;
                        *one
                    }
                    [] => {
                        return self.error(
                            rel.at,
                            format!(
                                "no edge type goes {}",
                                between(rel.direction, left_ty.as_deref(), right_ty.as_deref())
                            ),
                        )
                    }
                    several if left_ty.is_some() && right_ty.is_some() => {
                        let names: Vec<String> =
                            several.iter().map(|t| format!("`{}`", t.name)).collect();
                        return self.error(
                            rel.at,
                            format!(
                                "this relationship could be any of {}: name one (`-[:{}]->`)",
                                names.join(", "),
                                several[0].name
                            ),
                        );
                    }
                    // Wait for the ends' types to be known.
                    _ => return Ok(false),
                }
            }
        };
        let Some(ends) = edge_ty.edge.as_ref() else {
            return Ok(changed);
        };
        let (left_is_src, both_ways) = match rel.direction {
            Direction::Right => (true, false),
            Direction::Left => (false, false),
            Direction::Both if ends.from == ends.to => (true, true),
            Direction::Both => match (left_ty.as_deref(), right_ty.as_deref()) {
                (Some(l), _) if l == ends.from => (true, false),
                (Some(l), _) if l == ends.to => (false, false),
                (_, Some(r)) if r == ends.to => (true, false),
                (_, Some(r)) if r == ends.from => (false, false),
                (None, None) => {
                    return self.error(
                        rel.at,
                        format!(
                            "`{}` goes from {} to {}: give one end its type to say which way it is read",
                            edge_ty.name, ends.from, ends.to
                        ),
                    )
                }
                _ => (true, false),
            },
        };
        let (want_left, want_right) = if left_is_src {
            (&ends.from, &ends.to)
        } else {
            (&ends.to, &ends.from)
        };
        for (var, want) in [(&left, want_left), (&right, want_right)] {
            let current = self.node_type(var).map(|t| t.name.clone());
            match current {
                Some(have) if &have != want => {
                    let at = self.vars[var.as_str()].at;
                    return self.error(
                        at,
                        format!(
                            "`{}` goes from {} to {}, so this end is a {want}, not a {have}",
                            edge_ty.name, ends.from, ends.to
                        ),
                    );
                }
                Some(_) => {}
                None => {
                    let ty = self.catalog.get(want);
                    if let Some(b) = self.vars.get_mut(var.as_str()) {
                        b.ty = ty;
                    }
                    changed = true;
                }
            }
        }
        let step = &mut self.steps[i];
        if step.ty.is_none() {
            changed = true;
        }
        step.ty = Some(edge_ty.name.clone());
        step.left_is_src = left_is_src;
        step.both_ways = both_ways;
        Ok(changed)
    }

    /// Join a node's table when a field other than its key is read, it is returned whole,
    /// or no relationship reaches it. Checks every variable and field the query reads.
    fn mark_joins(&mut self, query: &'q Query) -> Result<()> {
        let mut exprs: Vec<&Expr> = Vec::new();
        for m in &query.matches {
            exprs.extend(m.filter.iter());
            for pattern in &m.patterns {
                for node in
                    std::iter::once(&pattern.start).chain(pattern.steps.iter().map(|s| &s.1))
                {
                    for (field, value) in &node.props {
                        // Anonymous nodes' properties are checked by position below.
                        if let Some(var) = &node.var {
                            self.mark_field(var, field)?;
                        }
                        exprs.push(value);
                    }
                }
                for (rel, _) in &pattern.steps {
                    for (field, value) in &rel.props {
                        if let Some(var) = &rel.var {
                            self.mark_field(var, field)?;
                        }
                        exprs.push(value);
                    }
                }
            }
        }
        let aliases: BTreeSet<&str> = query
            .ret
            .items
            .iter()
            .filter_map(|item| item.alias.as_deref())
            .collect();
        for item in &query.ret.items {
            if let Expr::Var(var) = &item.expr {
                self.mark_whole(var)?;
            } else {
                exprs.push(&item.expr);
            }
        }
        for (expr, _) in &query.ret.order {
            if let Expr::Var(var) = expr {
                if aliases.contains(var.name.as_str()) {
                    continue;
                }
            }
            if !query.ret.items.iter().any(|item| &item.expr == expr) {
                exprs.push(expr);
            }
        }
        for expr in exprs {
            self.mark_expr(expr, &aliases)?;
        }
        // Anonymous nodes with inline properties, and nodes no step reaches.
        let reached: BTreeSet<&str> = self
            .steps
            .iter()
            .flat_map(|s| [s.left.as_str(), s.right.as_str()])
            .collect();
        let mut lone = Vec::new();
        for name in &self.order {
            if self.vars[name].kind == TypeKind::Node && !reached.contains(name.as_str()) {
                lone.push(name.clone());
            }
        }
        for name in lone {
            if let Some(b) = self.vars.get_mut(&name) {
                b.joined = true;
            }
        }
        for m in &query.matches {
            for pattern in &m.patterns {
                for node in
                    std::iter::once(&pattern.start).chain(pattern.steps.iter().map(|s| &s.1))
                {
                    if node.var.is_none() && !node.props.is_empty() {
                        // Anonymous: its generated name is found by position.
                        let name = self.anonymous_at(node.at);
                        for (field, _) in &node.props {
                            let ty = self.vars[&name].ty;
                            self.check_field(ty, &name, field)?;
                            if !is_key_field(ty, &field.name) {
                                if let Some(b) = self.vars.get_mut(&name) {
                                    b.joined = true;
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The generated name of the anonymous node pattern at `at`.
    fn anonymous_at(&self, at: usize) -> String {
        self.vars
            .values()
            .find(|b| b.at == at && b.kind == TypeKind::Node && b.name.starts_with("_n"))
            .map(|b| b.name.clone())
            .unwrap_or_default()
    }

    fn binding(&self, var: &Name) -> Result<&Binding<'c>> {
        match self.vars.get(&var.name) {
            Some(b) => Ok(b),
            None => {
                let known: Vec<&str> = self
                    .order
                    .iter()
                    .filter(|n| !n.starts_with('_'))
                    .map(String::as_str)
                    .collect();
                let hint = nearest_name(&var.name, known.iter().copied())
                    .map(|n| format!(" (did you mean `{n}`?)"))
                    .unwrap_or_default();
                self.error(
                    var.at,
                    format!(
                        "unknown variable `{}`{hint}; the query binds {}",
                        var.name,
                        if known.is_empty() {
                            "no named variable".to_owned()
                        } else {
                            known.join(", ")
                        }
                    ),
                )
            }
        }
    }

    fn check_field(&self, ty: Option<&TypeDef>, var: &str, field: &Name) -> Result<()> {
        let Some(ty) = ty else { return Ok(()) };
        if column_names(ty).contains(&field.name.as_str()) {
            return Ok(());
        }
        let columns = column_names(ty);
        let hint = nearest_name(&field.name, columns.iter().copied())
            .map(|n| format!(" (did you mean `{n}`?)"))
            .unwrap_or_default();
        let shown = if var.starts_with('_') {
            String::new()
        } else {
            format!("`{var}` is a {}: ", ty.name)
        };
        self.error(
            field.at,
            format!(
                "{shown}unknown field `{}` of {}{hint}; its fields: {}",
                field.name,
                ty.name,
                columns.join(", ")
            ),
        )
    }

    fn mark_field(&mut self, var: &Name, field: &Name) -> Result<()> {
        let binding = self.binding(var)?;
        if binding.path {
            return self.error(
                field.at,
                format!(
                    "`{}` names a variable-length relationship (a list of edges): its properties cannot be read here",
                    var.name
                ),
            );
        }
        let ty = binding.ty;
        self.check_field(ty, &var.name, field)?;
        if binding.kind == TypeKind::Node && !is_key_field(ty, &field.name) {
            if let Some(b) = self.vars.get_mut(&var.name) {
                b.joined = true;
            }
        }
        Ok(())
    }

    fn mark_whole(&mut self, var: &Name) -> Result<()> {
        let binding = self.binding(var)?;
        if binding.path {
            return self.error(
                var.at,
                format!(
                    "`{}` names a variable-length relationship: returning it is not in the supported subset (return its ends)",
                    var.name
                ),
            );
        }
        if binding.kind == TypeKind::Node {
            if let Some(b) = self.vars.get_mut(&var.name) {
                b.joined = true;
            }
        }
        Ok(())
    }

    fn mark_expr(&mut self, expr: &Expr, aliases: &BTreeSet<&str>) -> Result<()> {
        match expr {
            Expr::Property(var, field) => self.mark_field(var, field),
            Expr::Var(var) => {
                if self.vars.contains_key(&var.name) || aliases.contains(var.name.as_str()) {
                    Ok(())
                } else {
                    self.binding(var).map(|_| ())
                }
            }
            Expr::List(items, _) => items.iter().try_for_each(|e| self.mark_expr(e, aliases)),
            Expr::Binary(_, l, r) => {
                self.mark_expr(l, aliases)?;
                self.mark_expr(r, aliases)
            }
            Expr::Not(e, _) | Expr::Negate(e, _) | Expr::IsNull { expr: e, .. } => {
                self.mark_expr(e, aliases)
            }
            Expr::Call { args, .. } => args.iter().try_for_each(|e| self.mark_expr(e, aliases)),
            Expr::Literal(..) | Expr::Param(_) => Ok(()),
        }
    }

    /// Keys a node is known to have, from the query's text: `{key: 'v'}` in its pattern,
    /// or a `WHERE` conjunct `n.key = 'v'` / `n.key IN [...]` (any one of them bounds it).
    fn anchors(&self, query: &Query) -> BTreeMap<String, Vec<String>> {
        let mut anchors = BTreeMap::new();
        for m in &query.matches {
            for pattern in &m.patterns {
                let nodes =
                    std::iter::once(&pattern.start).chain(pattern.steps.iter().map(|s| &s.1));
                for node in nodes {
                    let name = match &node.var {
                        Some(var) => var.name.clone(),
                        None => self.anonymous_at(node.at),
                    };
                    let ty = self.vars.get(&name).and_then(|b| b.ty);
                    for (field, value) in &node.props {
                        if is_key_field(ty, &field.name) {
                            if let Some(keys) = self.key_values(value) {
                                anchors.entry(name.clone()).or_insert(keys);
                            }
                        }
                    }
                }
            }
            let mut conjuncts = Vec::new();
            if let Some(filter) = &m.filter {
                split_and(filter, &mut conjuncts);
            }
            for conjunct in conjuncts {
                let (var, field, value) = match conjunct {
                    Expr::Binary(BinaryOp::Eq | BinaryOp::In, left, right) => {
                        match (left.as_ref(), right.as_ref()) {
                            (Expr::Property(var, field), value) => (var, field, value),
                            (value, Expr::Property(var, field))
                                if matches!(conjunct, Expr::Binary(BinaryOp::Eq, ..)) =>
                            {
                                (var, field, value)
                            }
                            _ => continue,
                        }
                    }
                    _ => continue,
                };
                let ty = self.vars.get(&var.name).and_then(|b| b.ty);
                if self
                    .vars
                    .get(&var.name)
                    .is_some_and(|b| b.kind == TypeKind::Node)
                    && is_key_field(ty, &field.name)
                {
                    if let Some(keys) = self.key_values(value) {
                        anchors.entry(var.name.clone()).or_insert(keys);
                    }
                }
            }
        }
        anchors
    }

    /// String keys an expression stands for, when it is written out (or a parameter).
    fn key_values(&self, expr: &Expr) -> Option<Vec<String>> {
        let json_keys = |value: &serde_json::Value| -> Option<Vec<String>> {
            match value {
                serde_json::Value::String(s) => Some(vec![s.clone()]),
                serde_json::Value::Array(items) => items
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect(),
                _ => None,
            }
        };
        match expr {
            Expr::Literal(Literal::Str(s), _) => Some(vec![s.clone()]),
            Expr::Param(name) => self.params.get(&name.name).and_then(json_keys),
            Expr::List(items, _) => items
                .iter()
                .map(|item| match item {
                    Expr::Literal(Literal::Str(s), _) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
            _ => None,
        }
    }

    /// From each anchored node outwards, the fixed-length steps to read by key, breadth
    /// first: a step is expanded from the first of its ends that is reached.
    fn plan_expansions(&mut self, query: &Query) {
        let mut reached: BTreeMap<String, Seed> = self
            .anchors(query)
            .into_iter()
            .map(|(var, keys)| (var, Seed::Keys(keys)))
            .collect();
        let mut done: BTreeSet<usize> = BTreeSet::new();
        loop {
            let mut progressed = false;
            for (i, step) in self.steps.iter().enumerate() {
                if done.contains(&i) || step.rel.hops.is_some() {
                    continue;
                }
                // Expand from the end already reached.
                let (near_var, far, near_is_src) = if reached.contains_key(&step.left) {
                    (&step.left, &step.right, step.left_is_src)
                } else if reached.contains_key(&step.right) {
                    (&step.right, &step.left, !step.left_is_src)
                } else {
                    continue;
                };
                let (near, columns) = if step.both_ways {
                    (vec!["src", "dst"], vec!["src", "dst"])
                } else if near_is_src {
                    (vec!["src"], vec!["dst"])
                } else {
                    (vec!["dst"], vec!["src"])
                };
                let seed = reached[near_var.as_str()].clone();
                let name = format!("__expanded_{}", step.edge);
                self.expansions.push((
                    step.edge.clone(),
                    Expansion {
                        name: name.clone(),
                        table: step.ty.clone().unwrap_or_default(),
                        near,
                        seed,
                    },
                ));
                reached.entry(far.clone()).or_insert(Seed::Reached {
                    expansion: name,
                    columns,
                });
                done.insert(i);
                progressed = true;
            }
            if !progressed {
                break;
            }
        }
    }

    /// The table a step's edges are read from: its expansion's rows, or the whole table.
    fn edge_source(&self, step: &Step) -> String {
        self.expansions
            .iter()
            .find(|(edge, _)| edge == &step.edge)
            .map(|(_, e)| e.name.clone())
            .unwrap_or_else(|| step.ty.clone().unwrap_or_default())
    }

    /// The `FROM` items and join conditions, then the `SELECT`.
    fn select(mut self, query: &'q Query) -> Result<Compiled> {
        let mut from: Vec<String> = Vec::new();
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
                    from.push(format!("{} AS {}", ident(&table), ident(&binding.alias)));
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
            from.push(item);
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
                if a.clause == b.clause
                    && a.ty == b.ty
                    && a.rel.hops.is_none()
                    && b.rel.hops.is_none()
                {
                    conditions.push(format!(
                        "{}.{} <> {}.{}",
                        ident(&a.edge),
                        ident("id"),
                        ident(&b.edge),
                        ident("id")
                    ));
                }
            }
        }
        // Inline properties.
        for m in &query.matches {
            for pattern in &m.patterns {
                let nodes =
                    std::iter::once(&pattern.start).chain(pattern.steps.iter().map(|s| &s.1));
                for node in nodes {
                    let name = match &node.var {
                        Some(var) => var.name.clone(),
                        None => self.anonymous_at(node.at),
                    };
                    for (field, value) in &node.props {
                        let column = self.column(&name, &field.name);
                        let value = self.expr(value, &BTreeMap::new())?;
                        conditions.push(format!("{column} = {value}"));
                    }
                }
                for (rel, _) in &pattern.steps {
                    if rel.props.is_empty() {
                        continue;
                    }
                    let name = match &rel.var {
                        Some(var) => var.name.clone(),
                        None => steps
                            .iter()
                            .find(|s| std::ptr::eq(s.rel, rel))
                            .map(|s| s.edge.clone())
                            .unwrap_or_default(),
                    };
                    for (field, value) in &rel.props {
                        let column = self.column(&name, &field.name);
                        let value = self.expr(value, &BTreeMap::new())?;
                        conditions.push(format!("{column} = {value}"));
                    }
                }
            }
            if let Some(filter) = &m.filter {
                conditions.push(self.expr(filter, &BTreeMap::new())?);
            }
        }
        self.steps = steps;
        self.projection(query, from, conditions)
    }

    /// The `FROM` item of a step, and the columns that hold its left and right ends.
    fn edge_item(&self, step: &Step) -> Result<(String, String, String)> {
        let table = step.ty.clone().unwrap_or_default();
        let alias = ident(&step.edge);
        let (left_col, right_col) = if step.left_is_src {
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
        if min == 0 {
            let ends = ty.and_then(|t| t.edge.as_ref());
            if let Some(ends) = ends.filter(|e| e.from == e.to) {
                chains.push(format!(
                    "SELECT {id} AS {f}, {id} AS {t} FROM {}",
                    ident(&ends.from),
                    id = ident("id"),
                    f = ident("_from"),
                    t = ident("_to"),
                ));
            }
        }
        for hops in min.max(1)..=max {
            let hop = |h: u32| ident(&format!("h{h}"));
            let mut sql = format!(
                "SELECT {}.{} AS {}, {}.{} AS {} FROM ",
                hop(1),
                ident("src"),
                ident("_from"),
                hop(hops),
                ident("dst"),
                ident("_to")
            );
            let items: Vec<String> = (1..=hops)
                .map(|h| format!("{base} AS {}", hop(h)))
                .collect();
            sql.push_str(&items.join(", "));
            let mut conds = Vec::new();
            for h in 2..=hops {
                conds.push(format!(
                    "{}.{} = {}.{}",
                    hop(h),
                    ident("src"),
                    hop(h - 1),
                    ident("dst")
                ));
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
        let item = format!("({}) AS {alias}", chains.join(" UNION ALL "));
        let (left, right) = if step.left_is_src {
            ("_from", "_to")
        } else {
            ("_to", "_from")
        };
        Ok((item, left.to_owned(), right.to_owned()))
    }

    /// The SQL of `var.field`.
    fn column(&self, var: &str, field: &str) -> String {
        let Some(binding) = self.vars.get(var) else {
            return ident(field);
        };
        if binding.kind == TypeKind::Node && is_key_field(binding.ty, field) {
            if let Some(id) = &binding.id {
                return id.clone();
            }
        }
        format!("{}.{}", ident(&binding.alias), ident(field))
    }

    /// A variable used as a value: a node's key, an edge's id.
    fn identity(&self, var: &Name) -> Result<String> {
        let binding = self.binding(var)?;
        if binding.path {
            return self.error(
                var.at,
                format!(
                    "`{}` names a variable-length relationship: it has no single value here",
                    var.name
                ),
            );
        }
        Ok(match binding.kind {
            TypeKind::Node => binding
                .id
                .clone()
                .unwrap_or_else(|| format!("{}.{}", ident(&binding.alias), ident("id"))),
            TypeKind::Edge => format!("{}.{}", ident(&binding.alias), ident("id")),
        })
    }

    fn expr(&self, expr: &Expr, aliases: &BTreeMap<String, String>) -> Result<String> {
        Ok(match expr {
            Expr::Literal(literal, _) => literal_sql(literal),
            Expr::Param(name) => self.param(name)?,
            Expr::Var(var) => match aliases.get(&var.name) {
                Some(column) => column.clone(),
                None => self.identity(var)?,
            },
            Expr::Property(var, field) => {
                self.binding(var)?;
                self.column(&var.name, &field.name)
            }
            Expr::List(items, _) => {
                let items: Vec<String> = items
                    .iter()
                    .map(|e| self.expr(e, aliases))
                    .collect::<Result<_>>()?;
                format!("make_array({})", items.join(", "))
            }
            Expr::Binary(op, left, right) => {
                let l = self.expr(left, aliases)?;
                if *op == BinaryOp::In {
                    return self.in_list(l, right, aliases);
                }
                let r = self.expr(right, aliases)?;
                match op {
                    BinaryOp::StartsWith => format!("starts_with({l}, {r})"),
                    BinaryOp::EndsWith => format!("ends_with({l}, {r})"),
                    BinaryOp::Contains => format!("(strpos({l}, {r}) > 0)"),
                    BinaryOp::Xor => format!("(({l} OR {r}) AND NOT ({l} AND {r}))"),
                    _ => format!("({l} {} {r})", binary_sql(*op)),
                }
            }
            Expr::Not(inner, _) => format!("(NOT {})", self.expr(inner, aliases)?),
            Expr::Negate(inner, _) => format!("(- {})", self.expr(inner, aliases)?),
            Expr::IsNull { expr, negated } => format!(
                "({} IS {}NULL)",
                self.expr(expr, aliases)?,
                if *negated { "NOT " } else { "" }
            ),
            Expr::Call {
                name,
                distinct,
                star,
                args,
            } => self.call(name, *distinct, *star, args, aliases)?,
        })
    }

    fn in_list(
        &self,
        left: String,
        right: &Expr,
        aliases: &BTreeMap<String, String>,
    ) -> Result<String> {
        let items: Vec<String> = match right {
            Expr::List(items, _) => items
                .iter()
                .map(|e| self.expr(e, aliases))
                .collect::<Result<_>>()?,
            Expr::Param(name) => match self.params.get(&name.name) {
                Some(serde_json::Value::Array(values)) => values
                    .iter()
                    .map(|v| crate::params::json_sql(&name.name, v))
                    .collect::<Result<_>>()?,
                Some(_) => {
                    return self.error(
                        name.at,
                        format!(
                        "`IN ${}` needs a list: pass it as JSON, e.g. `--param {}='[\"a\",\"b\"]'`",
                        name.name, name.name
                    ),
                    )
                }
                None => return Err(self.missing_param(name)),
            },
            other => {
                let list = self.expr(other, aliases)?;
                return Ok(format!("array_has({list}, {left})"));
            }
        };
        if items.is_empty() {
            return Ok("false".to_owned());
        }
        Ok(format!("({left} IN ({}))", items.join(", ")))
    }

    fn param(&self, name: &Name) -> Result<String> {
        match self.params.get(&name.name) {
            Some(value) => crate::params::json_sql(&name.name, value),
            None => Err(self.missing_param(name)),
        }
    }

    fn missing_param(&self, name: &Name) -> Error {
        Error::syntax(
            self.text,
            name.at,
            &format!(
                "parameter `${}` has no value: pass `--param {}=VALUE` (or `params` in the request)",
                name.name, name.name
            ),
        )
    }

    fn call(
        &self,
        name: &Name,
        distinct: bool,
        star: bool,
        args: &[Expr],
        aliases: &BTreeMap<String, String>,
    ) -> Result<String> {
        let Some(function) = FUNCTIONS
            .iter()
            .find(|f| f.eq_ignore_ascii_case(&name.name))
        else {
            let hint = nearest_name(&name.name, FUNCTIONS.iter().copied())
                .map(|n| format!(" (did you mean `{n}`?)"))
                .unwrap_or_default();
            return self.error(
                name.at,
                format!(
                    "unknown function `{}`{hint}; the supported ones: {}",
                    name.name,
                    FUNCTIONS.join(", ")
                ),
            );
        };
        if star {
            if *function != "count" {
                return self.error(
                    name.at,
                    format!("`{function}(*)`: only `count(*)` takes `*`"),
                );
            }
            return Ok("count(*)".to_owned());
        }
        let want = match *function {
            "coalesce" => None,
            "round" => Some(1),
            _ => Some(1),
        };
        if let Some(want) = want {
            if args.len() != want {
                return self.error(
                    name.at,
                    format!("`{function}` takes {want} argument, not {}", args.len()),
                );
            }
        }
        if distinct && !AGGREGATES.contains(function) {
            return self.error(
                name.at,
                format!("`DISTINCT` goes only in an aggregate, not in `{function}`"),
            );
        }
        let first = args.first();
        // Functions of a variable itself.
        match (*function, first) {
            ("id", Some(Expr::Var(var))) => return self.identity(var),
            ("type", Some(Expr::Var(var))) => {
                let binding = self.binding(var)?;
                if binding.kind != TypeKind::Edge {
                    return self.error(
                        var.at,
                        format!(
                            "`type({})`: `{}` is a node; `type` takes a relationship",
                            var.name, var.name
                        ),
                    );
                }
                let ty = binding.ty.map(|t| t.name.clone()).unwrap_or_default();
                return Ok(string_literal(&ty));
            }
            ("id" | "type", _) => {
                return self.error(name.at, format!("`{function}` takes a variable"));
            }
            _ => {}
        }
        let args: Vec<String> = args
            .iter()
            .map(|a| self.expr(a, aliases))
            .collect::<Result<_>>()?;
        let joined = args.join(", ");
        let distinct = if distinct { "DISTINCT " } else { "" };
        Ok(match *function {
            "count" | "sum" | "min" | "max" | "avg" => format!("{function}({distinct}{joined})"),
            "collect" => {
                format!("array_agg({distinct}{joined}) FILTER (WHERE {joined} IS NOT NULL)")
            }
            "toLower" => format!("lower({joined})"),
            "toUpper" => format!("upper({joined})"),
            "trim" => format!("btrim({joined})"),
            "size" => {
                if first.is_some_and(|e| self.is_list(e)) {
                    format!("cardinality({joined})")
                } else {
                    format!("character_length({joined})")
                }
            }
            "toString" => format!("CAST({joined} AS VARCHAR)"),
            "toInteger" => format!("CAST({joined} AS BIGINT)"),
            "toFloat" => format!("CAST({joined} AS DOUBLE)"),
            other => format!("{other}({joined})"),
        })
    }

    fn is_list(&self, expr: &Expr) -> bool {
        match expr {
            Expr::List(..) => true,
            Expr::Call { name, .. } => name.name.eq_ignore_ascii_case("collect"),
            Expr::Property(var, field) => self
                .vars
                .get(&var.name)
                .and_then(|b| b.ty)
                .and_then(|t| t.field(&field.name))
                .is_some_and(|f| matches!(f.ty, FieldType::List(_) | FieldType::Vector(_))),
            _ => false,
        }
    }

    /// `SELECT … FROM … WHERE … GROUP BY … ORDER BY … LIMIT … OFFSET …`.
    fn projection(
        &self,
        query: &Query,
        from: Vec<String>,
        conditions: Vec<String>,
    ) -> Result<Compiled> {
        let ret = &query.ret;
        let mut select = Vec::new();
        let mut columns: Vec<String> = Vec::new();
        let mut group = Vec::new();
        let aggregated = ret.items.iter().any(|item| has_aggregate(&item.expr));
        // What ORDER BY may name: an alias, or an item's expression.
        let mut named: BTreeMap<String, String> = BTreeMap::new();
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
            for (sql, name) in outputs {
                if columns.contains(&name) {
                    return Err(Error::refused(format!(
                        "two columns are named `{name}`: give one an alias (`AS`)"
                    )));
                }
                if aggregated && !has_aggregate(&item.expr) {
                    group.push(sql.clone());
                }
                select.push(format!("{sql} AS {}", ident(&name)));
                named.insert(name.clone(), ident(&name));
                columns.push(name);
            }
        }
        let mut sql = String::from("SELECT ");
        if ret.distinct {
            sql.push_str("DISTINCT ");
        }
        sql.push_str(&select.join(", "));
        let _ = write!(sql, " FROM {}", from.join(", "));
        if !conditions.is_empty() {
            let _ = write!(sql, " WHERE {}", conditions.join(" AND "));
        }
        if !group.is_empty() {
            let _ = write!(sql, " GROUP BY {}", group.join(", "));
        }
        if !ret.order.is_empty() {
            let mut keys = Vec::new();
            for (expr, descending) in &ret.order {
                let by_item = ret
                    .items
                    .iter()
                    .find(|item| &item.expr == expr)
                    .map(|item| ident(item.alias.as_deref().unwrap_or(&item.text)));
                let key = match by_item {
                    Some(key) => key,
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

/// Whether edge type `ty` can join a `left` and a `right` node of these types.
fn fits(ty: &TypeDef, direction: Direction, left: Option<&str>, right: Option<&str>) -> bool {
    let Some(ends) = &ty.edge else { return false };
    let forward = left.is_none_or(|l| l == ends.from) && right.is_none_or(|r| r == ends.to);
    let backward = left.is_none_or(|l| l == ends.to) && right.is_none_or(|r| r == ends.from);
    match direction {
        Direction::Right => forward,
        Direction::Left => backward,
        Direction::Both => forward || backward,
    }
}

fn between(direction: Direction, left: Option<&str>, right: Option<&str>) -> String {
    let (from, to) = match direction {
        Direction::Left => (right, left),
        _ => (left, right),
    };
    let shown = |t: Option<&str>| t.map_or("any node type".to_owned(), str::to_owned);
    let way = if direction == Direction::Both {
        "between"
    } else {
        "from"
    };
    let and = if direction == Direction::Both {
        "and"
    } else {
        "to"
    };
    format!("{way} {} {and} {}", shown(from), shown(to))
}

/// An edge table read both ways: every edge as it is, and reversed (a self-loop once).
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
    let t = ident(table);
    format!(
        "SELECT {id}, {src}, {dst}{rest} FROM {t} UNION ALL SELECT {id}, {dst} AS {src}, {src} AS {dst}{rest} FROM {t} WHERE {src} <> {dst}"
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

/// The conjuncts of a `WHERE`: `a AND (b AND c)` → a, b, c.
fn split_and<'e>(expr: &'e Expr, out: &mut Vec<&'e Expr>) {
    match expr {
        Expr::Binary(BinaryOp::And, left, right) => {
            split_and(left, out);
            split_and(right, out);
        }
        other => out.push(other),
    }
}

fn has_aggregate(expr: &Expr) -> bool {
    match expr {
        Expr::Call { name, args, .. } => {
            AGGREGATES
                .iter()
                .any(|a| a.eq_ignore_ascii_case(&name.name))
                || args.iter().any(has_aggregate)
        }
        Expr::Binary(_, l, r) => has_aggregate(l) || has_aggregate(r),
        Expr::Not(e, _) | Expr::Negate(e, _) | Expr::IsNull { expr: e, .. } => has_aggregate(e),
        Expr::List(items, _) => items.iter().any(has_aggregate),
        _ => false,
    }
}

fn binary_sql(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Or => "OR",
        BinaryOp::And => "AND",
        BinaryOp::Eq => "=",
        BinaryOp::Ne => "<>",
        BinaryOp::Lt => "<",
        BinaryOp::Le => "<=",
        BinaryOp::Gt => ">",
        BinaryOp::Ge => ">=",
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        BinaryOp::Div => "/",
        BinaryOp::Mod => "%",
        // Written as functions by the caller.
        BinaryOp::Xor
        | BinaryOp::StartsWith
        | BinaryOp::EndsWith
        | BinaryOp::Contains
        | BinaryOp::In => "",
    }
}

fn literal_sql(literal: &Literal) -> String {
    match literal {
        Literal::Null => "NULL".to_owned(),
        Literal::Bool(b) => b.to_string(),
        Literal::Int(n) => n.to_string(),
        Literal::Float(f) => format!("{f:?}"),
        Literal::Str(s) => string_literal(s),
    }
}
