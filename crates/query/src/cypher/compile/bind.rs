//! Binding a query's variables to types: every node and relationship pattern, the types
//! named in them and those their neighbours imply, and which node tables a query must
//! join (the fields it reads).

use super::*;

impl<'q, 'c> Compiler<'q, 'c> {
    /// Every variable and relationship of every `MATCH`, with the types named in them.
    pub(super) fn bind(&mut self, matches: &'q [Match]) -> Result<()> {
        for (clause, m) in matches.iter().enumerate() {
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

    /// A variable's name as written; `__` starts only the names the compiler makes up.
    fn user_name(&self, var: &Name) -> Result<String> {
        if var.name.starts_with(GENERATED) {
            return self.error(
                var.at,
                format!(
                    "`{}`: a variable's name may not start with `{GENERATED}`",
                    var.name
                ),
            );
        }
        Ok(var.name.clone())
    }

    pub(super) fn bind_node(&mut self, node: &NodePattern) -> Result<String> {
        let ty = match &node.label {
            Some(label) => Some(self.type_named(label, TypeKind::Node)?),
            None => None,
        };
        let name = match &node.var {
            Some(var) => self.user_name(var)?,
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
                prefix: None,
            },
        );
        self.order.push(name.clone());
        Ok(name)
    }

    pub(super) fn bind_rel(&mut self, rel: &RelPattern) -> Result<String> {
        if let Some((min, max)) = rel.hops {
            if max.is_some_and(|max| min > max) {
                return self.error(
                    rel.at,
                    format!(
                        "`*{min}..{}`: the least hops is more than the most",
                        max.unwrap_or(0)
                    ),
                );
            }
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
        if let (Some(_), Some((name, _))) = (rel.hops, rel.props.first()) {
            return self.error(
                name.at,
                "properties on a variable-length relationship are not in the supported subset: filter its ends instead",
            );
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
                self.user_name(var)?;
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
                prefix: None,
            },
        );
        self.order.push(name.clone());
        Ok(name)
    }

    /// The type named `name`, of `kind`; otherwise an error with the nearest name.
    pub(super) fn type_named(&self, name: &Name, kind: TypeKind) -> Result<&'c TypeDef> {
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

    pub(super) fn node_type(&self, var: &str) -> Option<&'c TypeDef> {
        self.vars.get(var).and_then(|b| b.ty)
    }

    /// Edge types of relationships that name none, from their ends' types; node types
    /// from the edges they meet; until nothing changes.
    pub(super) fn infer(&mut self) -> Result<()> {
        loop {
            let mut changed = false;
            for i in 0..self.steps.len() {
                changed |= self.infer_step(i)?;
            }
            if !changed {
                break;
            }
        }
        // A relationship whose type its ends do not settle is the first thing to name.
        for step in &self.steps {
            if step.ty.is_none() {
                let candidates: Vec<String> = self
                    .catalog
                    .types
                    .iter()
                    .filter(|t| t.kind == TypeKind::Edge)
                    .map(|t| format!("`{}`", t.name))
                    .collect();
                return self.error(
                    step.rel.at,
                    format!(
                        "this relationship needs a type (its ends do not say which): name one of {}, as `-[:T]->`, or give its ends their types",
                        candidates.join(", ")
                    ),
                );
            }
        }
        let example = self
            .catalog
            .nodes()
            .next()
            .map_or("T".to_owned(), |t| t.name.clone());
        for name in &self.order {
            let binding = &self.vars[name];
            if binding.kind == TypeKind::Node && binding.ty.is_none() {
                let shown = if name.starts_with(GENERATED) {
                    "this node".to_owned()
                } else {
                    format!("the node `{name}`")
                };
                return self.error(
                    binding.at,
                    format!("{shown} needs a type: write it as `(x:{example})` or reach it over a typed relationship"),
                );
            }
        }
        Ok(())
    }

    pub(super) fn infer_step(&mut self, i: usize) -> Result<bool> {
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
        if rel.hops.is_some() && rel.direction == Direction::Both && ends.from != ends.to {
            return self.error(
                rel.at,
                format!(
                    "`{}` goes from {} to {}: an undirected variable-length path over it alternates the two, which is not in the supported subset (give it a direction, or fixed hops)",
                    edge_ty.name, ends.from, ends.to
                ),
            );
        }
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
    pub(super) fn mark_joins(
        &mut self,
        matches: &'q [Match],
        ret: Option<&'q Return>,
    ) -> Result<()> {
        let mut exprs: Vec<&Expr> = Vec::new();
        for m in matches {
            // An OPTIONAL MATCH's WHERE is read where it is joined (see `optional`).
            exprs.extend(m.filter.iter().filter(|_| !m.optional));
            for pattern in &m.patterns {
                for node in pattern.nodes() {
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
        let aliases: BTreeSet<&str> = ret
            .iter()
            .flat_map(|ret| ret.items.iter())
            .filter_map(|item| item.alias.as_deref())
            .collect();
        if let Some(ret) = ret {
            for item in &ret.items {
                if let Expr::Var(var) = &item.expr {
                    self.mark_whole(var)?;
                } else {
                    exprs.push(&item.expr);
                }
            }
            for (expr, _) in &ret.order {
                if let Expr::Var(var) = expr {
                    if aliases.contains(var.name.as_str()) {
                        continue;
                    }
                }
                if !ret.items.iter().any(|item| &item.expr == expr) {
                    exprs.push(expr);
                }
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
        for m in matches {
            for pattern in &m.patterns {
                for node in pattern.nodes() {
                    if node.var.is_none() && !node.props.is_empty() {
                        // Anonymous: its generated name is found by position.
                        let name = self.anonymous_at(node.at)?;
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
    /// The variable a node pattern binds: its own name, or the one made for it.
    pub(super) fn node_name(&self, node: &NodePattern) -> Result<String> {
        match &node.var {
            Some(var) => Ok(var.name.clone()),
            None => self.anonymous_at(node.at),
        }
    }

    fn anonymous_at(&self, at: usize) -> Result<String> {
        let generated = format!("{GENERATED}n");
        match self
            .vars
            .values()
            .find(|b| b.at == at && b.kind == TypeKind::Node && b.name.starts_with(&generated))
        {
            Some(b) => Ok(b.name.clone()),
            None => self.error(
                at,
                "this node was not bound (a bug: please report the query)",
            ),
        }
    }

    pub(super) fn binding(&self, var: &Name) -> Result<&Binding<'c>> {
        match self.vars.get(&var.name) {
            Some(b) => Ok(b),
            None => {
                let known: Vec<&str> = self
                    .order
                    .iter()
                    .filter(|n| !n.starts_with(GENERATED))
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

    pub(super) fn check_field(&self, ty: Option<&TypeDef>, var: &str, field: &Name) -> Result<()> {
        let Some(ty) = ty else { return Ok(()) };
        if column_names(ty).contains(&field.name.as_str()) {
            return Ok(());
        }
        let columns = column_names(ty);
        let hint = nearest_name(&field.name, columns.iter().copied())
            .map(|n| format!(" (did you mean `{n}`?)"))
            .unwrap_or_default();
        let shown = if var.starts_with(GENERATED) {
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

    pub(super) fn mark_field(&mut self, var: &Name, field: &Name) -> Result<()> {
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

    pub(super) fn mark_whole(&mut self, var: &Name) -> Result<()> {
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

    pub(super) fn mark_expr(&mut self, expr: &Expr, aliases: &BTreeSet<&str>) -> Result<()> {
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
}

/// Whether edge type `ty` can join a `left` and a `right` node of these types.
pub(super) fn fits(
    ty: &TypeDef,
    direction: Direction,
    left: Option<&str>,
    right: Option<&str>,
) -> bool {
    let Some(ends) = &ty.edge else { return false };
    let forward = left.is_none_or(|l| l == ends.from) && right.is_none_or(|r| r == ends.to);
    let backward = left.is_none_or(|l| l == ends.to) && right.is_none_or(|r| r == ends.from);
    match direction {
        Direction::Right => forward,
        Direction::Left => backward,
        Direction::Both => forward || backward,
    }
}

pub(super) fn between(direction: Direction, left: Option<&str>, right: Option<&str>) -> String {
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
