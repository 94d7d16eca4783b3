//! Every place the code tells Lance errors apart by their message rather than their type,
//! and how a Lance error is worded for a user. Lance 14 has no typed accessor for these
//! cases; each match is pinned by a surface guard (`tests/integration/lance_surface_guards.rs`)
//! so an upgrade that rewords one fails there, not in production.

/// A fence Lance reports as an I/O error, not with a `fence_reason`: a writer open that
/// lost the epoch race, and `close` of a writer another one fenced.
pub fn is_untyped_fence(error: &lance::Error) -> bool {
    let text = error.to_string();
    text.contains("another writer claimed epoch") || text.contains("Writer fenced")
}

/// A writer's claim of a shard that was sealed (its table's streaming was removed).
pub fn is_sealed_shard(error: &lance::Error) -> bool {
    error.to_string().contains("is sealed; refusing claim")
}

/// Enrolling a table whose MemWAL index exists already (the idempotent case).
pub fn is_already_enrolled(error: &lance::Error) -> bool {
    error.to_string().contains("already initialized")
}

/// A fold's compaction mark refused because another fold marked those generations first.
pub fn is_stale_compaction(error: &lance::Error) -> bool {
    error.to_string().contains("Stale SSTable compaction")
}

/// A read that failed on the files themselves, not on what was asked: a file missing, or
/// one whose bytes do not decode (Lance reports a damaged file as an I/O error with the
/// decoder's words: "failed to decode Protobuf message", "Requested range was invalid"),
/// or a store that refused or could not be reached. Pinned by the test that damages a
/// table's data file (`check::a_check_names_every_damaged_file…`).
pub fn is_file_failure(error: &lance::Error) -> bool {
    if matches!(
        error,
        lance::Error::NotFound { .. }
            | lance::Error::DatasetNotFound { .. }
            | lance::Error::CorruptFile { .. }
    ) || crate::store_access_kind(error).is_some()
    {
        return true;
    }
    let text = error.to_string();
    text.contains("failed to decode Protobuf") || text.contains("Requested range was invalid")
}

/// A filter or projection naming a column the table does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    pub field: String,
    /// The column DataFusion suggests, if any.
    pub suggestion: Option<String>,
}

/// The unknown column of a planning error ("No field named agee. Did you mean 'age'?").
pub fn unknown_field(error: &lance::Error) -> Option<UnknownField> {
    let text = error.to_string();
    let rest = &text[text.find("No field named ")? + "No field named ".len()..];
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '"' || c == '.'))
        .unwrap_or(rest.len());
    let field = rest[..end].trim_end_matches('.').trim_matches('"');
    if field.is_empty() {
        return None;
    }
    let suggestion = rest
        .find("Did you mean '")
        .map(|at| &rest[at + "Did you mean '".len()..])
        .and_then(|s| s.find('\'').map(|end| s[..end].to_owned()));
    Some(UnknownField {
        field: field.to_owned(),
        suggestion,
    })
}

/// A Lance error as a user should read it: what went wrong, without the source location
/// Lance appends (`…/lance-14.0.2/src/dataset/scanner.rs:839:33`).
pub fn user_message(error: &lance::Error) -> String {
    without_location(&error.to_string())
}

/// `text` without a trailing `, <file>.rs:<line>:<column>` (repeated when errors nest).
fn without_location(text: &str) -> String {
    let mut text = text.trim_end();
    while let Some(comma) = text.rfind(", ") {
        let tail = &text[comma + 2..];
        let mut parts = tail.rsplitn(3, ':');
        let (column, line, file) = (parts.next(), parts.next(), parts.next());
        let is_location = matches!(
            (column, line, file),
            (Some(c), Some(l), Some(f))
                if f.ends_with(".rs")
                    && c.chars().all(|ch| ch.is_ascii_digit())
                    && l.chars().all(|ch| ch.is_ascii_digit())
        );
        if !is_location {
            break;
        }
        text = text[..comma].trim_end();
    }
    text.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_removed_and_nothing_else() {
        assert_eq!(
            without_location(
                "Invalid user input: bad, /x/lance-14.0.2/src/dataset/scanner.rs:839:33"
            ),
            "Invalid user input: bad"
        );
        assert_eq!(without_location("a: b, src/a.rs:1:2, src/b.rs:3:4"), "a: b");
        assert_eq!(without_location("ratio 1, 2: three"), "ratio 1, 2: three");
    }
}
