//! Finishing or dropping the writes a crash, an error or a dead process interrupted, from
//! their sidecars (the protocol and its recovery rules live with the commit protocol in
//! `tributary_write`).
//!
//! Recovery is a writer's job: every load and fold resolves what is left before it writes
//! (reads never write). Several processes may try at once, so each takes a claim on the
//! intent that the store arbitrates (put-if-absent) before touching it.

use snafu::ResultExt;
use tributary_write::intent::{
    may_be_running, owner_may_be_running, InFlight, Intent, Owner, RECOVERY_DIR,
};
use tributary_write::{recover_intent, Recovered};

use crate::error::{Result, StorageSnafu};
use crate::graph::Graph;
use tributary_publisher::BranchName;

impl Graph {
    /// Resolve every sidecar whose writer is gone. Safe to run at any time, from any
    /// number of processes.
    pub async fn recover(&self) -> Result<Vec<Recovered>> {
        self.recover_intents(None).await
    }

    /// [`Graph::recover`] for a writer that holds the write turn of `held_branch`.
    pub(crate) async fn recover_intents(
        &self,
        held_branch: Option<&BranchName>,
    ) -> Result<Vec<Recovered>> {
        let mut report = Vec::new();
        let names = self.store.list(RECOVERY_DIR).await.context(StorageSnafu)?;
        for name in &names {
            let Some(id) = name.strip_suffix(".json") else {
                continue;
            };
            if let Some(outcome) = self.recover_one(id, &names, held_branch).await? {
                report.push(outcome);
            }
        }
        Ok(report)
    }

    async fn recover_one(
        &self,
        id: &str,
        names: &[String],
        held_branch: Option<&BranchName>,
    ) -> Result<Option<Recovered>> {
        let path = Intent::sidecar_path(id);
        let Some(bytes) = self.store.get(&path).await.context(StorageSnafu)? else {
            return Ok(None);
        };
        let intent = match Intent::from_bytes(id, &bytes) {
            Ok(intent) => intent,
            // Never block writes on a sidecar nobody can read: report it and set it aside.
            Err(error) => {
                tracing::error!(%error, sidecar = path, "unreadable recovery sidecar; set aside");
                let aside = format!("{RECOVERY_DIR}/{id}.unreadable");
                self.store.put(&aside, bytes).await.context(StorageSnafu)?;
                self.store.delete(&path).await.context(StorageSnafu)?;
                return Ok(Some(Recovered::Failed {
                    intent: id.to_owned(),
                    error: error.to_string(),
                }));
            }
        };
        // A writer resolves the intents of its own branch only: waiting for another
        // branch's queue while holding its own could deadlock with a writer there.
        if held_branch.is_some_and(|held| *held != intent.branch) {
            return Ok(None);
        }
        let age = self.age_of(&path).await?;
        if may_be_running(&intent, age) {
            return Ok(Some(Recovered::InFlight { intent: intent.id }));
        }
        // The branch's write turn first, then the claim: claims are then only ever taken
        // by the branch's one writer, so a claim held here is never mistaken for one in
        // flight by a write that then goes ahead of it.
        let turn = match held_branch {
            Some(_) => None,
            None => Some(self.write_turn(&intent.branch).await?),
        };
        let outcome = self.resolve_claimed(id, &path, names, intent).await;
        if let Some(turn) = turn {
            turn.end().await;
        }
        outcome
    }

    /// Claim intent `id` and resolve it; the caller holds its branch's write turn.
    async fn resolve_claimed(
        &self,
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
        let catalog = self.catalog();
        let outcome = match recover_intent(self.target(&catalog), &intent).await {
            Ok(outcome) => {
                tracing::info!(?outcome, "resolved an interrupted write");
                self.store.delete(path).await.context(StorageSnafu)?;
                outcome
            }
            Err(error) => {
                tracing::error!(%error, intent = %intent.id, "could not resolve an interrupted write; keeping its sidecar");
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
