//! `OPTIONAL MATCH`: a clause compiled on its own, with the variables of the clauses
//! before it that it names, into a derived table the query left-joins on them.

use super::*;

/// An `OPTIONAL MATCH` as a derived table, left-joined on the variables it shares with
/// the `MATCH`es before it: one column `__key.v` per shared node, one `v.field` per
/// column of each variable it binds.
pub(super) struct OptionalPart<'q> {
    pub(super) alias: String,
    pub(super) sql: String,
    pub(super) shared: Vec<String>,
    /// Its `WHERE`, a condition of the join.
    pub(super) filter: Option<&'q Expr>,
}

impl<'q, 'c> Compiler<'q, 'c> {
    /// Compile `m` on its own, with the variables bound so far that it names, and bind
    /// the variables it adds to the columns of its derived table.
    pub(super) fn optional(&mut self, k: usize, m: &'q Match) -> Result<OptionalPart<'q>> {
        let alias = format!("__optional{k}");
        let mut named = BTreeSet::new();
        for pattern in &m.patterns {
            for node in pattern.nodes() {
                named.extend(node.var.iter().map(|v| v.name.clone()));
                for (_, value) in &node.props {
                    variables_of(value, &mut named);
                }
            }
            named.extend(
                pattern
                    .steps
                    .iter()
                    .filter_map(|(rel, _)| rel.var.as_ref())
                    .map(|v| v.name.clone()),
            );
        }
        let mut sub = Compiler::new(self.text, self.catalog, self.params);
        sub.anonymous = self.anonymous;
        let mut shared = Vec::new();
        for name in named.iter().filter(|n| self.vars.contains_key(n.as_str())) {
            let binding = &self.vars[name];
            if binding.kind == TypeKind::Edge {
                return self.error(
                    binding.at,
                    format!("`{name}` is a relationship of an earlier clause: an `OPTIONAL MATCH` may share nodes only"),
                );
            }
            sub.vars.insert(
                name.clone(),
                Binding {
                    name: name.clone(),
                    at: binding.at,
                    kind: TypeKind::Node,
                    ty: binding.ty,
                    alias: name.clone(),
                    joined: false,
                    id: None,
                    path: false,
                    prefix: None,
                },
            );
            sub.order.push(name.clone());
            shared.push(name.clone());
        }
        let clause = std::slice::from_ref(m);
        sub.bind(clause)?;
        sub.infer()?;
        let added: Vec<String> = sub
            .order
            .iter()
            .filter(|n| !shared.contains(n) && !n.starts_with(GENERATED))
            .cloned()
            .collect();
        // Every column of what it binds is readable after it.
        for name in &added {
            if let Some(b) = sub.vars.get_mut(name) {
                if b.kind == TypeKind::Node {
                    b.joined = true;
                }
            }
        }
        sub.mark_joins(clause, None)?;
        sub.plan_expansions(clause);
        let (from, conditions) = sub.tables_and_conditions(clause)?;
        let mut select = Vec::new();
        for name in &shared {
            let key = sub.identity(&Name {
                name: name.clone(),
                at: 0,
            })?;
            select.push(format!("{key} AS {}", ident(&format!("__key.{name}"))));
        }
        let mut bound = Vec::new();
        for name in &added {
            let binding = &sub.vars[name];
            let Some(ty) = binding.ty.filter(|_| !binding.path) else {
                continue;
            };
            for column in column_names(ty) {
                select.push(format!(
                    "{} AS {}",
                    sub.column(name, column),
                    ident(&format!("{name}.{column}"))
                ));
            }
            bound.push((name.clone(), binding.kind, ty, binding.at));
        }
        if select.is_empty() {
            select.push(format!("1 AS {}", ident("__one")));
        }
        let mut sql = format!("SELECT {} FROM {}", select.join(", "), from.join(", "));
        if !conditions.is_empty() {
            let _ = write!(sql, " WHERE {}", conditions.join(" AND "));
        }
        self.anonymous = sub.anonymous;
        self.optional_types.extend(sub.read_types());
        self.expansions.append(&mut sub.expansions);
        for (name, kind, ty, at) in bound {
            let id = (kind == TypeKind::Node)
                .then(|| format!("{}.{}", ident(&alias), ident(&format!("{name}.id"))));
            self.vars.insert(
                name.clone(),
                Binding {
                    name: name.clone(),
                    at,
                    kind,
                    ty: Some(ty),
                    alias: alias.clone(),
                    joined: true,
                    id,
                    path: false,
                    prefix: Some(name),
                },
            );
        }
        Ok(OptionalPart {
            alias,
            sql,
            shared,
            filter: m.filter.as_ref(),
        })
    }
}

/// The variables an expression names.
fn variables_of(expr: &Expr, out: &mut BTreeSet<String>) {
    match expr {
        Expr::Var(var) | Expr::Property(var, _) => {
            out.insert(var.name.clone());
        }
        Expr::List(items, _) | Expr::Call { args: items, .. } => {
            items.iter().for_each(|e| variables_of(e, out));
        }
        Expr::Binary(_, left, right) => {
            variables_of(left, out);
            variables_of(right, out);
        }
        Expr::Not(e, _) | Expr::Negate(e, _) | Expr::IsNull { expr: e, .. } => variables_of(e, out),
        Expr::Literal(..) | Expr::Param(_) => {}
    }
}
