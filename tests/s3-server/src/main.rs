//! `tributary-test-s3`: an S3-compatible server on a local directory for Tributary's tests
//! and S3 benchmarks.
//!
//! The protocol (HTTP, SigV4 authentication, XML) is s3s's, from crates.io; the storage
//! behind it is this file's: each object a file at `ROOT/BUCKET/KEY`, written to a
//! temporary file and then renamed into place (a reader sees the old object or the new
//! one), a conditional create (`If-None-Match: *`) a hard link that fails if the name
//! exists, so of racing creators exactly one wins, as S3 arbitrates. (s3s-fs, the s3s
//! project's own file store, names a metadata file by each key's base64 and so cannot hold
//! Lance's long keys, and checks `If-None-Match` apart from its write.) Multipart parts
//! wait in memory until their upload completes.
//!
//! Latency and faults can be injected, so the tests see what a real client sees from a
//! distant or failing store: a 503 before a request is applied, a request applied whose
//! response is lost (a 500 after the write), and slow failures.
//!
//! Usage: `tributary-test-s3 --root DIR [--port N] [--latency-ms N] [--fail-percent P]
//! [--hang-percent P] [--hang-ms N] [--spike-percent P] [--spike-ms N] [--seed S]
//! [--ignore-conditional-writes]`. It prints `listening on HOST:PORT` once ready.
//! Buckets are the directories below `--root`.

mod store;

use std::future::Future;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::dto::*;
use s3s::service::S3ServiceBuilder;
use s3s::{s3_error, S3Request, S3Response, S3Result, S3};
use tokio::net::TcpListener;
use tokio::sync::Mutex;

const LOCK_STRIPES: usize = 256;

#[derive(Debug, Clone)]
struct Options {
    root: PathBuf,
    host: String,
    port: u16,
    access_key: String,
    secret_key: String,
    latency: Duration,
    fail_percent: u64,
    /// Requests held `hang` and then refused: the client's timeout fires first.
    hang_percent: u64,
    hang: Duration,
    /// Requests delayed `spike` and then served.
    spike_percent: u64,
    spike: Duration,
    seed: u64,
    ignore_conditional_writes: bool,
}

fn usage() -> ! {
    eprintln!(
        "usage: tributary-test-s3 --root DIR [--host H] [--port N] [--access-key K] \
         [--secret-key S] [--latency-ms N] [--fail-percent P] [--hang-percent P] \
         [--hang-ms N] [--spike-percent P] [--spike-ms N] [--seed S] \
         [--ignore-conditional-writes]"
    );
    std::process::exit(64)
}

fn parse() -> Options {
    let mut options = Options {
        root: PathBuf::new(),
        host: "127.0.0.1".into(),
        port: 0,
        access_key: "tributary".into(),
        secret_key: "tributary-secret".into(),
        latency: Duration::ZERO,
        fail_percent: 0,
        hang_percent: 0,
        hang: Duration::from_millis(4_000),
        spike_percent: 0,
        spike: Duration::from_millis(400),
        seed: 1,
        ignore_conditional_writes: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--ignore-conditional-writes" {
            options.ignore_conditional_writes = true;
            continue;
        }
        let Some(value) = args.next() else { usage() };
        let number = || value.parse::<u64>().unwrap_or_else(|_| usage());
        match flag.as_str() {
            "--root" => options.root = PathBuf::from(&value),
            "--host" => options.host = value.clone(),
            "--port" => options.port = u16::try_from(number()).unwrap_or_else(|_| usage()),
            "--access-key" => options.access_key = value.clone(),
            "--secret-key" => options.secret_key = value.clone(),
            "--latency-ms" => options.latency = Duration::from_millis(number()),
            "--fail-percent" => options.fail_percent = number().min(100),
            "--hang-percent" => options.hang_percent = number().min(100),
            "--hang-ms" => options.hang = Duration::from_millis(number()),
            "--spike-percent" => options.spike_percent = number().min(100),
            "--spike-ms" => options.spike = Duration::from_millis(number()),
            "--seed" => options.seed = number(),
            _ => usage(),
        }
    }
    if options.root.as_os_str().is_empty() {
        usage()
    }
    options
}

/// What an injected fault does to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// 503 Slow Down, nothing applied.
    Refused,
    /// Applied, then a 500: the client never learns it landed.
    LostResponse,
    /// A second's wait, then 503, nothing applied.
    SlowRefusal,
    /// Held past the client's timeout, then 503, nothing applied.
    Hang,
    /// A latency spike, then served.
    Spike,
}

struct Guarded {
    store: store::Store,
    locks: Vec<Mutex<()>>,
    options: Options,
    draws: AtomicU64,
}

impl Guarded {
    /// A fault for this request, by a seeded counter (splitmix64): the same seed and the
    /// same sequence of requests draw the same faults.
    fn draw(&self) -> Fault {
        let options = &self.options;
        if options.fail_percent == 0 && options.hang_percent == 0 && options.spike_percent == 0 {
            return Fault::None;
        }
        let n = self.draws.fetch_add(1, Ordering::Relaxed);
        let mut z = self
            .options
            .seed
            .wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let roll = z % 300;
        let p = self.options.fail_percent;
        // A second roll, from the high bits, for hangs and spikes.
        let other = (z >> 40) % 100;
        if other < options.hang_percent {
            return Fault::Hang;
        }
        if other < options.hang_percent + options.spike_percent {
            return Fault::Spike;
        }
        if roll < p {
            Fault::Refused
        } else if roll < 2 * p {
            Fault::LostResponse
        } else if roll < 3 * p {
            Fault::SlowRefusal
        } else {
            Fault::None
        }
    }

    async fn before(&self, fault: Fault) -> S3Result<()> {
        if !self.options.latency.is_zero() {
            tokio::time::sleep(self.options.latency).await;
        }
        match fault {
            Fault::Refused => Err(s3_error!(SlowDown, "injected: refused before applying")),
            Fault::SlowRefusal => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Err(s3_error!(SlowDown, "injected: refused slowly"))
            }
            Fault::Hang => {
                tokio::time::sleep(self.options.hang).await;
                Err(s3_error!(SlowDown, "injected: held, then refused"))
            }
            Fault::Spike => {
                tokio::time::sleep(self.options.spike).await;
                Ok(())
            }
            Fault::None | Fault::LostResponse => Ok(()),
        }
    }

    fn lock_of(&self, bucket: &str, key: &str) -> &Mutex<()> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (bucket, key).hash(&mut hasher);
        &self.locks[(hasher.finish() as usize) % LOCK_STRIPES]
    }
}

fn after<T>(fault: Fault, result: S3Result<T>) -> S3Result<T> {
    if let Err(error) = &result {
        if *error.code() == s3s::S3ErrorCode::InternalError {
            eprintln!("tributary-test-s3: internal error: {error:?}");
        }
    }
    match (fault, result) {
        (Fault::LostResponse, Ok(_)) => {
            Err(s3_error!(InternalError, "injected: applied, response lost"))
        }
        (_, result) => result,
    }
}

type Reply<'a, T> = Pin<Box<dyn Future<Output = S3Result<S3Response<T>>> + Send + 'a>>;

// The methods below are written in the form `async_trait` gives its methods: it rewrites
// the `async fn`s it sees, and a macro's are not yet expanded when it looks.

/// Requests that only read: delayed and refused, never "applied".
macro_rules! reads {
    ($($name:ident($input:ident) -> $output:ident;)*) => {$(
        fn $name<'life0, 'async_trait>(&'life0 self, req: S3Request<$input>) -> Reply<'async_trait, $output>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin(async move {
                let fault = match self.draw() {
                    Fault::LostResponse => Fault::Refused,
                    other => other,
                };
                self.before(fault).await?;
                self.store.$name(req).await
            })
        }
    )*};
}

/// Requests that change state; those that create an object hold its key's lock.
macro_rules! writes {
    ($($name:ident($input:ident) -> $output:ident $(, locks $key:ident)?;)*) => {$(
        fn $name<'life0, 'async_trait>(&'life0 self, req: S3Request<$input>) -> Reply<'async_trait, $output>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin(async move {
                let fault = self.draw();
                self.before(fault).await?;
                $(let _held = self.lock_of(&req.input.bucket, &req.input.$key).lock().await;)?
                after(fault, self.store.$name(req).await)
            })
        }
    )*};
}

#[async_trait::async_trait]
impl S3 for Guarded {
    reads! {
        get_object(GetObjectInput) -> GetObjectOutput;
        head_object(HeadObjectInput) -> HeadObjectOutput;
        head_bucket(HeadBucketInput) -> HeadBucketOutput;
        list_objects_v2(ListObjectsV2Input) -> ListObjectsV2Output;
    }

    writes! {
        create_bucket(CreateBucketInput) -> CreateBucketOutput;
        delete_object(DeleteObjectInput) -> DeleteObjectOutput;
        delete_objects(DeleteObjectsInput) -> DeleteObjectsOutput;
        put_object(PutObjectInput) -> PutObjectOutput, locks key;
        copy_object(CopyObjectInput) -> CopyObjectOutput, locks key;
        create_multipart_upload(CreateMultipartUploadInput) -> CreateMultipartUploadOutput;
        upload_part(UploadPartInput) -> UploadPartOutput;
        upload_part_copy(UploadPartCopyInput) -> UploadPartCopyOutput;
        complete_multipart_upload(CompleteMultipartUploadInput) -> CompleteMultipartUploadOutput, locks key;
        abort_multipart_upload(AbortMultipartUploadInput) -> AbortMultipartUploadOutput;
    }
}

fn main() {
    let options = parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("tributary-test-s3: cannot start a runtime: {error}");
            std::process::exit(1)
        }
    };
    if let Err(error) = runtime.block_on(serve(options)) {
        eprintln!("tributary-test-s3: {error}");
        std::process::exit(1)
    }
}

async fn serve(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(&options.root)?;
    let guarded = Guarded {
        store: store::Store::new(options.root.clone(), options.ignore_conditional_writes),
        locks: (0..LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
        options: options.clone(),
        draws: AtomicU64::new(0),
    };
    let service = {
        let mut builder = S3ServiceBuilder::new(guarded);
        builder.set_auth(SimpleAuth::from_single(
            options.access_key.clone(),
            options.secret_key.clone(),
        ));
        builder.build()
    };
    let listener = TcpListener::bind((options.host.as_str(), options.port)).await?;
    println!("listening on {}", listener.local_addr()?);
    let http = Arc::new(ConnBuilder::new(TokioExecutor::new()));
    let mut stop = std::pin::pin!(tokio::signal::ctrl_c());
    loop {
        let (socket, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(_) => continue,
            },
            _ = stop.as_mut() => return Ok(()),
        };
        let service = service.clone();
        let http = http.clone();
        tokio::spawn(async move {
            let _ = http.serve_connection(TokioIo::new(socket), service).await;
        });
    }
}
