//! `s3://BUCKET/PREFIX`: any S3-compatible bucket, through `object_store`.
//!
//! Configuration is the usual AWS environment (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ALLOW_HTTP`, ...), overridden by URL options:
//! `s3://bucket/prefix?endpoint=http://127.0.0.1:8333&allow_http=true&path_style=true&region=...`.
//! Objects use the file store's layout (`PREFIX/ab/abcdef….json`), so a cassette folder can be
//! copied into a bucket as is, and listing a key prefix reads one shard, not the whole bucket.
//!
//! Create-only puts use `PutMode::Create` (`If-None-Match: *`): when two CI runners record the
//! same key, the service lets exactly one win. Timeouts and retries are bounded so an unreachable
//! endpoint fails within seconds, naming the endpoint, instead of hanging a test run.

use crate::key::{shard, stored_key, validate_prefix};
use crate::segment::SEGMENT_FOLDER;
use crate::{Created, Error, Key, PutMode, Result, SegmentName, Store};
use async_trait::async_trait;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientConfigKey, ObjectStore, PutOptions, PutPayload, RetryConfig,
};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// How long to wait for a TCP connection before trying again.
const CONNECT_TIMEOUT: &str = "2s";
/// A generous bound on one request, which may carry a multi-megabyte cassette.
const REQUEST_TIMEOUT: &str = "60s";

/// Where and how to reach a bucket: parsed from an `s3://` URL, completed from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct S3Options {
    /// The bucket name.
    pub bucket: String,
    /// The folder inside the bucket, without leading or trailing `/` (may be empty).
    pub prefix: String,
    /// `?endpoint=`: overrides `AWS_ENDPOINT_URL`, for S3-compatible services.
    pub endpoint: Option<String>,
    /// `?region=`: overrides `AWS_REGION`.
    pub region: Option<String>,
    /// `?allow_http=`: overrides `AWS_ALLOW_HTTP`; implied by an `http://` endpoint.
    pub allow_http: Option<bool>,
    /// `?path_style=`: `true` (the default) addresses `ENDPOINT/BUCKET/KEY`, `false` the
    /// virtual-hosted `BUCKET.ENDPOINT/KEY`.
    pub path_style: Option<bool>,
}

impl S3Options {
    /// A bucket and prefix with everything else taken from the environment.
    pub fn new(bucket: impl Into<String>, prefix: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            prefix: prefix.into().trim_matches('/').to_owned(),
            endpoint: None,
            region: None,
            allow_http: None,
            path_style: None,
        }
    }

    /// Parses `s3://BUCKET[/PREFIX][?endpoint=..&region=..&allow_http=..&path_style=..]`.
    pub fn from_url(url: &str) -> Result<Self> {
        let invalid = |reason: String| Error::InvalidUrl {
            url: cassette_keying::shown_url(url).into_owned(),
            reason,
        };
        let parsed = url::Url::parse(url).map_err(|e| invalid(e.to_string()))?;
        let bucket = parsed.host_str().unwrap_or_default();
        if bucket.is_empty() {
            return Err(invalid(
                "an s3:// URL needs a bucket, like s3://bucket/prefix".into(),
            ));
        }
        let mut options = Self::new(bucket, parsed.path());
        for (name, value) in parsed.query_pairs() {
            let boolean = || match value.as_ref() {
                "true" | "1" => Ok(true),
                "false" | "0" => Ok(false),
                other => Err(invalid(format!(
                    "option `{name}` must be true or false, not `{other}`"
                ))),
            };
            match name.as_ref() {
                "endpoint" if value.is_empty() => {
                    return Err(invalid(
                        "option `endpoint` needs a URL, like http://127.0.0.1:8333".into(),
                    ))
                }
                "endpoint" => options.endpoint = Some(value.into_owned()),
                "region" => options.region = Some(value.into_owned()),
                "allow_http" => options.allow_http = Some(boolean()?),
                "path_style" => options.path_style = Some(boolean()?),
                other => {
                    return Err(invalid(format!(
                        "unknown option `{other}`; known: endpoint, region, allow_http, path_style"
                    )))
                }
            }
        }
        Ok(options)
    }
}

/// An object_store error as it may be shown: its messages quote the URLs it requested, with
/// the endpoint's userinfo in them. Kept as it is when they carry none.
fn shown_source(err: object_store::Error) -> Box<dyn std::error::Error + Send + Sync> {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    match cassette_keying::shown_urls(&text) {
        std::borrow::Cow::Borrowed(_) => Box::new(err),
        std::borrow::Cow::Owned(shown) => Box::new(std::io::Error::other(shown)),
    }
}

/// A folder in an S3-compatible bucket.
#[derive(Debug)]
pub struct S3Store {
    store: Arc<dyn ObjectStore>,
    bucket: String,
    prefix: String,
    /// The endpoint as given, for messages (`AWS default` when none is).
    endpoint: String,
}

impl S3Store {
    /// Builds the client; nothing is sent until the first operation.
    pub fn open(options: &S3Options) -> Result<Self> {
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(&options.bucket)
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                CONNECT_TIMEOUT,
            )
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
                REQUEST_TIMEOUT,
            )
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(100),
                    max_backoff: Duration::from_secs(1),
                    base: 2.0,
                },
                max_retries: 2,
                retry_timeout: Duration::from_secs(10),
            });
        if let Some(endpoint) = &options.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        if let Some(region) = &options.region {
            builder = builder.with_region(region);
        }
        let endpoint = builder.get_config_value(&AmazonS3ConfigKey::Endpoint);
        if let Some(allow_http) = options.allow_http {
            builder = builder.with_allow_http(allow_http);
        } else if endpoint
            .as_deref()
            .is_some_and(|e| e.starts_with("http://"))
        {
            // Whoever wrote an http:// endpoint asked for plain HTTP; refusing it only confuses.
            builder = builder.with_allow_http(true);
        }
        if let Some(path_style) = options.path_style {
            builder = builder.with_virtual_hosted_style_request(!path_style);
        }
        let region = builder.get_config_value(&AmazonS3ConfigKey::Region);
        // Shown in every message and in health answers: without the userinfo an endpoint
        // may carry (`http://KEY:SECRET@host`).
        let endpoint = endpoint.map(|e| cassette_keying::shown_url(&e).into_owned());
        let mut endpoint = endpoint.unwrap_or_else(|| {
            format!(
                "AWS default endpoint (region {})",
                region.as_deref().unwrap_or("us-east-1")
            )
        });
        if builder
            .get_config_value(&AmazonS3ConfigKey::AccessKeyId)
            .is_none()
        {
            // Without keys object_store asks the instance metadata service, whose failure
            // message (a request to 169.254.169.254) would not tell a developer what is missing.
            endpoint.push_str(
                ", no AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY set so using instance credentials",
            );
        }
        let store = builder.build().map_err(|e| Error::Remote {
            store: "s3",
            endpoint: endpoint.clone(),
            action: "configuring bucket",
            key: options.bucket.clone(),
            source: shown_source(e),
        })?;
        Ok(Self {
            store: Arc::new(store),
            bucket: options.bucket.clone(),
            prefix: options.prefix.clone(),
            endpoint,
        })
    }

    /// The object path of a key: `PREFIX/ab/abcdef….json`.
    fn object(&self, key: &Key) -> Path {
        self.folder(shard(key)).child(format!("{key}.json"))
    }

    fn folder(&self, shard: &str) -> Path {
        let mut path = Path::from(self.prefix.as_str());
        if !shard.is_empty() {
            path = path.child(shard);
        }
        path
    }

    fn error(&self, action: &'static str, key: &str, source: object_store::Error) -> Error {
        Error::Remote {
            store: "s3",
            endpoint: format!("{} (bucket {})", self.endpoint, self.bucket),
            action,
            key: key.to_owned(),
            source: shown_source(source),
        }
    }

    async fn put_object(
        &self,
        object: &Path,
        name: &str,
        document: Bytes,
        mode: PutMode,
    ) -> Result<Created> {
        let mode = match mode {
            PutMode::Overwrite => object_store::PutMode::Overwrite,
            PutMode::Create => object_store::PutMode::Create,
        };
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        match self
            .store
            .put_opts(object, PutPayload::from(document), opts)
            .await
        {
            Ok(_) => Ok(Created::Won),
            // S3 answers 412 to `If-None-Match: *` when the object exists; some services 409.
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Ok(Created::AlreadyExists),
            Err(e) => Err(self.error("writing", name, e)),
        }
    }

    /// The object path of a segment: `PREFIX/_index/NAME`.
    fn segment_object(&self, name: &SegmentName) -> Path {
        self.folder(SEGMENT_FOLDER).child(name.as_str())
    }
}

impl fmt::Display for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s3://{}", self.bucket)?;
        if !self.prefix.is_empty() {
            write!(f, "/{}", self.prefix)?;
        }
        write!(f, " at {}", self.endpoint)
    }
}

#[async_trait]
impl Store for S3Store {
    async fn get(&self, key: &Key) -> Result<Option<Bytes>> {
        let result = match self.store.get(&self.object(key)).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.error("reading", key.as_str(), e)),
        };
        result
            .bytes()
            .await
            .map(Some)
            .map_err(|e| self.error("reading", key.as_str(), e))
    }

    /// An object read checks nothing on the way out.
    async fn get_raw(&self, key: &Key) -> Result<Option<Bytes>> {
        self.get(key).await
    }

    /// A create is a conditional PUT (`If-None-Match: *`), atomic across runners.
    async fn put_with(&self, key: &Key, document: Bytes, mode: PutMode) -> Result<Created> {
        self.put_object(&self.object(key), key.as_str(), document, mode)
            .await
    }

    async fn delete(&self, key: &Key) -> Result<()> {
        match self.store.delete(&self.object(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error("deleting", key.as_str(), e)),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<Key>> {
        validate_prefix(prefix)?;
        let folder = self.folder(if prefix.len() >= 2 { &prefix[..2] } else { "" });
        let folder = (!folder.as_ref().is_empty()).then_some(folder);
        let objects: Vec<_> = self
            .store
            .list(folder.as_ref())
            .try_collect()
            .await
            .map_err(|e| self.error("listing", prefix, e))?;
        let depth = Path::from(self.prefix.as_str()).parts().count();
        let mut keys: Vec<Key> = objects
            .into_iter()
            .filter_map(|meta| {
                let parts: Vec<_> = meta.location.parts().collect();
                // Only `PREFIX/shard/key.json` is a cassette; anything else is not ours.
                if parts.len() != depth + 2 {
                    return None;
                }
                let key = stored_key(parts[depth + 1].as_ref().strip_suffix(".json")?, prefix)?;
                (parts[depth].as_ref() == shard(&key)).then_some(key)
            })
            .collect();
        keys.sort_unstable();
        Ok(keys)
    }

    fn location(&self) -> String {
        self.to_string()
    }

    fn keeps_segments(&self) -> bool {
        true
    }

    async fn put_segment(&self, name: &SegmentName, document: Bytes) -> Result<Created> {
        let object = self.segment_object(name);
        self.put_object(&object, name.as_str(), document, PutMode::Create)
            .await
    }

    async fn get_segment(&self, name: &SegmentName) -> Result<Option<Bytes>> {
        let result = match self.store.get(&self.segment_object(name)).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.error("reading", name.as_str(), e)),
        };
        result
            .bytes()
            .await
            .map(Some)
            .map_err(|e| self.error("reading", name.as_str(), e))
    }

    async fn list_segments(&self) -> Result<Vec<SegmentName>> {
        let folder = self.folder(SEGMENT_FOLDER);
        let objects: Vec<_> = self
            .store
            .list(Some(&folder))
            .try_collect()
            .await
            .map_err(|e| self.error("listing", SEGMENT_FOLDER, e))?;
        let depth = folder.parts().count();
        let mut names: Vec<SegmentName> = objects
            .into_iter()
            .filter_map(|meta| {
                let parts: Vec<_> = meta.location.parts().collect();
                (parts.len() == depth + 1)
                    .then(|| SegmentName::parse(parts[depth].as_ref()))
                    .flatten()
            })
            .collect();
        names.sort();
        Ok(names)
    }

    async fn delete_segment(&self, name: &SegmentName) -> Result<()> {
        match self.store.delete(&self.segment_object(name)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error("deleting", name.as_str(), e)),
        }
    }
}
