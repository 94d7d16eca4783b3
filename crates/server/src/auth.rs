//! Bearer tokens: `TOKEN SCOPE GRAPH` per line: `read` or `write` a graph id or `*`, or
//! `metrics *` (only `/metrics`, which covers every graph; read and write tokens do not
//! reach it).

use tributary::ErrorKind;

use crate::error::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Read,
    Write,
    /// `/metrics` only: no graph's data, every graph's gauges.
    Metrics,
}

#[derive(Clone)]
struct Grant {
    /// Its line in the tokens file: how logs name the token.
    line: usize,
    token: String,
    scope: Scope,
    /// `None` for `*`.
    graph: Option<String>,
}

/// The tokens a server accepts. Never printed: `Debug` shows only how many there are.
#[derive(Clone, Default)]
pub struct Tokens {
    grants: Vec<Grant>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokens({} grants)", self.grants.len())
    }
}

impl Tokens {
    /// Parse a tokens file; blank lines and `#` comments are skipped. Errors name the line
    /// (never the token).
    pub fn parse(text: &str) -> Result<Tokens, String> {
        let mut grants = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = index + 1;
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [token, scope, graph] = fields.as_slice() else {
                return Err(format!(
                    "line {at}: expected `TOKEN SCOPE GRAPH`, found {} fields",
                    fields.len()
                ));
            };
            let scope = match *scope {
                "read" => Scope::Read,
                "write" => Scope::Write,
                "metrics" if *graph == "*" => Scope::Metrics,
                "metrics" => {
                    return Err(format!(
                        "line {at}: a metrics grant covers every graph: write `*`, not `{graph}`"
                    ))
                }
                other => {
                    return Err(format!(
                        "line {at}: scope must be `read`, `write` or `metrics`, not `{other}`"
                    ))
                }
            };
            grants.push(Grant {
                line: at,
                token: (*token).to_owned(),
                scope,
                graph: (*graph != "*").then(|| (*graph).to_owned()),
            });
        }
        if grants.is_empty() {
            return Err("the tokens file grants nothing".into());
        }
        Ok(Tokens { grants })
    }

    /// How the logs name `token`: the line of the tokens file that first grants it, which
    /// gives nothing of the token away; `None` for a token the file does not hold.
    pub fn line_of(&self, token: &str) -> Option<usize> {
        self.grants
            .iter()
            .find(|g| constant_time_eq(g.token.as_bytes(), token.as_bytes()))
            .map(|g| g.line)
    }

    /// May the bearer of `token` act with `scope` on `graph` (`None`: no particular graph)?
    /// A write grant also reads; a metrics grant is for `/metrics` alone.
    pub fn check(
        &self,
        token: Option<&str>,
        scope: Scope,
        graph: Option<&str>,
    ) -> Result<(), ApiError> {
        let Some(token) = token else {
            return Err(unauthorized("a bearer token is required"));
        };
        let mine: Vec<&Grant> = self
            .grants
            .iter()
            .filter(|g| constant_time_eq(g.token.as_bytes(), token.as_bytes()))
            .collect();
        if mine.is_empty() {
            return Err(unauthorized("the bearer token is not valid"));
        }
        let allowed = mine.iter().any(|g| {
            // A write grant also reads; a metrics grant covers /metrics and nothing else.
            let covers = matches!(
                (g.scope, scope),
                (Scope::Read | Scope::Write, Scope::Read)
                    | (Scope::Write, Scope::Write)
                    | (Scope::Metrics, Scope::Metrics)
            );
            covers
                && match (graph, &g.graph) {
                    (_, None) | (None, _) => true,
                    (Some(wanted), Some(granted)) => wanted == granted,
                }
        });
        if allowed {
            Ok(())
        } else {
            let message = match scope {
                Scope::Metrics => {
                    "the token may not read /metrics: it takes a `TOKEN metrics *` grant".to_owned()
                }
                Scope::Read | Scope::Write => format!(
                    "the token may not {} {}",
                    if scope == Scope::Read {
                        "read"
                    } else {
                        "write"
                    },
                    graph.map_or("here".to_owned(), |g| format!("graph `{g}`"))
                ),
            };
            Err(ApiError::new(ErrorKind::Forbidden, message))
        }
    }
}

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(ErrorKind::Unauthorized, message)
}

/// Compare without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
