//! `ingest --server A --server B`: one input, several servers that each own some of the
//! shards (`serve --shards`). Each line goes to the server owning its key's shard, over
//! one resumable stream per server (the single server's stream of `remote_ingest`), and
//! their acknowledgements are merged back into the input's line numbers.
//!
//! The lines are validated here with the graph's own schema and decoder (the one the
//! servers use), so a line's type and key are known before it is sent; the shard of a key
//! is the server's answer (`POST /shards/{type}`), so the hash has one owner. A line that
//! names no streamed type's key (invalid, blank, or of a type without `@stream`) goes to
//! the first server, which rejects or refuses it as it would any line.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::sync::Mutex;

use serde_json::{json, Value};
use tributary::{Catalog, Decoder, GraphOps, LineError};

use crate::ingest::{spawn_reader, IngestRun, LineSource};
use crate::output::Format;
use crate::remote::Remote;
use crate::remote_ingest::{print_record, renumber_line, report, stream_lines};
use crate::Failure;

/// Which server takes the lines of each shard of each streamed type.
struct Routes {
    catalog: Catalog,
    /// Per streamed type: its shard count and the server of each shard.
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
        let source = remotes[0].schema().await?;
        let catalog = Catalog::parse(&source).map_err(|e| {
            Failure::internal(format!("the server's schema does not parse here: {e}"))
        })?;
        let mut owned = Vec::with_capacity(remotes.len());
        for remote in remotes {
            owned.push(remote.ingest_status(branch).await?.owned_shards);
        }
        let mut owners = BTreeMap::new();
        for ty in &catalog.types {
            let Some(stream) = &ty.stream else { continue };
            let count = stream.shards.unwrap_or(1).max(1);
            let mut of_shard = Vec::with_capacity(count as usize);
            for shard in 0..count {
                let owner = owned.iter().position(|shards| match shards {
                    None => true,
                    Some(shards) => shards.contains(&shard),
                });
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
        Ok(Routes { catalog, owners })
    }
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

    /// Give each record of one line in `lines` (a server's numbers, not yet settled) the
    /// number of its input line.
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
    fn merge(&mut self, server: usize, mut record: Value) -> Value {
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
        record["server"] = Value::from(server);
        if let Some(object) = record.as_object_mut() {
            object.remove("stopped_at");
        }
        record
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
    let input = spawn_reader(&args.file)?;
    let router = route(&routes, &remotes[0], input, senders, &ledger, &args);

    // The streams report through one channel, so the records print in the order they
    // arrive, from this task.
    let (records, mut arrived) = tokio::sync::mpsc::unbounded_channel::<(usize, Value)>();
    let streams = futures::future::join_all(remotes.iter().zip(sources).enumerate().map(
        |(server, (remote, source))| {
            let records = records.clone();
            let args = &args;
            async move {
                let mut forward = |record: Value| {
                    // The receiver outlives every stream.
                    let _ = records.send((server, record));
                    Ok(())
                };
                stream_lines(remote, source, args, &mut forward).await
            }
        },
    ));
    drop(records);
    let work = async { tokio::join!(router, streams) };
    tokio::pin!(work);
    let mut print = |server: usize, record: Value| {
        let merged = Ledger::lock(&ledger).merge(server, record);
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
    let mut summary = json!({
        "summary": true,
        "acked": ledger.servers.iter().map(|s| s.acked).sum::<u64>(),
        "rejected": ledger.servers.iter().map(|s| s.rejected).sum::<u64>(),
        "duplicates": ledger.servers.iter().map(|s| s.duplicates).sum::<u64>(),
        "through_line": ledger.through_line(),
        "servers": remotes.len(),
    });
    // The first stream to fail (in server order) fails the run; its lines are renumbered
    // by its server's ledger.
    let mut failure = None;
    let mut broken = None;
    for (server, ended) in summaries.into_iter().enumerate() {
        match ended {
            Ok(mut stream_summary) => {
                if let Some(error) = stream_summary.get_mut("error") {
                    if failure.is_none() {
                        ledger.renumber(server, error.get_mut("lines"));
                        error["server"] = Value::from(urls[server].clone());
                        failure = Some(error.clone());
                    }
                }
            }
            Err(error) => {
                broken.get_or_insert(error);
            }
        }
    }
    if let Some(bad) = routed? {
        summary["error"] = json!({
            "kind": tributary::ErrorKind::InvalidInput.name(),
            "error": format!("--strict: stopped at {bad}"),
            "lines": [{"line": bad.line, "error": bad.to_string()}],
        });
    } else if let Some(error) = failure {
        summary["error"] = error;
    }
    drop(ledger);
    let reported = report(&summary, format, out, "the servers fold them");
    match broken {
        Some(failure) => Err(failure),
        None => reported,
    }
}

/// Read the input, send each line to its server, and record where it went. Ends at the
/// input's end, or, under `--strict`, before its first invalid line (returned), or when a
/// server's stream has ended (the others then end too: their senders drop).
async fn route(
    routes: &Routes,
    asker: &Remote,
    mut input: LineSource,
    senders: Vec<tokio::sync::mpsc::Sender<Result<Vec<u8>, Failure>>>,
    ledger: &Mutex<Ledger>,
    args: &IngestRun,
) -> Result<Option<LineError>, Failure> {
    let mut decoder = Decoder::new(&routes.catalog);
    let mut line_no = 0u64;
    while let Some(batch) = input.next_batch(args.batch_lines.max(1)).await {
        let lines = batch?;
        let first = line_no + 1;
        line_no += lines.len() as u64;
        // Each line's server: the first one unless it names a key of a streamed type.
        let mut server_of = vec![0usize; lines.len()];
        let mut keys: BTreeMap<&str, (Vec<String>, Vec<usize>)> = BTreeMap::new();
        let mut stop = None;
        for (index, line) in lines.iter().enumerate() {
            let target = match std::str::from_utf8(line) {
                Ok(text) => decoder.target_of(first + index as u64, text),
                Err(_) => Ok(None),
            };
            match target {
                Ok(Some(target)) => {
                    if let Some((name, owners)) = routes.owners.get_key_value(&target.type_name) {
                        if owners.len() > 1 {
                            let (ids, indexes) = keys.entry(name.as_str()).or_default();
                            ids.push(target.id);
                            indexes.push(index);
                        } else {
                            server_of[index] = owners[0];
                        }
                    }
                }
                Ok(None) => {}
                Err(bad) if args.strict => {
                    stop = Some((index, bad));
                    break;
                }
                Err(_) => {}
            }
        }
        for (type_name, (ids, indexes)) in keys {
            let shards = asker.shards_of(type_name, &ids).await?;
            let owners = &routes.owners[type_name];
            for (index, shard) in indexes.into_iter().zip(shards) {
                server_of[index] = owners.get(shard as usize).copied().unwrap_or(0);
            }
        }
        let sendable = stop.as_ref().map_or(lines.len(), |(index, _)| *index);
        for (index, line) in lines.into_iter().take(sendable).enumerate() {
            let server = server_of[index];
            {
                let mut ledger = Ledger::lock(ledger);
                ledger.servers[server]
                    .unsettled
                    .push_back(first + index as u64);
                ledger.routed += 1;
            }
            if senders[server].send(Ok(line)).await.is_err() {
                // That server's stream has ended; the run reports why.
                return Ok(None);
            }
        }
        if let Some((_, bad)) = stop {
            return Ok(Some(bad));
        }
    }
    Ok(None)
}
