//! Anchors and expansions: the keys a query names for its nodes, and the edge tables it
//! reads by key from them, hop by hop, before it runs.

use super::*;

impl<'q, 'c> Compiler<'q, 'c> {
    /// Keys a node is known to have, from the query's text: `{key: 'v'}` in its pattern,
    /// or a `WHERE` conjunct `n.key = 'v'` / `n.key IN [...]` (any one of them bounds it).
    pub(super) fn anchors(&self, matches: &[Match]) -> BTreeMap<String, Vec<String>> {
        let mut anchors = BTreeMap::new();
        for m in matches {
            for pattern in &m.patterns {
                let nodes = pattern.nodes();
                for node in nodes {
                    let Ok(name) = self.node_name(node) else {
                        continue;
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
    pub(super) fn key_values(&self, expr: &Expr) -> Option<Vec<String>> {
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
    pub(super) fn plan_expansions(&mut self, matches: &[Match]) {
        let mut reached: BTreeMap<String, Seed> = self
            .anchors(matches)
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
                let name = format!("__expanded{}", step.edge);
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
        // The node tables the query joins, read by the keys reached too (their `id`
        // index): a node bound where a step or an anchor leads has one of those keys.
        for name in &self.order {
            let binding = &self.vars[name];
            let (Some(seed), Some(ty)) = (reached.get(name), binding.ty) else {
                continue;
            };
            if binding.kind != TypeKind::Node || !binding.joined || binding.prefix.is_some() {
                continue;
            }
            self.expansions.push((
                name.clone(),
                Expansion {
                    name: format!("__nodes_{name}"),
                    table: ty.name.clone(),
                    near: vec!["id"],
                    seed: seed.clone(),
                },
            ));
        }
    }

    /// The table a step's edges are read from: its expansion's rows, or the whole table.
    pub(super) fn edge_source(&self, step: &Step) -> String {
        self.source_of(&step.edge, step.ty.as_deref().unwrap_or_default())
    }

    /// What the variable `var` of type `table` is read from: the rows its expansion
    /// found, or the whole table.
    pub(super) fn source_of(&self, var: &str, table: &str) -> String {
        self.expansions
            .iter()
            .find(|(expanded, _)| expanded == var)
            .map_or_else(|| table.to_owned(), |(_, e)| e.name.clone())
    }
}

/// The conjuncts of a `WHERE`: `a AND (b AND c)` → a, b, c.
pub(super) fn split_and<'e>(expr: &'e Expr, out: &mut Vec<&'e Expr>) {
    match expr {
        Expr::Binary(BinaryOp::And, left, right) => {
            split_and(left, out);
            split_and(right, out);
        }
        other => out.push(other),
    }
}
