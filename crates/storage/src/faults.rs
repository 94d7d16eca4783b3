//! An object-store wrapper that adds latency and injects the failures a real store shows:
//! a request refused before it is applied (a 5xx), one that times out unapplied, and one
//! applied whose response is lost. Tests and benchmarks put it under a graph (beside the
//! counting wrapper) to show every write path stays correct on a store that fails.
//!
//! A lost response on a conditional create comes back the two ways a client can see it:
//! as an error, or (the client retried) as "already exists" for the object it wrote itself.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

/// One kind of injected failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// Refused before it is applied, as a 5xx the client gave up retrying.
    Refused,
    /// Not applied; the caller waits, then hears a timeout.
    TimedOut,
    /// Applied, then the response is lost: the caller hears an error.
    LostResponse,
    /// A conditional create applied whose response was lost and whose retry found the
    /// object it wrote itself: the caller hears "already exists". Other writes lose their
    /// response as [`FaultKind::LostResponse`].
    LostThenRetried,
    /// Refused by a local disk with no space left (ENOSPC), as the local store reports it.
    DiskFull,
}

/// A rule that fails the next `times` operations whose path contains `pattern`.
#[derive(Debug, Clone)]
struct Rule {
    pattern: String,
    kind: FaultKind,
    writes_only: bool,
    times: u64,
}

/// What a [`FaultStore`] injects. Cheap to clone; every clone steers the same stores, so a
/// test can turn faults on and off while a graph runs.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    state: Arc<FaultState>,
}

#[derive(Debug, Default)]
struct FaultState {
    latency_micros: AtomicU64,
    /// Chance per operation of a random fault, in parts per million.
    rate_ppm: AtomicU64,
    seed: AtomicU64,
    draws: AtomicU64,
    rules: Mutex<Vec<Rule>>,
    injected: Mutex<BTreeMap<FaultKind, u64>>,
}

impl Faults {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add `latency` before every operation.
    pub fn with_latency(self, latency: Duration) -> Self {
        self.state
            .latency_micros
            .store(latency.as_micros() as u64, Ordering::Relaxed);
        self
    }

    /// Fail each operation with probability `rate` (0.0 to 1.0), picking the kind of fault
    /// by a counter seeded with `seed`: the same seed and order of operations inject the
    /// same faults.
    pub fn with_random(self, rate: f64, seed: u64) -> Self {
        self.set_rate(rate);
        self.state.seed.store(seed, Ordering::Relaxed);
        self
    }

    /// Change the random fault rate (0 turns random faults off).
    pub fn set_rate(&self, rate: f64) {
        let ppm = (rate.clamp(0.0, 1.0) * 1_000_000.0) as u64;
        self.state.rate_ppm.store(ppm, Ordering::Relaxed);
    }

    /// Fail the next `times` operations whose path contains `pattern` with `kind`. Writes
    /// only when `kind` is one a read cannot show (a lost response, a full disk).
    pub fn fail_next(&self, pattern: &str, kind: FaultKind, times: u64) {
        let writes_only = matches!(
            kind,
            FaultKind::LostResponse | FaultKind::LostThenRetried | FaultKind::DiskFull
        );
        self.rules().push(Rule {
            pattern: pattern.to_owned(),
            kind,
            writes_only,
            times,
        });
    }

    /// Drop the rules of [`Faults::fail_next`] that have not struck yet.
    pub fn clear_rules(&self) {
        self.rules().clear();
    }

    /// How many faults of each kind were injected so far.
    pub fn injected(&self) -> BTreeMap<FaultKind, u64> {
        self.state
            .injected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn rules(&self) -> std::sync::MutexGuard<'_, Vec<Rule>> {
        self.state.rules.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn latency(&self) -> Duration {
        Duration::from_micros(self.state.latency_micros.load(Ordering::Relaxed))
    }

    /// The fault for one operation on `path`, if any.
    fn draw(&self, path: &Path, write: bool) -> Option<FaultKind> {
        let fault = self
            .ruled(path.as_ref(), write)
            .or_else(|| self.random(write))?;
        *self
            .state
            .injected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(fault)
            .or_default() += 1;
        Some(fault)
    }

    fn ruled(&self, path: &str, write: bool) -> Option<FaultKind> {
        let mut rules = self.rules();
        let rule = rules.iter_mut().find(|rule| {
            rule.times > 0 && (write || !rule.writes_only) && path.contains(&rule.pattern)
        })?;
        rule.times -= 1;
        Some(rule.kind)
    }

    fn random(&self, write: bool) -> Option<FaultKind> {
        let rate = self.state.rate_ppm.load(Ordering::Relaxed);
        if rate == 0 {
            return None;
        }
        let n = self.state.draws.fetch_add(1, Ordering::Relaxed);
        let roll = splitmix(self.state.seed.load(Ordering::Relaxed) ^ n);
        if roll % 1_000_000 >= rate {
            return None;
        }
        let kinds: &[FaultKind] = if write {
            &[
                FaultKind::Refused,
                FaultKind::TimedOut,
                FaultKind::LostResponse,
                FaultKind::LostThenRetried,
            ]
        } else {
            &[FaultKind::Refused, FaultKind::TimedOut]
        };
        Some(kinds[((roll >> 32) % kinds.len() as u64) as usize])
    }
}

fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn injected(kind: FaultKind, path: &Path) -> object_store::Error {
    let what = match kind {
        FaultKind::Refused => "503 Slow Down (injected)",
        FaultKind::TimedOut => "operation timed out (injected)",
        FaultKind::LostResponse | FaultKind::LostThenRetried => {
            "connection reset after the request was sent (injected)"
        }
        // As the local store reports ENOSPC: its own error with the OS's below it.
        FaultKind::DiskFull => {
            return object_store::Error::Generic {
                store: "LocalFileSystem",
                source: Box::new(std::io::Error::from_raw_os_error(28)),
            }
        }
    };
    object_store::Error::Generic {
        store: "faults",
        source: format!("{what}: {path}").into(),
    }
}

/// Forwards every call to `inner`, after the latency and with the faults of a [`Faults`].
#[derive(Debug)]
pub struct FaultStore {
    inner: Arc<dyn ObjectStore>,
    faults: Faults,
}

impl FaultStore {
    pub fn new(inner: Arc<dyn ObjectStore>, faults: Faults) -> Self {
        Self { inner, faults }
    }

    /// Wait the latency and fail before the operation if a fault says so; returns a fault
    /// that strikes after the operation is applied.
    async fn before(&self, path: &Path, write: bool) -> object_store::Result<Option<FaultKind>> {
        let latency = self.faults.latency();
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        match self.faults.draw(path, write) {
            Some(kind @ (FaultKind::Refused | FaultKind::DiskFull)) => Err(injected(kind, path)),
            Some(kind @ FaultKind::TimedOut) => {
                tokio::time::sleep(Duration::from_millis(50) + latency * 4).await;
                Err(injected(kind, path))
            }
            other => Ok(other),
        }
    }

    /// `inner`, a listing of `prefix`, after the latency and with a fault if one is drawn.
    fn faulted_listing(
        &self,
        prefix: Option<&Path>,
        inner: BoxStream<'static, object_store::Result<ObjectMeta>>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let path = prefix.cloned().unwrap_or_default();
        let fault = self.faults.draw(&path, false);
        let latency = self.faults.latency();
        futures::stream::once(async move {
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            match fault {
                Some(kind) => Err(injected(kind, &path)),
                None => Ok(inner),
            }
        })
        .flat_map(|result| match result {
            Ok(inner) => inner,
            Err(error) => futures::stream::once(async move { Err(error) }).boxed(),
        })
        .boxed()
    }
}

impl fmt::Display for FaultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Faults({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let create = matches!(opts.mode, PutMode::Create);
        let after = self.before(location, true).await?;
        let result = self.inner.put_opts(location, payload, opts).await?;
        match after {
            Some(FaultKind::LostThenRetried) if create => Err(object_store::Error::AlreadyExists {
                path: location.to_string(),
                source: "the retry found the object the lost request wrote (injected)".into(),
            }),
            Some(kind) => Err(injected(kind, location)),
            None => Ok(result),
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        // Faults strike at the start of an upload; its parts go through unharmed.
        match self.before(location, false).await? {
            Some(kind) => Err(injected(kind, location)),
            None => self.inner.put_multipart_opts(location, opts).await,
        }
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.before(location, false).await?;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.before(location, false).await?;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        // Deletes are retried by whoever asked (cleanup runs again); a lost delete
        // response is the same as a success, so deletes only see latency.
        let latency = self.faults.latency();
        let delayed = locations
            .then(move |location| async move {
                if !latency.is_zero() {
                    tokio::time::sleep(latency).await;
                }
                location
            })
            .boxed();
        self.inner.delete_stream(delayed)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.faulted_listing(prefix, self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.faulted_listing(prefix, self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.before(prefix.unwrap_or(&Path::default()), false)
            .await?;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        match self.before(to, true).await? {
            None => self.inner.copy_opts(from, to, options).await,
            Some(kind) => {
                self.inner.copy_opts(from, to, options).await?;
                Err(injected(kind, to))
            }
        }
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        match self.before(to, true).await? {
            None => self.inner.rename_opts(from, to, options).await,
            Some(kind) => {
                self.inner.rename_opts(from, to, options).await?;
                Err(injected(kind, to))
            }
        }
    }
}
