//! Finishing or dropping the writes a crash, an error or a dead process interrupted, from
//! their intents (the pipeline and the recovery of staged writes live in
//! `tributary_write::commit`; a schema change's, a branch create's and a delete's
//! recovery are here, beside their writes).
//!
//! Recovery is a writer's job: every write turn resolves its branch's intents before the
//! write begins (reads never write). Several processes may try at once, so each takes a
//! claim on the intent that the store arbitrates (put-if-absent) before touching it.

use snafu::ResultExt;
use tributary_write::intent::{
    may_be_running, owner_may_be_running, InFlight, Intent, IntentKind, Owner, RECOVERY_DIR,
};
use tributary_write::{recover_intent, Recovered};

use crate::error::{Result, StorageSnafu};
use crate::graph::{Graph, WriteTurn};
use tributary_publisher::BranchName;

impl Graph {
    /// Resolve every intent whose writer is gone, each in its branch's write turn (which
    /// resolves the branch's intents as it begins). Safe to run at any time, from any
    /// number of processes.
    pub async fn recover(&self) -> Result<Vec<Recovered>> {
        let mut report = Vec::new();
        let mut branches = std::collections::BTreeSet::new();
        let (_names, intents) = self.intents(&mut report).await?;
        for (_id, path, intent) in intents {
            // Not waited for: a write still running resolves its own intent.
            if may_be_running(&intent, self.age_of(&path).await?) {
                report.push(Recovered::InFlight { intent: intent.id });
            } else {
                branches.insert(intent.branch);
            }
        }
        for branch in branches {
            let turn = self.write_turn(&branch).await?;
            report.extend(turn.recovered.iter().cloned());
            turn.end().await;
        }
        Ok(report)
    }

    /// Resolve the intents of `branch`, whose write turn `turn` is beginning: every
    /// write of the branch starts from a settled head. One dispatch on the intent's kind.
    pub(crate) async fn resolve_intents(
        &self,
        turn: &mut WriteTurn,
        branch: &BranchName,
    ) -> Result<Vec<Recovered>> {
        let mut report = Vec::new();
        let (names, intents) = self.intents(&mut report).await?;
        for (id, path, intent) in intents {
            // A writer resolves the intents of its own branch only: waiting for another
            // branch's turn while holding its own could deadlock with a writer there.
            if intent.branch != *branch {
                continue;
            }
            if may_be_running(&intent, self.age_of(&path).await?) {
                report.push(Recovered::InFlight { intent: intent.id });
                continue;
            }
            if let Some(outcome) = self
                .resolve_claimed(turn, &id, &path, &names, intent)
                .await?
            {
                report.push(outcome);
            }
        }
        Ok(report)
    }

    /// The names under the intents' folder (claims included), and every intent there
    /// with its id and path; unreadable ones are set aside and reported.
    async fn intents(
        &self,
        report: &mut Vec<Recovered>,
    ) -> Result<(Vec<String>, Vec<(String, String, Intent)>)> {
        let names = self.store.list(RECOVERY_DIR).await.context(StorageSnafu)?;
        let mut intents = Vec::new();
        for name in &names {
            let Some(id) = name.strip_suffix(".json") else {
                continue;
            };
            let path = Intent::sidecar_path(id);
            if let Some(intent) = self.read_intent(id, &path, report).await? {
                intents.push((id.to_owned(), path, intent));
            }
        }
        Ok((names, intents))
    }

    /// The intent `id`, or `None` when it is gone; one nobody can read is set aside
    /// (reported as failed) so that it never blocks writes.
    async fn read_intent(
        &self,
        id: &str,
        path: &str,
        report: &mut Vec<Recovered>,
    ) -> Result<Option<Intent>> {
        let Some(bytes) = self.store.get(path).await.context(StorageSnafu)? else {
            return Ok(None);
        };
        match Intent::from_bytes(id, &bytes) {
            Ok(intent) => Ok(Some(intent)),
            Err(error) => {
                tracing::error!(%error, intent = path, "unreadable intent; set aside");
                let aside = format!("{RECOVERY_DIR}/{id}.unreadable");
                self.store.put(&aside, bytes).await.context(StorageSnafu)?;
                self.store.delete(path).await.context(StorageSnafu)?;
                report.push(Recovered::Failed {
                    intent: id.to_owned(),
                    error: error.to_string(),
                });
                Ok(None)
            }
        }
    }

    /// Claim intent `id` and resolve it by its kind; the caller holds its branch's turn.
    async fn resolve_claimed(
        &self,
        turn: &mut WriteTurn,
        id: &str,
        path: &str,
        names: &[String],
        intent: Intent,
    ) -> Result<Option<Recovered>> {
        let Some((claim, _claimed)) = self.claim_intent(id, names).await? else {
            return Ok(Some(Recovered::InFlight { intent: intent.id }));
        };
        // Another process may have finished it between our listing and our claim.
        if self.store.get(path).await.context(StorageSnafu)?.is_none() {
            self.release_claims(id, &claim).await;
            return Ok(None);
        }
        let resolved = match &intent.kind {
            IntentKind::Load | IntentKind::Fold | IntentKind::Merge { .. } => {
                let catalog = turn.catalog.clone();
                // A test stops the resolution here, as a store failing it would.
                fail::fail_point!("recovery::resolve", |_| {
                    Err(crate::Error::from(tributary_write::Error::Injected {
                        point: "recovery::resolve".to_owned(),
                    }))
                });
                recover_intent(self.target(&catalog), &intent)
                    .await
                    .map_err(crate::Error::from)
            }
            // Boxed: finishing a change folds, and every write turn's future would
            // otherwise hold a whole schema change's (a fold's inside it).
            IntentKind::Schema { schema } => {
                let schema = schema.clone();
                futures::FutureExt::boxed(self.finish_schema_change(turn, &intent, schema)).await
            }
            IntentKind::Branch { .. } => self.drop_branch_create(&intent).await,
            IntentKind::Delete { head } => self.finish_branch_delete(&intent, head).await,
        };
        // A write left committed to its tables but unpublished holds every write of its
        // branch until it is resolved: a write staged on the head, which does not pin
        // those versions, would commit over them, and Lance rebases its inserts unchecked
        // (its indexed merge carries no filter of inserted keys), doubling a key. A schema
        // change left half-applied likewise: a write would meet its unpublished columns.
        let resolved = match (resolved, &intent.kind) {
            (
                Err(error),
                IntentKind::Schema { .. }
                | IntentKind::Load
                | IntentKind::Fold
                | IntentKind::Merge { .. },
            ) => {
                tracing::error!(%error, intent = %intent.id, "could not resolve an interrupted write; the branch's writes wait for it");
                self.release_claims(id, &claim).await;
                return Err(error);
            }
            (resolved, _) => resolved,
        };
        let outcome = match resolved {
            Ok(outcome) => {
                tracing::info!(?outcome, "resolved an interrupted write");
                self.store.delete(path).await.context(StorageSnafu)?;
                outcome
            }
            Err(error) => {
                tracing::error!(%error, intent = %intent.id, "could not resolve an interrupted write; keeping its intent");
                Recovered::Failed {
                    intent: intent.id.clone(),
                    error: error.to_string(),
                }
            }
        };
        self.release_claims(id, &claim).await;
        Ok(Some(outcome))
    }

    async fn age_of(&self, path: &str) -> Result<Option<std::time::Duration>> {
        Ok(self
            .store
            .modified_at(path)
            .await
            .context(StorageSnafu)?
            .and_then(|t| std::time::SystemTime::now().duration_since(t).ok()))
    }

    /// Take the claim on intent `id`: `<id>.claim-<n>` created with put-if-absent, so of
    /// several processes exactly one holds claim `n`. A claim whose holder is gone is taken
    /// over by creating `n + 1` (again arbitrated by the store). `None`: someone else holds it.
    async fn claim_intent(&self, id: &str, names: &[String]) -> Result<Option<(String, InFlight)>> {
        let prefix = format!("{id}.claim-");
        let current = names
            .iter()
            .filter_map(|n| n.strip_prefix(&prefix)?.parse::<u64>().ok())
            .max();
        let next = match current {
            None => 0,
            Some(n) => {
                let held = format!("{RECOVERY_DIR}/{prefix}{n}");
                if let Some(bytes) = self.store.get(&held).await.context(StorageSnafu)? {
                    let owner: Option<Owner> = serde_json::from_slice(&bytes).ok();
                    let age = self.age_of(&held).await?;
                    if owner_may_be_running(owner.as_ref(), &held, age) {
                        return Ok(None);
                    }
                }
                n + 1
            }
        };
        let claim = format!("{RECOVERY_DIR}/{prefix}{next}");
        // Marked in flight first, so a task of this process that finds the claim knows
        // its holder is alive.
        let in_flight = InFlight::start(&claim);
        let owner = serde_json::to_vec(&Owner::this_process()).unwrap_or_default();
        let won = self
            .store
            .put_if_absent(&claim, owner)
            .await
            .context(StorageSnafu)?;
        Ok(won.then_some((claim, in_flight)))
    }

    /// Remove every claim of intent `id` (best effort: a claim left behind only makes the
    /// next recoverer take it over).
    async fn release_claims(&self, id: &str, mine: &str) {
        let prefix = format!("{id}.claim-");
        let names = self.store.list(RECOVERY_DIR).await.unwrap_or_default();
        for name in names.iter().filter(|n| n.starts_with(&prefix)) {
            let path = format!("{RECOVERY_DIR}/{name}");
            if path != mine {
                let _ = self.store.delete(&path).await;
            }
        }
        if let Err(error) = self.store.delete(mine).await {
            tracing::warn!(%error, claim = mine, "could not release a recovery claim");
        }
    }
}
