//! The crash windows of the graph writes: the points between a write's durable steps where
//! a crash leaves work for recovery. Each kind of write lists its own
//! ([`CrashWindow::all`]); tests stop a write in each through a failpoint of the window's
//! name (inert unless configured), and recovery must leave the write landed once or not
//! at all.

use std::fmt;

use crate::error::Result;

/// A kind of graph write: what its intent records ([`crate::intent::IntentKind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    Load,
    Fold,
    Merge,
    Schema,
    /// A branch's creation.
    Branch,
    /// A branch's deletion (its "publish" removes the head).
    Delete,
}

impl WriteKind {
    pub const ALL: [WriteKind; 6] = [
        WriteKind::Load,
        WriteKind::Fold,
        WriteKind::Merge,
        WriteKind::Schema,
        WriteKind::Branch,
        WriteKind::Delete,
    ];
}

impl fmt::Display for WriteKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WriteKind::Load => "load",
            WriteKind::Fold => "fold",
            WriteKind::Merge => "merge",
            WriteKind::Schema => "schema",
            WriteKind::Branch => "branch",
            WriteKind::Delete => "delete",
        })
    }
}

/// A step of a write after which a crash is a distinct case for recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteStep {
    /// The intent is durable; no table has moved.
    BeforeTableCommits,
    /// The first table committed, the others not yet.
    BetweenTableCommits,
    /// A schema change's new columns are added, their defaults not yet filled.
    BeforeFill,
    /// Every table moved; nothing is visible yet.
    BeforePublish,
    /// Published; the intent is still there.
    BeforeIntentDelete,
}

impl WriteStep {
    fn name(self) -> &'static str {
        match self {
            WriteStep::BeforeTableCommits => "before-table-commits",
            WriteStep::BetweenTableCommits => "between-table-commits",
            WriteStep::BeforeFill => "before-fill",
            WriteStep::BeforePublish => "before-publish",
            // Named for what the intent was first called; tests and scripts use the name.
            WriteStep::BeforeIntentDelete => "before-sidecar-delete",
        }
    }
}

/// One crash window of one kind of write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashWindow {
    pub kind: WriteKind,
    pub step: WriteStep,
}

impl CrashWindow {
    /// The steps at which a write of `kind` can stop with work left for recovery. A new
    /// kind of write must say its own here (the match has no default arm).
    pub fn steps(kind: WriteKind) -> &'static [WriteStep] {
        match kind {
            WriteKind::Load | WriteKind::Fold | WriteKind::Merge => &[
                WriteStep::BeforeTableCommits,
                WriteStep::BetweenTableCommits,
                WriteStep::BeforePublish,
                WriteStep::BeforeIntentDelete,
            ],
            WriteKind::Schema => &[
                WriteStep::BeforeFill,
                WriteStep::BeforePublish,
                WriteStep::BeforeIntentDelete,
            ],
            WriteKind::Branch | WriteKind::Delete => {
                &[WriteStep::BeforePublish, WriteStep::BeforeIntentDelete]
            }
        }
    }

    /// Every crash window of a write of `kind`.
    pub fn all(kind: WriteKind) -> impl Iterator<Item = CrashWindow> {
        Self::steps(kind)
            .iter()
            .map(move |&step| CrashWindow { kind, step })
    }

    /// The failpoint's name: `<kind>::<step>`, e.g. `merge::before-publish`.
    pub fn name(self) -> String {
        format!("{}::{}", self.kind, self.step.name())
    }

    /// Stop here when a test configured this window's failpoint: an
    /// [`Error::Injected`] that leaves everything written so far for recovery.
    pub fn check(self) -> Result<()> {
        debug_assert!(
            Self::steps(self.kind).contains(&self.step),
            "{self:?} is not a window of its kind"
        );
        let name = self.name();
        fail::fail_point!(&name, |_| Err(crate::error::Error::Injected {
            point: name.clone()
        }));
        // Unused when the failpoints are compiled out.
        let _ = name;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_names_its_own_windows() {
        let mut names: Vec<String> = WriteKind::ALL
            .iter()
            .flat_map(|&kind| CrashWindow::all(kind))
            .map(CrashWindow::name)
            .collect();
        assert!(names.contains(&"merge::before-publish".to_owned()));
        assert!(names.contains(&"fold::before-sidecar-delete".to_owned()));
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "a window's name is its own");
        assert_eq!(count, 4 * 3 + 3 + 2 * 2);
    }
}
