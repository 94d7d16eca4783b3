//! Expressions in SQL: properties, parameters, operators and the supported functions.

use super::*;

impl<'q, 'c> Compiler<'q, 'c> {
    /// The SQL of `var.field`.
    pub(super) fn column(&self, var: &str, field: &str) -> String {
        let Some(binding) = self.vars.get(var) else {
            return ident(field);
        };
        if binding.kind == TypeKind::Node && is_key_field(binding.ty, field) {
            if let Some(id) = &binding.id {
                return id.clone();
            }
        }
        match &binding.prefix {
            // A variable of an `OPTIONAL MATCH`: a column of its derived table.
            Some(prefix) => format!(
                "{}.{}",
                ident(&binding.alias),
                ident(&format!("{prefix}.{field}"))
            ),
            None => format!("{}.{}", ident(&binding.alias), ident(field)),
        }
    }

    /// A variable used as a value: a node's key, an edge's id.
    pub(super) fn identity(&self, var: &Name) -> Result<String> {
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
        Ok(match (&binding.kind, &binding.id) {
            (TypeKind::Node, Some(id)) => id.clone(),
            _ => self.column(&var.name, "id"),
        })
    }

    pub(super) fn expr(&self, expr: &Expr, aliases: &BTreeMap<String, String>) -> Result<String> {
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
                    match right.as_ref() {
                        Expr::List(items, _) => {
                            for item in items {
                                self.check_comparable(BinaryOp::Eq, left, item)?;
                            }
                        }
                        Expr::Param(name) => self.check_list_param(left, name)?,
                        _ => {}
                    }
                    return self.in_list(l, right, aliases);
                }
                let r = self.expr(right, aliases)?;
                self.check_comparable(*op, left, right)?;
                match op {
                    // A chain of ANDs (ORs) written flat: SQL parsers nest each pair.
                    BinaryOp::And | BinaryOp::Or => {
                        let mut operands = Vec::new();
                        same_op_operands(*op, expr, &mut operands);
                        let sql: Vec<String> = operands
                            .iter()
                            .map(|e| self.expr(e, aliases))
                            .collect::<Result<_>>()?;
                        format!("({})", sql.join(&format!(" {} ", binary_sql(*op))))
                    }
                    // `+` of text is concatenation.
                    BinaryOp::Add if self.is_text(left) || self.is_text(right) => {
                        format!("({l} || {r})")
                    }
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

    pub(super) fn in_list(
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

    pub(super) fn param(&self, name: &Name) -> Result<String> {
        match self.params.get(&name.name) {
            Some(value) => crate::params::json_sql(&name.name, value),
            None => Err(self.missing_param(name)),
        }
    }

    pub(super) fn missing_param(&self, name: &Name) -> Error {
        Error::syntax(
            self.text,
            name.at,
            &format!(
                "parameter `${}` has no value: pass `--param {}=VALUE` (or `params` in the request)",
                name.name, name.name
            ),
        )
    }

    pub(super) fn call(
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
                // Null where an OPTIONAL MATCH found no relationship.
                let id = self.identity(var)?;
                return Ok(format!(
                    "CASE WHEN {id} IS NULL THEN NULL ELSE {} END",
                    string_literal(&ty)
                ));
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
            // The sum of nothing is 0, as in openCypher (SQL says null).
            "sum" => format!("coalesce(sum({distinct}{joined}), 0)"),
            "count" | "min" | "max" | "avg" => format!("{function}({distinct}{joined})"),
            "collect" => {
                format!("array_agg({distinct}{joined}) FILTER (WHERE {joined} IS NOT NULL)")
            }
            "toLower" => format!("lower({joined})"),
            "toUpper" => format!("upper({joined})"),
            "trim" => format!("btrim({joined})"),
            "size" => {
                if first.is_some_and(|e| self.is_list(e)) {
                    format!("cardinality({joined})")
                } else if first.is_some_and(|e| self.kind_of(e).is_some_and(|k| k != Kind::Text)) {
                    return self.error(
                        name.at,
                        "`size` takes text or a list (the length of a number is not a thing)",
                    );
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

    /// What kind of value an expression is, when the query's text says.
    pub(super) fn kind_of(&self, expr: &Expr) -> Option<Kind> {
        match expr {
            Expr::Literal(Literal::Str(_), _) => Some(Kind::Text),
            Expr::Literal(Literal::Int(_) | Literal::Float(_), _) => Some(Kind::Number),
            Expr::Literal(Literal::Bool(_), _) => Some(Kind::Bool),
            Expr::Param(name) => match self.params.get(&name.name)? {
                serde_json::Value::String(_) => Some(Kind::Text),
                serde_json::Value::Number(_) => Some(Kind::Number),
                serde_json::Value::Bool(_) => Some(Kind::Bool),
                _ => None,
            },
            Expr::Property(var, field) => {
                let binding = self.vars.get(&var.name)?;
                if matches!(field.name.as_str(), "id" | "src" | "dst") {
                    return Some(Kind::Text);
                }
                match &binding.ty?.field(&field.name)?.ty {
                    FieldType::String | FieldType::Enum(_) => Some(Kind::Text),
                    FieldType::I32 | FieldType::I64 | FieldType::F32 | FieldType::F64 => {
                        Some(Kind::Number)
                    }
                    FieldType::Bool => Some(Kind::Bool),
                    _ => None,
                }
            }
            Expr::Call { name, .. }
                if ["toLower", "toUpper", "trim", "toString", "type"]
                    .iter()
                    .any(|f| f.eq_ignore_ascii_case(&name.name)) =>
            {
                Some(Kind::Text)
            }
            _ => None,
        }
    }

    pub(super) fn is_text(&self, expr: &Expr) -> bool {
        self.kind_of(expr) == Some(Kind::Text)
    }

    /// A comparison of text with a number (or a boolean with either) is refused: it is
    /// never true, and is almost always a slip (`age = '36'`, `name = 1`).
    pub(super) fn check_comparable(&self, op: BinaryOp, left: &Expr, right: &Expr) -> Result<()> {
        if !matches!(
            op,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        ) {
            return Ok(());
        }
        match (self.kind_of(left), self.kind_of(right)) {
            (Some(a), Some(b)) if a != b => {
                let shown = |e: &Expr| match e {
                    Expr::Property(var, field) => format!("`{}.{}`", var.name, field.name),
                    Expr::Param(name) => format!("`${}`", name.name),
                    Expr::Literal(literal, _) => format!("`{}`", literal_sql(literal)),
                    _ => "the value".to_owned(),
                };
                self.error(
                    right.at(),
                    format!(
                        "{} is {} and {} is {}: they never compare (quote a number to compare it with text)",
                        shown(left),
                        a.named(),
                        shown(right),
                        b.named()
                    ),
                )
            }
            _ => Ok(()),
        }
    }

    /// `x IN $list`: each value of the list comparable with `x`.
    fn check_list_param(&self, left: &Expr, name: &Name) -> Result<()> {
        let Some(serde_json::Value::Array(values)) = self.params.get(&name.name) else {
            return Ok(());
        };
        for value in values {
            let literal = match value {
                serde_json::Value::String(s) => Literal::Str(s.clone()),
                serde_json::Value::Number(n) => match n.as_i64() {
                    Some(i) => Literal::Int(i),
                    None => Literal::Float(n.as_f64().unwrap_or_default()),
                },
                serde_json::Value::Bool(b) => Literal::Bool(*b),
                _ => continue,
            };
            self.check_comparable(BinaryOp::Eq, left, &Expr::Literal(literal, name.at))?;
        }
        Ok(())
    }

    pub(super) fn is_list(&self, expr: &Expr) -> bool {
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
}

pub(super) fn has_aggregate(expr: &Expr) -> bool {
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

pub(super) fn binary_sql(op: BinaryOp) -> &'static str {
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

pub(super) fn literal_sql(literal: &Literal) -> String {
    match literal {
        Literal::Null => "NULL".to_owned(),
        Literal::Bool(b) => b.to_string(),
        Literal::Int(n) => n.to_string(),
        Literal::Float(f) => format!("{f:?}"),
        Literal::Str(s) => string_literal(s),
    }
}

/// The operands of a chain of one operator: `a AND (b AND c)` → a, b, c.
fn same_op_operands<'e>(op: BinaryOp, expr: &'e Expr, out: &mut Vec<&'e Expr>) {
    match expr {
        Expr::Binary(this, left, right) if *this == op => {
            same_op_operands(op, left, out);
            same_op_operands(op, right, out);
        }
        other => out.push(other),
    }
}

/// The kinds of values a comparison tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Text,
    Number,
    Bool,
}

impl Kind {
    fn named(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Number => "a number",
            Kind::Bool => "a boolean",
        }
    }
}
