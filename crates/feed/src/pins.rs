//! Pins: named snapshots whose table versions cleanup keeps until they are unpinned. One
//! small object per pin under `__pins/`, so pins survive restarts and every process of the
//! graph sees them.

use serde::{Deserialize, Serialize};
use snafu::{ensure, OptionExt, ResultExt};
use tributary_publisher::{BranchName, CommitId, CommitRecord};
use tributary_storage::{layout, GraphStore};

use crate::error::{
    NoPinSnafu, PinNameSnafu, PinTakenSnafu, PinUnreadableSnafu, Result, StorageSnafu,
};

/// A named snapshot kept from cleanup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Pin {
    pub name: String,
    pub commit: CommitId,
    pub branch: BranchName,
    /// When the pin was made (ISO 8601, UTC).
    pub pinned_at: String,
}

fn pin_path(name: &str) -> String {
    format!("{}/{name}.json", layout::PINS)
}

fn check_name(name: &str) -> Result<()> {
    let usable = (1..=64).contains(&name.len())
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    ensure!(usable, PinNameSnafu { name });
    Ok(())
}

/// Pin `commit` as `name`. Pinning the same commit under the same name again is a no-op;
/// a name holding another commit is refused (unpin it first), so a pin never moves under
/// a reader that relies on it.
pub async fn pin(store: &GraphStore, name: &str, commit: &CommitRecord) -> Result<Pin> {
    check_name(name)?;
    let pin = Pin {
        name: name.to_owned(),
        commit: commit.id.clone(),
        branch: commit.branch.clone(),
        pinned_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
    };
    let bytes = serde_json::to_vec(&pin).context(PinUnreadableSnafu {
        name,
        path: pin_path(name),
    })?;
    let made = store
        .put_if_absent(&pin_path(name), bytes)
        .await
        .context(StorageSnafu {
            action: "write the pin",
        })?;
    if made {
        return Ok(pin);
    }
    let held = read(store, name).await?.context(NoPinSnafu { name })?;
    ensure!(
        held.commit == commit.id,
        PinTakenSnafu {
            name,
            held: held.commit
        }
    );
    Ok(held)
}

/// Remove the pin `name`; its versions go at the next cleanup that no longer needs them.
pub async fn unpin(store: &GraphStore, name: &str) -> Result<Pin> {
    check_name(name)?;
    let held = read(store, name).await?.context(NoPinSnafu { name })?;
    store.delete(&pin_path(name)).await.context(StorageSnafu {
        action: "remove the pin",
    })?;
    Ok(held)
}

/// Every pin of the graph, by name.
pub async fn pins(store: &GraphStore) -> Result<Vec<Pin>> {
    let names = store.list(layout::PINS).await.context(StorageSnafu {
        action: "list the pins",
    })?;
    let mut pins = Vec::new();
    for name in names {
        let Some(name) = name.strip_suffix(".json") else {
            continue;
        };
        // A pin removed between the listing and the read is simply gone.
        if let Some(pin) = read(store, name).await? {
            pins.push(pin);
        }
    }
    pins.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(pins)
}

async fn read(store: &GraphStore, name: &str) -> Result<Option<Pin>> {
    let path = pin_path(name);
    let Some(bytes) = store.get(&path).await.context(StorageSnafu {
        action: "read the pin",
    })?
    else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .context(PinUnreadableSnafu { name, path })
}
