//! The name a user probably meant: for "unknown type" and "unknown field" messages.

/// The candidate closest to `name` by edit distance (ignoring case), when it is close
/// enough to be a slip: at most a third of the name's length, and at least one edit.
pub fn nearest_name<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let wanted = name.to_lowercase();
    let allowed = (wanted.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|candidate| (distance(&wanted, &candidate.to_lowercase()), candidate))
        .filter(|&(d, _)| d <= allowed)
        .min_by_key(|&(d, _)| d)
        .map(|(_, candidate)| candidate)
}

/// Edit distance over characters where swapping two neighbours is one edit (`nmae` is
/// one slip from `name`): the optimal string alignment distance.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::nearest_name;

    #[test]
    fn a_slip_finds_the_name_and_a_stranger_finds_none() {
        let names = ["Person", "Company", "WorksAt", "Knows"];
        assert_eq!(nearest_name("Persn", names), Some("Person"));
        assert_eq!(nearest_name("person", names), Some("Person"));
        assert_eq!(nearest_name("Worksat", names), Some("WorksAt"));
        assert_eq!(nearest_name("Compny", names), Some("Company"));
        assert_eq!(nearest_name("nmae", ["name", "age", "email"]), Some("name"));
        assert_eq!(nearest_name("Invoice", names), None);
        assert_eq!(nearest_name("", names), None);
    }
}
