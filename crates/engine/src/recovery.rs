//! On open: finish or drop the writes a crash interrupted, from their sidecars (the
//! protocol and its recovery rules live with the commit protocol in `tributary_fold`).

use snafu::ResultExt;
use tributary_fold::intent::{may_be_running, Intent, RECOVERY_DIR};
use tributary_fold::{recover_intent, Recovered};

use crate::error::{Result, StorageSnafu};
use crate::graph::Graph;

impl Graph {
    /// Resolve every sidecar whose writer is gone. Runs on open; safe to run again.
    pub async fn recover(&self) -> Result<Vec<Recovered>> {
        let mut report = Vec::new();
        for name in self.store.list(RECOVERY_DIR).await.context(StorageSnafu)? {
            let Some(id) = name.strip_suffix(".json") else {
                continue;
            };
            let path = Intent::sidecar_path(id);
            let Some(bytes) = self.store.get(&path).await.context(StorageSnafu)? else {
                continue;
            };
            let intent = Intent::from_bytes(id, &bytes)?;
            let age = self
                .store
                .modified_at(&path)
                .await
                .context(StorageSnafu)?
                .and_then(|t| std::time::SystemTime::now().duration_since(t).ok());
            if may_be_running(&intent, age) {
                report.push(Recovered::InFlight { intent: intent.id });
                continue;
            }
            let queue = self.write_queue(&intent.branch).await;
            let _turn = queue.lock().await;
            match recover_intent(self.target(), &intent).await {
                Ok(outcome) => {
                    tracing::info!(?outcome, "resolved an interrupted write");
                    self.store.delete(&path).await.context(StorageSnafu)?;
                    report.push(outcome);
                }
                Err(error) => {
                    tracing::error!(%error, intent = %intent.id, "could not resolve an interrupted write; keeping its sidecar");
                    report.push(Recovered::Failed {
                        intent: intent.id,
                        error: error.to_string(),
                    });
                }
            }
        }
        Ok(report)
    }
}
