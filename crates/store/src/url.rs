//! Store URLs: parsing them into a [`StoreUrl`] and opening the backend they name.

use crate::fs::FileStore;
use crate::jsonl::JsonlStore;
use crate::memory::MemoryStore;
#[cfg(feature = "s3")]
use crate::s3::{S3Options, S3Store};
#[cfg(feature = "sled")]
use crate::sled::SledStore;
use crate::{DynStore, Error, Result};
use std::path::PathBuf;
use std::sync::Arc;

/// A parsed store URL: which backend, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreUrl {
    /// `file://PATH` or a bare `PATH`: one pretty-printed JSON file per cassette.
    File(PathBuf),
    /// `jsonl://PATH`: an append-only JSON Lines log.
    Jsonl(PathBuf),
    /// `sled://PATH`: a sled database folder.
    #[cfg(feature = "sled")]
    Sled(PathBuf),
    /// `s3://BUCKET/PREFIX?options`: an S3-compatible bucket.
    #[cfg(feature = "s3")]
    S3(S3Options),
    /// `memory://`: nothing survives the process.
    Memory,
}

impl StoreUrl {
    /// Parses a store URL. Everything after `file://`, `jsonl://` and `sled://` is a path taken
    /// literally, so `sled://.cassette-cache` is relative and `file:///srv/cassettes` absolute.
    pub fn parse(url: &str) -> Result<Self> {
        let invalid = |reason: String| Error::InvalidUrl {
            url: url.to_owned(),
            reason,
        };
        let Some((scheme, rest)) = url.split_once("://") else {
            if url.is_empty() {
                return Err(invalid("the URL is empty; use a path, file://PATH, jsonl://PATH, sled://PATH, s3://BUCKET/PREFIX or memory://".into()));
            }
            return Ok(Self::File(PathBuf::from(url)));
        };
        let path = |what: &str| {
            if rest.is_empty() {
                Err(invalid(format!(
                    "{scheme}:// needs a path to the {what}, like {scheme}://cassettes"
                )))
            } else {
                Ok(PathBuf::from(rest))
            }
        };
        match scheme {
            "file" => path("folder").map(Self::File),
            "jsonl" => path("log file").map(Self::Jsonl),
            #[cfg(feature = "sled")]
            "sled" => path("database folder").map(Self::Sled),
            #[cfg(feature = "s3")]
            "s3" => S3Options::from_url(url).map(Self::S3),
            #[cfg(not(feature = "sled"))]
            "sled" => Err(invalid(not_built("sled"))),
            #[cfg(not(feature = "s3"))]
            "s3" => Err(invalid(not_built("s3"))),
            "memory" if rest.is_empty() => Ok(Self::Memory),
            "memory" => Err(invalid("memory:// takes no path".into())),
            other => Err(invalid(format!(
                "unknown scheme `{other}`; use file://, jsonl://, sled://, s3:// or memory://"
            ))),
        }
    }

    /// Opens (creating when needed) the store this URL names.
    pub fn open(&self) -> Result<DynStore> {
        Ok(match self {
            Self::File(path) => Arc::new(FileStore::open(path)?),
            Self::Jsonl(path) => Arc::new(JsonlStore::open(path)?),
            #[cfg(feature = "sled")]
            Self::Sled(path) => Arc::new(SledStore::open(path)?),
            #[cfg(feature = "s3")]
            Self::S3(options) => Arc::new(S3Store::open(options)?),
            Self::Memory => Arc::new(MemoryStore::new()),
        })
    }
}

impl StoreUrl {
    /// Opens the store for reading only, creating nothing where the backend allows: a `sled://`
    /// database that cannot be opened in place (a full disk) is read from a snapshot copy
    /// ([`SledStore::open_read_only`]); every other store opens as [`StoreUrl::open`] does.
    pub fn open_read_only(&self) -> Result<DynStore> {
        match self {
            #[cfg(feature = "sled")]
            Self::Sled(path) => Ok(Arc::new(SledStore::open_read_only(path)?)),
            _ => self.open(),
        }
    }
}

/// Why a scheme whose backend was left out of this build cannot be opened.
#[cfg(not(all(feature = "s3", feature = "sled")))]
fn not_built(scheme: &str) -> String {
    format!("this build has no {scheme}:// backend: enable the `{scheme}` cargo feature of cassette-store")
}

/// Opens the store a URL names (see [`StoreUrl::parse`]).
pub fn open(url: &str) -> Result<DynStore> {
    StoreUrl::parse(url)?.open()
}

/// Opens `store_url`, with `cache_url` (when given) as a local tier in front of it, such as the
/// store `s3://bucket/prefix` cached in `sled://.cassette-cache`. A cache that cannot be opened
/// is bypassed with a warning (see [`tiered::with_cache`](crate::tiered::with_cache)); a cache
/// URL that does not parse, or names the store itself, is an error.
pub fn open_tiered(store_url: &str, cache_url: Option<&str>) -> Result<DynStore> {
    let Some(cache_url) = cache_url else {
        return open(store_url);
    };
    if cache_url == store_url {
        return Err(Error::InvalidUrl {
            url: cache_url.to_owned(),
            reason: "the cache is the store itself; give a local cache such as \
                     sled://.cassette-cache"
                .into(),
        });
    }
    let cache = StoreUrl::parse(cache_url)?;
    let remote = open(store_url)?;
    Ok(crate::tiered::with_cache(remote, &cache))
}

#[cfg(all(test, feature = "s3", feature = "sled"))]
mod tests {
    use super::*;

    fn s3(bucket: &str, prefix: &str) -> S3Options {
        S3Options::new(bucket, prefix)
    }

    #[test]
    fn parse_table() {
        let mut with_opts = s3("b", "p/q");
        with_opts.endpoint = Some("http://127.0.0.1:8333".into());
        with_opts.allow_http = Some(true);
        with_opts.path_style = Some(true);
        with_opts.region = Some("eu-west-1".into());
        let ok: Vec<(&str, StoreUrl)> = vec![
            ("cassettes", StoreUrl::File("cassettes".into())),
            ("./a/b", StoreUrl::File("./a/b".into())),
            ("/abs/path", StoreUrl::File("/abs/path".into())),
            ("file:///abs/path", StoreUrl::File("/abs/path".into())),
            ("file://rel", StoreUrl::File("rel".into())),
            ("jsonl://rec.jsonl", StoreUrl::Jsonl("rec.jsonl".into())),
            ("sled://.cassette-cache", StoreUrl::Sled(".cassette-cache".into())),
            ("memory://", StoreUrl::Memory),
            ("s3://bucket", StoreUrl::S3(s3("bucket", ""))),
            ("s3://bucket/", StoreUrl::S3(s3("bucket", ""))),
            ("s3://bucket/a/b/", StoreUrl::S3(s3("bucket", "a/b"))),
            (
                "s3://b/p/q?endpoint=http://127.0.0.1:8333&allow_http=true&path_style=true&region=eu-west-1",
                StoreUrl::S3(with_opts),
            ),
        ];
        for (url, expected) in ok {
            assert_eq!(StoreUrl::parse(url).unwrap(), expected, "{url}");
        }
        let bad = [
            ("", "empty"),
            ("file://", "needs a path"),
            ("jsonl://", "needs a path"),
            ("sled://", "needs a path"),
            ("memory://x", "takes no path"),
            ("ftp://x", "unknown scheme `ftp`"),
            ("s3://", "bucket"),
            ("s3://b/p?colour=red", "unknown option `colour`"),
            ("s3://b/p?allow_http=maybe", "true or false"),
            ("s3://b/p?endpoint=", "endpoint"),
        ];
        for (url, needle) in bad {
            match StoreUrl::parse(url) {
                Err(Error::InvalidUrl { url: u, reason }) => {
                    assert_eq!(u, url);
                    assert!(reason.contains(needle), "{url}: {reason}");
                }
                other => panic!("{url}: expected InvalidUrl, got {other:?}"),
            }
        }
    }

    #[test]
    fn tiered_rejects_cache_equal_to_store() {
        assert!(matches!(
            open_tiered("memory://", Some("memory://")),
            Err(Error::InvalidUrl { .. })
        ));
        let tiered = open_tiered("memory://", None).unwrap();
        assert_eq!(tiered.location(), "memory://");
    }
}
