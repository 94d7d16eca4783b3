//! The objects: a file per object at `ROOT/BUCKET/KEY`, parts of unfinished multipart
//! uploads in memory.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

/// Files being written are named with this prefix; listings skip them.
const TEMPORARY: &str = ".tmp-";

#[derive(Default)]
struct Upload {
    bucket: String,
    key: String,
    parts: HashMap<i32, Bytes>,
}

pub struct Store {
    root: PathBuf,
    uploads: Mutex<HashMap<String, Upload>>,
    /// Completed uploads and their ETags: completing one again (a client retrying after a
    /// lost response) succeeds, as on S3.
    completed: Mutex<HashMap<String, String>>,
    counter: AtomicU64,
    /// Drop `If-None-Match`/`If-Match` (to show a client refuses such a store).
    ignore_conditions: bool,
}

fn internal(error: impl std::fmt::Display) -> s3s::S3Error {
    eprintln!("tributary-test-s3: {error}");
    s3_error!(InternalError, "{error}")
}

/// An object's ETag: its file's inode (every write makes a new file, renamed or linked
/// into place), size and modification time.
fn etag_of(meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    let nanos = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("{:x}-{:x}-{nanos:x}", meta.ino(), meta.len())
}

fn checked_key(key: &str) -> S3Result<()> {
    let bad = key.is_empty()
        || key.starts_with('/')
        || key.split('/').any(|part| {
            part.is_empty() || part == "." || part == ".." || part.starts_with(TEMPORARY)
        });
    if bad {
        return Err(s3_error!(InvalidArgument, "unsupported key `{key}`"));
    }
    Ok(())
}

async fn collect(body: Option<StreamingBlob>) -> S3Result<Bytes> {
    let Some(mut body) = body else {
        return Ok(Bytes::new());
    };
    let mut all = BytesMut::new();
    while let Some(chunk) = body.next().await {
        all.extend_from_slice(&chunk.map_err(|e| s3_error!(IncompleteBody, "{e}"))?);
    }
    Ok(all.freeze())
}

impl Store {
    pub fn new(root: PathBuf, ignore_conditions: bool) -> Store {
        Store {
            root,
            uploads: Mutex::default(),
            completed: Mutex::default(),
            counter: AtomicU64::new(0),
            ignore_conditions,
        }
    }

    fn bucket_dir(&self, bucket: &str) -> S3Result<PathBuf> {
        let dir = self.root.join(bucket);
        if bucket.contains('/') || bucket.starts_with('.') || !dir.is_dir() {
            return Err(s3_error!(NoSuchBucket));
        }
        Ok(dir)
    }

    fn path_of(&self, bucket: &str, key: &str) -> S3Result<PathBuf> {
        checked_key(key)?;
        Ok(self.bucket_dir(bucket)?.join(key))
    }

    fn unique(&self) -> u64 {
        self.counter.fetch_add(1, Ordering::Relaxed)
    }

    /// Write `bytes` as `bucket/key`: all of it or nothing, and only if no object exists
    /// there when `create_only`, or if its ETag is `if_match`.
    fn write(
        &self,
        bucket: &str,
        key: &str,
        bytes: &[u8],
        create_only: bool,
        if_match: Option<&str>,
    ) -> S3Result<String> {
        let path = self.path_of(bucket, key)?;
        let dir = path
            .parent()
            .ok_or_else(|| internal("a key without a folder"))?;
        std::fs::create_dir_all(dir).map_err(internal)?;
        let temporary = dir.join(format!(
            "{TEMPORARY}{}-{}",
            std::process::id(),
            self.unique()
        ));
        std::fs::write(&temporary, bytes).map_err(internal)?;
        let placed = if create_only && !self.ignore_conditions {
            // The store's one arbiter: a link fails if the name exists.
            let linked = std::fs::hard_link(&temporary, &path);
            let _ = std::fs::remove_file(&temporary);
            match linked {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(s3_error!(PreconditionFailed, "the object exists"))
                }
                other => other,
            }
        } else {
            if let (Some(expected), false) = (if_match, self.ignore_conditions) {
                let current = std::fs::metadata(&path).map(|m| etag_of(&m));
                if current.as_deref().ok() != Some(expected.trim_matches('"')) {
                    let _ = std::fs::remove_file(&temporary);
                    return Err(s3_error!(PreconditionFailed, "the ETag does not match"));
                }
            }
            std::fs::rename(&temporary, &path)
        };
        placed.map_err(internal)?;
        let meta = std::fs::metadata(&path).map_err(internal)?;
        Ok(etag_of(&meta))
    }

    fn read(&self, bucket: &str, key: &str) -> S3Result<(Bytes, std::fs::Metadata)> {
        let path = self.path_of(bucket, key)?;
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(s3_error!(NoSuchKey)),
            Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => {
                return Err(s3_error!(NoSuchKey))
            }
            Err(e) => return Err(internal(e)),
        };
        let meta = std::fs::metadata(&path).map_err(internal)?;
        Ok((Bytes::from(bytes), meta))
    }

    fn conditions(
        if_none_match: Option<&IfNoneMatch>,
        if_match: Option<&IfMatch>,
    ) -> S3Result<(bool, Option<String>)> {
        let create_only = if_none_match.is_some_and(|c| c.is_any());
        let if_match = match if_match {
            Some(ETagCondition::ETag(etag)) => Some(etag.value().to_owned()),
            Some(ETagCondition::Any) => None,
            None => None,
        };
        Ok((create_only, if_match))
    }

    pub async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let input = req.input;
        let (create_only, if_match) =
            Self::conditions(input.if_none_match.as_ref(), input.if_match.as_ref())?;
        let bytes = collect(input.body).await?;
        let etag = self.write(
            &input.bucket,
            &input.key,
            &bytes,
            create_only,
            if_match.as_deref(),
        )?;
        Ok(S3Response::new(PutObjectOutput {
            e_tag: Some(ETag::Strong(etag)),
            ..Default::default()
        }))
    }

    pub async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let input = req.input;
        let (bytes, meta) = self.read(&input.bucket, &input.key)?;
        let etag = etag_of(&meta);
        if let Some(ETagCondition::ETag(expected)) = &input.if_match {
            if expected.value() != etag {
                return Err(s3_error!(PreconditionFailed));
            }
        }
        if let Some(ETagCondition::ETag(unwanted)) = &input.if_none_match {
            if unwanted.value() == etag {
                return Err(s3_error!(NotModified));
            }
        }
        let full = bytes.len() as u64;
        let (body, content_range) = match input.range {
            None => (bytes, None),
            Some(range) => {
                let span = range.check(full).map_err(|_| s3_error!(InvalidRange))?;
                (
                    bytes.slice(span.start as usize..span.end as usize),
                    Some(format!("bytes {}-{}/{full}", span.start, span.end - 1)),
                )
            }
        };
        Ok(S3Response::new(GetObjectOutput {
            content_length: Some(body.len() as i64),
            body: Some(StreamingBlob::from(s3s::Body::from(body))),
            content_range,
            last_modified: meta.modified().ok().map(Timestamp::from),
            e_tag: Some(ETag::Strong(etag)),
            ..Default::default()
        }))
    }

    pub async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        let input = req.input;
        let path = self.path_of(&input.bucket, &input.key)?;
        let meta = match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => meta,
            _ => return Err(s3_error!(NoSuchKey)),
        };
        Ok(S3Response::new(HeadObjectOutput {
            content_length: Some(meta.len() as i64),
            last_modified: meta.modified().ok().map(Timestamp::from),
            e_tag: Some(ETag::Strong(etag_of(&meta))),
            ..Default::default()
        }))
    }

    pub async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.bucket_dir(&req.input.bucket)?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    pub async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        let bucket = req.input.bucket;
        if bucket.contains('/') || bucket.starts_with('.') {
            return Err(s3_error!(InvalidBucketName));
        }
        std::fs::create_dir_all(self.root.join(&bucket)).map_err(internal)?;
        Ok(S3Response::new(CreateBucketOutput::default()))
    }

    pub async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let path = self.path_of(&req.input.bucket, &req.input.key)?;
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(internal(e)),
        }
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    pub async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let input = req.input;
        let mut deleted = Vec::new();
        for object in input.delete.objects {
            let path = self.path_of(&input.bucket, &object.key)?;
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(internal(e)),
            }
            deleted.push(DeletedObject {
                key: Some(object.key),
                ..Default::default()
            });
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: Some(deleted),
            ..Default::default()
        }))
    }

    pub async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        let input = req.input;
        let CopySource::Bucket { bucket, key, .. } = &input.copy_source else {
            return Err(s3_error!(NotImplemented));
        };
        let (bytes, _) = self.read(bucket, key)?;
        let etag = self.write(&input.bucket, &input.key, &bytes, false, None)?;
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(CopyObjectResult {
                e_tag: Some(ETag::Strong(etag)),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    /// Every object of `bucket` whose key starts with `prefix`, in key order.
    fn keys(&self, bucket: &str, prefix: &str) -> S3Result<Vec<(String, std::fs::Metadata)>> {
        let bucket_dir = self.bucket_dir(bucket)?;
        // Walk from the deepest folder the prefix names.
        let folder = prefix.rsplit_once('/').map_or("", |(folder, _)| folder);
        let mut found = Vec::new();
        let mut pending = vec![bucket_dir.join(folder)];
        while let Some(dir) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(TEMPORARY) {
                    continue;
                }
                let path = entry.path();
                let Ok(meta) = std::fs::metadata(&path) else {
                    continue;
                };
                if meta.is_dir() {
                    pending.push(path);
                } else if let Some(key) = key_of(&bucket_dir, &path) {
                    if key.starts_with(prefix) {
                        found.push((key, meta));
                    }
                }
            }
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(found)
    }

    pub async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        let input = req.input;
        let prefix = input.prefix.clone().unwrap_or_default();
        let after = match (&input.continuation_token, &input.start_after) {
            (Some(token), Some(start)) => Some(token.clone().max(start.clone())),
            (Some(token), None) => Some(token.clone()),
            (None, start) => start.clone(),
        };
        let max_keys = input.max_keys.unwrap_or(1000).clamp(1, 1000) as usize;
        let mut objects = Vec::new();
        let mut prefixes = BTreeSet::new();
        let mut last = None;
        let mut truncated = false;
        for (key, meta) in self.keys(&input.bucket, &prefix)? {
            if after
                .as_ref()
                .is_some_and(|after| key.as_str() <= after.as_str())
            {
                continue;
            }
            // Keys below a delimiter after the prefix are listed as that common prefix.
            let grouped = input.delimiter.as_ref().and_then(|delimiter| {
                let rest = &key[prefix.len()..];
                rest.find(delimiter.as_str())
                    .map(|at| key[..prefix.len() + at + delimiter.len()].to_owned())
            });
            if let Some(common) = &grouped {
                if prefixes.contains(common) {
                    continue;
                }
                if after
                    .as_ref()
                    .is_some_and(|after| common.as_str() <= after.as_str())
                {
                    continue;
                }
            }
            if objects.len() + prefixes.len() == max_keys {
                truncated = true;
                break;
            }
            match grouped {
                Some(common) => {
                    // Resume after every key below this prefix.
                    last = Some(format!("{common}\u{10FFFF}"));
                    prefixes.insert(common);
                }
                None => {
                    last = Some(key.clone());
                    objects.push(Object {
                        key: Some(key),
                        size: Some(meta.len() as i64),
                        e_tag: Some(ETag::Strong(etag_of(&meta))),
                        last_modified: meta.modified().ok().map(Timestamp::from),
                        ..Default::default()
                    });
                }
            }
        }
        let key_count = (objects.len() + prefixes.len()) as i32;
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(input.bucket),
            prefix: input.prefix,
            delimiter: input.delimiter,
            max_keys: Some(max_keys as i32),
            key_count: Some(key_count),
            is_truncated: Some(truncated),
            continuation_token: input.continuation_token,
            next_continuation_token: if truncated { last } else { None },
            start_after: input.start_after,
            contents: (!objects.is_empty()).then_some(objects),
            common_prefixes: (!prefixes.is_empty()).then(|| {
                prefixes
                    .into_iter()
                    .map(|prefix| CommonPrefix {
                        prefix: Some(prefix),
                    })
                    .collect()
            }),
            ..Default::default()
        }))
    }

    pub async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let input = req.input;
        checked_key(&input.key)?;
        self.bucket_dir(&input.bucket)?;
        let id = format!("upload-{}-{}", std::process::id(), self.unique());
        self.uploads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id.clone(),
                Upload {
                    bucket: input.bucket.clone(),
                    key: input.key.clone(),
                    parts: HashMap::new(),
                },
            );
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(id),
            ..Default::default()
        }))
    }

    fn add_part(&self, upload: &str, number: i32, bytes: Bytes) -> S3Result<String> {
        let etag = format!("part-{number}-{:x}", bytes.len());
        let mut uploads = self.uploads.lock().unwrap_or_else(|e| e.into_inner());
        let upload = uploads
            .get_mut(upload)
            .ok_or_else(|| s3_error!(NoSuchUpload))?;
        upload.parts.insert(number, bytes);
        Ok(etag)
    }

    pub async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        let input = req.input;
        let bytes = collect(input.body).await?;
        let etag = self.add_part(&input.upload_id, input.part_number, bytes)?;
        Ok(S3Response::new(UploadPartOutput {
            e_tag: Some(ETag::Strong(etag)),
            ..Default::default()
        }))
    }

    pub async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        let input = req.input;
        let CopySource::Bucket { bucket, key, .. } = &input.copy_source else {
            return Err(s3_error!(NotImplemented));
        };
        let (mut bytes, _) = self.read(bucket, key)?;
        if let Some(range) = input
            .copy_source_range
            .as_deref()
            .and_then(|r| r.strip_prefix("bytes="))
        {
            let (first, last) = range
                .split_once('-')
                .and_then(|(a, b)| Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?)))
                .ok_or_else(|| s3_error!(InvalidArgument, "bad copy range"))?;
            if first > last || last >= bytes.len() {
                return Err(s3_error!(InvalidRange));
            }
            bytes = bytes.slice(first..last + 1);
        }
        let etag = self.add_part(&input.upload_id, input.part_number, bytes)?;
        Ok(S3Response::new(UploadPartCopyOutput {
            copy_part_result: Some(CopyPartResult {
                e_tag: Some(ETag::Strong(etag)),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    pub async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let input = req.input;
        let (create_only, if_match) =
            Self::conditions(input.if_none_match.as_ref(), input.if_match.as_ref())?;
        let upload = self
            .uploads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&input.upload_id);
        let Some(upload) = upload else {
            let done = self
                .completed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&input.upload_id)
                .cloned();
            let etag = done.ok_or_else(|| s3_error!(NoSuchUpload))?;
            return Ok(S3Response::new(CompleteMultipartUploadOutput {
                bucket: Some(input.bucket),
                key: Some(input.key),
                e_tag: Some(ETag::Strong(etag)),
                ..Default::default()
            }));
        };
        if upload.bucket != input.bucket || upload.key != input.key {
            return Err(s3_error!(NoSuchUpload));
        }
        let numbers: Vec<i32> = match input.multipart_upload.and_then(|m| m.parts) {
            Some(parts) => parts.iter().filter_map(|p| p.part_number).collect(),
            None => {
                let mut all: Vec<i32> = upload.parts.keys().copied().collect();
                all.sort_unstable();
                all
            }
        };
        let mut whole = BytesMut::new();
        for number in numbers {
            let part = upload
                .parts
                .get(&number)
                .ok_or_else(|| s3_error!(InvalidPart, "no part {number}"))?;
            whole.extend_from_slice(part);
        }
        let etag = self.write(
            &input.bucket,
            &input.key,
            &whole,
            create_only,
            if_match.as_deref(),
        )?;
        self.completed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(input.upload_id.clone(), etag.clone());
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            e_tag: Some(ETag::Strong(etag)),
            ..Default::default()
        }))
    }

    pub async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        self.uploads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&req.input.upload_id);
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }
}

/// The key of the file at `path` below `bucket_dir` (`/`-separated).
fn key_of(bucket_dir: &Path, path: &Path) -> Option<String> {
    let relative = path.strip_prefix(bucket_dir).ok()?;
    let parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Some(parts.join("/"))
}
