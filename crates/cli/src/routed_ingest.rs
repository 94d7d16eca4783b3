//! `ingest --server A --server B`: one input, several servers that each own some of the
//! shards (`serve --shards`). Each line goes to the server owning its key's shard, over
//! one resumable stream per server (the single server's stream of `remote_ingest`), and
//! their acknowledgements are merged back into the input's line numbers.
//!
//! The lines are checked here with the graph's own schema and decoder (the ones the
//! servers use), so a line's type and key are known before it is sent; the shard of a key
//! is a server's answer (`POST /shards/{type}`), so the hash has one owner. A line that
//! names no streamed type's key (invalid, not UTF-8, or of a type without `@stream`) goes
//! to the first server, which rejects it as it would any line; under `--strict` nothing
//! after such a line is routed, and the first server stops at it with its usual message.
//! Lines go out in input order: a server that stops taking lines (paused, restarting)
//! holds up the others once its queue is full.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tributary::{Catalog, Decoder, ErrorKind, GraphOps, LineError, LineTarget};

use crate::ingest::{spawn_reader, IngestRun, LineSource};
use crate::output::Format;
use crate::remote::Remote;
use crate::remote_ingest::{print_record, renumber_line, report, stream_lines, PATIENCE};
use crate::Failure;

/// The most key bytes one `shards_of` request carries (the server takes 1 MiB).
const MAX_KEY_BYTES: usize = 256 * 1024;

/// Which server takes the lines of each shard of each streamed type.
struct Routes {
    catalog: Catalog,
    /// Per server: the shards it owns (`None`: all).
    owned: Vec<Option<Vec<u32>>>,
    /// Per streamed type: the server of each of its shards.
    owners: BTreeMap<String, Vec<usize>>,
}

impl Routes {
    /// Read the schema from the first server and each server's shards, and check that
    /// every shard of every streamed type has a server.
    async fn discover(
        remotes: &[Remote],
        urls: &[String],
        branch: &str,
    ) -> Result<Routes, Failure> {
        let mut owned = Vec::with_capacity(remotes.len());
        for remote in remotes {
            owned.push(remote.ingest_status(branch).await?.owned_shards);
        }
        let catalog = schema_of(&remotes[0]).await?;
        Routes::plan(catalog, owned, urls)
    }

    fn plan(
        catalog: Catalog,
        owned: Vec<Option<Vec<u32>>>,
        urls: &[String],
    ) -> Result<Routes, Failure> {
        let mut owners = BTreeMap::new();
        for ty in &catalog.types {
            let Some(stream) = &ty.stream else { continue };
            let count = stream.shards.unwrap_or(1).max(1);
            let mut of_shard = Vec::with_capacity(count as usize);
            for shard in 0..count {
                let mut owners = owned.iter().enumerate().filter(|(_, shards)| match shards {
                    None => true,
                    Some(shards) => shards.contains(&shard),
                });
                let owner = owners.next().map(|(server, _)| server);
                if let (Some(first), Some((second, _))) = (owner, owners.next()) {
                    return Err(Failure::usage(format!(
                        "shard {shard} of {} is owned by two of the servers given, {} and {} \
                         (a server without --shards owns every shard): give each shard one \
                         owner, or the two fence each other's writers",
                        ty.name, urls[first], urls[second]
                    )));
                }
                let Some(owner) = owner else {
                    return Err(Failure::usage(format!(
                        "shard {shard} of {} (one of {count}) has no owner among the servers \
                         given ({}): add the server started with `serve --shards` naming it",
                        ty.name,
                        urls.join(", ")
                    )));
                };
                of_shard.push(owner);
            }
            owners.insert(ty.name.clone(), of_shard);
        }
        Ok(Routes {
            catalog,
            owned,
            owners,
        })
    }

    /// Take the schema again (a change may have added a type or a field since).
    async fn refresh(&mut self, remote: &Remote, urls: &[String]) -> Result<(), Failure> {
        let catalog = schema_of(remote).await?;
        *self = Routes::plan(catalog, std::mem::take(&mut self.owned), urls)?;
        Ok(())
    }
}

async fn schema_of(remote: &Remote) -> Result<Catalog, Failure> {
    let source = remote.schema().await?;
    Catalog::parse(&source)
        .map_err(|e| Failure::internal(format!("the server's schema does not parse here: {e}")))
}

/// Which input line each server's stream carries, to number its records back.
#[derive(Default)]
struct Ledger {
    /// Lines sent to any server so far.
    routed: u64,
    servers: Vec<ServerLines>,
}

#[derive(Default)]
struct ServerLines {
    /// The input line of each of the stream's lines not yet settled, oldest first.
    unsettled: VecDeque<u64>,
    /// The stream's lines settled so far (its `through_line`).
    settled: u64,
    /// Its rows acknowledged, lines rejected and duplicates so far.
    acked: u64,
    rejected: u64,
    duplicates: u64,
}

impl Ledger {
    fn lock(ledger: &Mutex<Ledger>) -> std::sync::MutexGuard<'_, Ledger> {
        ledger.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every input line through this one is acknowledged or rejected.
    fn through_line(&self) -> u64 {
        self.servers
            .iter()
            .filter_map(|server| server.unsettled.front())
            .map(|first| first - 1)
            .fold(self.routed, u64::min)
    }

    /// Give each record of one line in `lines` (in `server`'s numbers, not yet settled)
    /// the number of its input line.
    fn renumber(&self, server: usize, lines: Option<&mut Value>) {
        let server = &self.servers[server];
        for line in lines.and_then(Value::as_array_mut).into_iter().flatten() {
            let Some(number) = line["line"].as_u64() else {
                continue;
            };
            let offset = number.saturating_sub(server.settled + 1) as usize;
            if let Some(&input) = server.unsettled.get(offset) {
                renumber_line(line, input);
            }
        }
    }

    /// One of `server`'s records, in the input's numbers.
    fn merge(&mut self, server: usize, url: &str, mut record: Value) -> Value {
        if !record.is_object() {
            return record;
        }
        self.renumber(server, record.get_mut("rejected"));
        let lines = &mut self.servers[server];
        let through = record["through_line"].as_u64().unwrap_or(lines.settled);
        let settled = record["stopped_at"]
            .as_u64()
            .map_or(through, |bad| bad.saturating_sub(1));
        lines.rejected += record["rejected"].as_array().map_or(0, Vec::len) as u64;
        let newly = settled.saturating_sub(lines.settled) as usize;
        lines.unsettled.drain(..newly.min(lines.unsettled.len()));
        lines.settled = lines.settled.max(settled);
        lines.acked = record["acked"].as_u64().unwrap_or(lines.acked);
        lines.duplicates += record["duplicates"].as_u64().unwrap_or(0);
        record["through_line"] = Value::from(self.through_line());
        record["acked"] = Value::from(self.servers.iter().map(|s| s.acked).sum::<u64>());
        record["server"] = Value::from(url);
        if let Some(object) = record.as_object_mut() {
            object.remove("stopped_at");
        }
        record
    }

    /// A stream's summary error in the input's numbers: its lines, and its message, which
    /// names the first of them.
    fn renumber_error(&self, server: usize, error: &mut Value) {
        let first = error["lines"][0]["line"].as_u64();
        self.renumber(server, error.get_mut("lines"));
        let renumbered = error["lines"][0]["line"].as_u64();
        if let (Some(old), Some(new), Some(text)) = (first, renumbered, error["error"].as_str()) {
            error["error"] = Value::from(crate::remote_ingest::renumber_text(text, old, new));
        }
    }
}

/// `ingest` over several servers: route, stream, merge, and summarise the whole input.
pub async fn run(
    remotes: Vec<Remote>,
    urls: &[String],
    args: IngestRun,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    if args.producer.is_some() {
        return Err(Failure::usage(
            "--producer numbers one stream's lines in order, so it takes one --server: \
             run a producer per server, each with the lines of that server's shards",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(twice) = urls
        .iter()
        .find(|url| !seen.insert(url.trim_end_matches('/')))
    {
        return Err(Failure::usage(format!(
            "the server {twice} is given twice (--server)"
        )));
    }
    let started = Instant::now();
    let routes = Routes::discover(&remotes, urls, &args.branch).await?;
    let ledger = Mutex::new(Ledger {
        routed: 0,
        servers: remotes.iter().map(|_| ServerLines::default()).collect(),
    });
    let max_lines = args.batch_lines.max(1);
    let mut senders = Vec::with_capacity(remotes.len());
    let mut sources = Vec::with_capacity(remotes.len());
    for _ in &remotes {
        let (sender, source) = LineSource::channel(4 * max_lines);
        senders.push(sender);
        sources.push(source);
    }
    // A stream ends before the input only when it failed: the router stops then.
    let (ended, ended_rx) = tokio::sync::watch::channel(false);
    let input = spawn_reader(&args.file)?;
    let router = Router {
        routes,
        remotes: &remotes,
        urls,
        ledger: &ledger,
        strict: args.strict,
        max_lines,
    }
    .run(input, senders, ended_rx);

    // The streams report through one channel, so the records print in the order they
    // arrive, from this task.
    let (records, mut arrived) = tokio::sync::mpsc::unbounded_channel::<(usize, Value)>();
    let streams = futures::future::join_all(remotes.iter().zip(sources).enumerate().map(
        |(server, (remote, source))| {
            let records = records.clone();
            let ended = &ended;
            let args = &args;
            async move {
                let mut forward = |record: Value| {
                    // The receiver outlives every stream.
                    let _ = records.send((server, record));
                    Ok(())
                };
                let result =
                    stream_lines(remote, Some(&urls[server]), source, args, &mut forward).await;
                if let Err(failure) = &result {
                    eprintln!("the stream to {} failed: {}", urls[server], failure.message);
                }
                ended.send_replace(true);
                result
            }
        },
    ));
    drop(records);
    let work = async { tokio::join!(router, streams) };
    tokio::pin!(work);
    let mut print = |server: usize, record: Value| {
        let merged = Ledger::lock(&ledger).merge(server, &urls[server], record);
        print_record(&merged, format, &mut *out)
    };
    let (routed, summaries) = loop {
        tokio::select! {
            Some((server, record)) = arrived.recv() => print(server, record)?,
            done = &mut work => break done,
        }
    };
    while let Ok((server, record)) = arrived.try_recv() {
        print(server, record)?;
    }

    let ledger = Ledger::lock(&ledger);
    let acked = ledger.servers.iter().map(|s| s.acked).sum::<u64>();
    let seconds = started.elapsed().as_secs_f64();
    let mut summary = json!({
        "summary": true,
        "acked": acked,
        "rejected": ledger.servers.iter().map(|s| s.rejected).sum::<u64>(),
        "duplicates": ledger.servers.iter().map(|s| s.duplicates).sum::<u64>(),
        "through_line": ledger.through_line(),
        // The servers fold in their background folders, not per stream.
        "fold_commits": null,
        "rows_folded": null,
        "servers": urls,
        "seconds": tributary_server::to_the_millisecond(seconds),
        "rows_per_s": tributary_server::rows_per_s(acked, seconds),
    });
    // The run fails as the earliest failure in the input did: the router's, or a stream's
    // (its lines renumbered by its server's ledger); a stream that broke (its server gone
    // past patience) fails it otherwise.
    let mut failure: Option<(u64, Failed)> = None;
    let mut consider = |line: u64, failed: Failed| {
        if failure.as_ref().is_none_or(|(first, _)| line < *first) {
            failure = Some((line, failed));
        }
    };
    for (server, ended) in summaries.into_iter().enumerate() {
        match ended {
            Ok(mut stream_summary) => {
                if let Some(error) = stream_summary.get_mut("error") {
                    ledger.renumber_error(server, error);
                    error["server"] = Value::from(urls[server].clone());
                    let line = error["lines"][0]["line"].as_u64().unwrap_or(u64::MAX - 1);
                    consider(line, Failed::Wire(error.clone()));
                }
            }
            Err(broken) => consider(u64::MAX, Failed::Here(broken, Some(server))),
        }
    }
    if let Err(error) = routed {
        consider(ledger.routed + 1, Failed::Here(error, None));
    }
    drop(ledger);
    match failure.map(|(_, failed)| failed) {
        None => {
            report(&summary, format, out, "the servers fold them")?;
            let count = |field: &str| summary[field].as_u64().unwrap_or(0);
            if args.fail_on_reject {
                crate::ingest::refuse_rejects(count("rejected"), None)?;
            }
            crate::ingest::nothing_written(count("acked"), count("rejected"), count("duplicates"))
        }
        Some(Failed::Wire(error)) => {
            summary["error"] = error;
            report(&summary, format, out, "the servers fold them")
        }
        Some(Failed::Here(failure, server)) => {
            let kind = failure.kind.unwrap_or(ErrorKind::Internal);
            summary["error"] = json!({"kind": kind.name(), "error": failure.message});
            if let Some(server) = server {
                summary["error"]["server"] = Value::from(urls[server].clone());
            }
            // The summary is printed for its `through_line`; the run fails as it failed.
            let _ = report(&summary, format, out, "the servers fold them");
            Err(failure)
        }
    }
}

/// Why a routed run failed: a stream's summary error (from a server), or a failure here
/// (of the stream to one server, or of the router).
enum Failed {
    Wire(Value),
    Here(Failure, Option<usize>),
}

/// Reads the input and sends each line to its server, recording where it went.
struct Router<'a> {
    routes: Routes,
    remotes: &'a [Remote],
    urls: &'a [String],
    ledger: &'a Mutex<Ledger>,
    strict: bool,
    max_lines: usize,
}

impl Router<'_> {
    /// Route until the input ends, a stream has ended (`ended`), or under `--strict` the
    /// first line that cannot be routed has gone to the first server (which stops at it).
    async fn run(
        mut self,
        mut input: LineSource,
        senders: Vec<tokio::sync::mpsc::Sender<Result<Vec<u8>, Failure>>>,
        mut ended: tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), Failure> {
        let mut line_no = 0u64;
        loop {
            let batch = tokio::select! {
                batch = input.next_batch(self.max_lines) => batch,
                _ = ended.wait_for(|ended| *ended) => return Ok(()),
            };
            let Some(batch) = batch else {
                return Ok(());
            };
            let lines = batch?;
            let first = line_no + 1;
            line_no += lines.len() as u64;
            let (servers, stop_after) = self.servers_of(first, &lines).await?;
            let sendable = stop_after.map_or(lines.len(), |index| index + 1);
            for (index, line) in lines.into_iter().take(sendable).enumerate() {
                let server = servers[index];
                {
                    let mut ledger = Ledger::lock(self.ledger);
                    ledger.servers[server]
                        .unsettled
                        .push_back(first + index as u64);
                    ledger.routed += 1;
                }
                tokio::select! {
                    sent = senders[server].send(Ok(line)) => {
                        // That stream has ended; the run reports why.
                        if sent.is_err() {
                            return Ok(());
                        }
                    }
                    _ = ended.wait_for(|ended| *ended) => return Ok(()),
                }
            }
            if stop_after.is_some() {
                return Ok(());
            }
        }
    }

    /// The server of each of `lines` (the first is input line `first`), and under
    /// `--strict` the index of the first that cannot be routed (nothing after it goes).
    async fn servers_of(
        &mut self,
        first: u64,
        lines: &[Vec<u8>],
    ) -> Result<(Vec<usize>, Option<usize>), Failure> {
        let mut servers = vec![0usize; lines.len()];
        let mut targets = self.targets(first, lines);
        if targets.iter().any(|target| matches!(target, Some(Err(_)))) {
            // Perhaps a type or field a schema change added since: read the schema again.
            self.routes.refresh(&self.remotes[0], self.urls).await?;
            targets = self.targets(first, lines);
        }
        let mut keys: BTreeMap<String, (Vec<String>, Vec<usize>)> = BTreeMap::new();
        let mut stop_after = None;
        for (index, target) in targets.into_iter().enumerate() {
            let owners = match &target {
                Some(Ok(Some(target))) => self.routes.owners.get(&target.type_name),
                Some(Ok(None)) => continue,
                _ => None,
            };
            match (target, owners) {
                (Some(Ok(Some(target))), Some(owners)) if owners.len() > 1 => {
                    let (ids, indexes) = keys.entry(target.type_name).or_default();
                    ids.push(target.id);
                    indexes.push(index);
                }
                (_, Some(owners)) => servers[index] = owners[0],
                // Not UTF-8, invalid, or of a type without `@stream`.
                (_, None) if self.strict => {
                    stop_after = Some(index);
                    break;
                }
                (_, None) => {}
            }
        }
        for (type_name, (ids, indexes)) in keys {
            let shards = self.shards_of(&type_name, &ids).await?;
            let owners = &self.routes.owners[&type_name];
            for (index, shard) in indexes.into_iter().zip(shards) {
                servers[index] = *owners.get(shard as usize).ok_or_else(|| {
                    Failure::internal(format!(
                        "a server put a key of {type_name} in shard {shard}, but the type has {} shards",
                        owners.len()
                    ))
                })?;
            }
        }
        Ok((servers, stop_after))
    }

    /// What each line writes: `None` for a line that is not UTF-8.
    #[allow(clippy::type_complexity)]
    fn targets(
        &self,
        first: u64,
        lines: &[Vec<u8>],
    ) -> Vec<Option<Result<Option<LineTarget>, LineError>>> {
        let mut decoder = Decoder::new(&self.routes.catalog);
        lines
            .iter()
            .enumerate()
            .map(|(index, line)| {
                let text = std::str::from_utf8(line).ok()?;
                Some(decoder.target_of(first + index as u64, text))
            })
            .collect()
    }

    /// The shards of `ids`, asked of the servers in turn, in requests of at most
    /// [`MAX_KEY_BYTES`]; a server that is unavailable is passed over, for up to
    /// [`PATIENCE`].
    async fn shards_of(&self, type_name: &str, ids: &[String]) -> Result<Vec<u32>, Failure> {
        let mut shards = Vec::with_capacity(ids.len());
        let mut start = 0;
        while start < ids.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < ids.len() && (end == start || bytes + ids[end].len() + 8 <= MAX_KEY_BYTES) {
                bytes += ids[end].len() + 8;
                end += 1;
            }
            let part = &ids[start..end];
            let answer = self.ask_shards(type_name, part).await?;
            if answer.len() != part.len() {
                return Err(Failure::internal(format!(
                    "a server gave {} shards for {} keys of {type_name}",
                    answer.len(),
                    part.len()
                )));
            }
            shards.extend(answer);
            start = end;
        }
        Ok(shards)
    }

    async fn ask_shards(&self, type_name: &str, ids: &[String]) -> Result<Vec<u32>, Failure> {
        let deadline = Instant::now() + PATIENCE;
        let mut turn = 0;
        loop {
            let remote = &self.remotes[turn % self.remotes.len()];
            match remote.shards_of(type_name, ids).await {
                Ok(shards) => return Ok(shards),
                Err(error)
                    if error.kind() == ErrorKind::Unavailable && Instant::now() < deadline =>
                {
                    turn += 1;
                    if turn % self.remotes.len() == 0 {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
}
