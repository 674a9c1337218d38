//! Which store a command reads or writes: `--store URL` (`CASSETTE_STORE`), the older
//! `CASSETTE_DIR`, `store` in cassette.toml, or the default `file://cassettes` (next to the
//! settings file when there is one).

use super::file::SettingsFile;
use super::values::real_path;
pub(crate) use super::values::StoreSpec;
use anyhow::{bail, Context};
use cassette_store::{DynStore, StoreUrl};
use std::path::{Path, PathBuf};

/// The store used when neither `--store`, `CASSETTE_STORE` nor `CASSETTE_DIR` is set.
pub(crate) const DEFAULT_STORE: &str = "cassettes";

impl StoreSpec {
    /// Opens (creating when needed) the store, naming it on failure.
    pub(crate) fn open(&self) -> anyhow::Result<DynStore> {
        self.url()
            .open()
            .with_context(|| format!("cannot open the store {self}"))
    }

    /// Opens a store that must exist already, creating nothing: what commands that read or
    /// check a store (`ls`, `show`, `verify`, `gc`, `diff`, the source of `copy`) use, so a
    /// mistyped path is an error rather than an empty store that passes every check.
    pub(crate) fn open_existing(&self) -> anyhow::Result<DynStore> {
        if let Some(path) = self.local_path() {
            if !path.exists() {
                bail!(
                    "there is no store at {self}: {} does not exist (nothing was created)",
                    path.display()
                );
            }
        }
        self.open()
    }

    /// Opens a store that must exist already, for reading only (`ls`, `show`, `verify`,
    /// `diff`, the source of `copy`, replay): as [`StoreSpec::open_existing`], and a `sled://`
    /// database that cannot be opened in place (a full disk) is read from a snapshot copy.
    pub(crate) fn open_for_reading(&self) -> anyhow::Result<DynStore> {
        if let Some(path) = self.local_path() {
            if !path.exists() {
                bail!(
                    "there is no store at {self}: {} does not exist (nothing was created)",
                    path.display()
                );
            }
        }
        self.url()
            .open_read_only()
            .with_context(|| format!("cannot open the store {self}"))
    }

    /// The file or folder of a local store.
    pub(crate) fn local_path(&self) -> Option<&Path> {
        match self.url() {
            StoreUrl::File(path) | StoreUrl::Jsonl(path) => Some(path),
            #[cfg(feature = "sled")]
            StoreUrl::Sled(path) => Some(path),
            _ => None,
        }
    }

    /// Whether two specs name the same store, however the path was spelled (`./x`, `x/`, a
    /// symlink, an absolute path): local paths are compared once resolved, other stores by
    /// URL.
    pub(crate) fn same_store(&self, other: &StoreSpec) -> bool {
        match (self.local_path(), other.local_path()) {
            (Some(a), Some(b)) => resolved(a) == resolved(b),
            (None, None) => self.url() == other.url(),
            _ => false,
        }
    }
}

/// `path` made absolute with symlinks resolved (dangling ones too), as far as it exists; the
/// rest (not created yet) appended as written.
fn resolved(path: &Path) -> PathBuf {
    real_path(path)
        .unwrap_or_else(|_| std::path::absolute(path).unwrap_or_else(|_| path.to_owned()))
}

/// Which store a command uses (raw flags; [`StoreArgs::resolve`] picks one).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct StoreArgs {
    /// Store URL: file://DIR, jsonl://FILE, sled://DIR, s3://BUCKET/PREFIX or memory://
    /// [default: file://cassettes, or file://$CASSETTE_DIR].
    #[arg(long, env = "CASSETTE_STORE", value_name = "URL")]
    store: Option<StoreSpec>,

    /// Older spelling of the store: a directory of cassette files.
    #[arg(
        long = "cassette-dir",
        env = "CASSETTE_DIR",
        value_name = "DIR",
        hide = true
    )]
    dir: Option<PathBuf>,
}

impl StoreArgs {
    /// The store: `--store`/`CASSETTE_STORE`, else `CASSETTE_DIR`, else the file's `store`,
    /// else `file://cassettes` (beside the settings file when there is one).
    pub(crate) fn resolve(&self, file: &SettingsFile) -> StoreSpec {
        match (&self.store, &self.dir, &file.store) {
            (Some(store), _, _) => store.clone(),
            (None, Some(dir), _) => StoreSpec::folder(dir.clone()),
            (None, None, Some(store)) => store.clone(),
            (None, None, None) => {
                let default = StoreSpec::folder(PathBuf::from(DEFAULT_STORE));
                match file.base_dir() {
                    Some(dir) => default.relative_to(dir),
                    None => default,
                }
            }
        }
    }

    /// Opens the store for reading only (see [`StoreSpec::open_for_reading`]).
    pub(crate) fn open_for_reading(&self, file: &SettingsFile) -> anyhow::Result<DynStore> {
        self.resolve(file).open_for_reading()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        store: StoreArgs,
    }

    fn parse(argv: &[&str]) -> Result<StoreArgs, String> {
        Cli::try_parse_from(std::iter::once("cassette").chain(argv.iter().copied()))
            .map(|c| c.store)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn store_urls_are_parsed_with_the_flag() {
        let store = parse(&["--store", " jsonl://tapes.jsonl "])
            .unwrap()
            .resolve(&SettingsFile::default());
        assert_eq!(store.url(), &StoreUrl::Jsonl("tapes.jsonl".into()));
        assert_eq!(store.to_string(), "jsonl://tapes.jsonl");
        assert_eq!(store.scheme(), "jsonl");
        let err = parse(&["--store", "ftp://x"]).unwrap_err();
        assert!(err.contains("--store") && err.contains("ftp"), "{err}");
        let err = parse(&["--store", ""]).unwrap_err();
        assert!(err.contains("--store") && err.contains("empty"), "{err}");
    }

    #[test]
    fn the_default_store_is_a_cassettes_folder() {
        // Built directly: CASSETTE_STORE or CASSETTE_DIR in the test's environment must not
        // change what is tested.
        let unset = StoreArgs {
            store: None,
            dir: None,
        };
        let none = SettingsFile::default();
        let store = unset.resolve(&none);
        assert_eq!(store.url(), &StoreUrl::File("cassettes".into()));
        assert_eq!(store.to_string(), "file://cassettes");
        assert_eq!(store.scheme(), "file");
        let dir = StoreArgs {
            dir: Some("tapes".into()),
            ..unset.clone()
        };
        assert_eq!(dir.resolve(&none).url(), &StoreUrl::File("tapes".into()));
        let both = StoreArgs {
            store: Some("memory://".parse().unwrap()),
            ..dir.clone()
        };
        assert_eq!(both.resolve(&none).url(), &StoreUrl::Memory);

        // A settings file: its store comes below the flag and both variables; without one
        // the default folder sits beside the file.
        let file =
            SettingsFile::parse(Path::new("/p/cassette.toml"), "store = \"jsonl://t.jsonl\"")
                .unwrap();
        assert_eq!(
            unset.resolve(&file).url(),
            &StoreUrl::Jsonl("/p/t.jsonl".into())
        );
        assert_eq!(dir.resolve(&file).url(), &StoreUrl::File("tapes".into()));
        assert_eq!(both.resolve(&file).url(), &StoreUrl::Memory);
        let empty = SettingsFile::parse(Path::new("/p/cassette.toml"), "").unwrap();
        let store = unset.resolve(&empty);
        assert_eq!(store.url(), &StoreUrl::File("/p/cassettes".into()));
        assert_eq!(store.to_string(), "file:///p/cassettes");
    }
}
