//! A file store as a git revision holds it (`git:REV:PATH`, such as `git:HEAD~1:cassettes`),
//! read with git's plumbing (`git rev-parse`, `git ls-tree`, `git cat-file --batch`) into a
//! store in memory: nothing is checked out, and the work tree, the index and the refs are left
//! as they are.

use anyhow::{bail, Context};
use bytes::Bytes;
use cassette_store::memory::MemoryStore;
use cassette_store::{DynStore, Key, StoreExt};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::Arc;

/// The prefix that names a git revision instead of a store.
pub(crate) const PREFIX: &str = "git:";

/// `git:REV:PATH`: the folder PATH (relative to the current folder) of a file store as
/// revision REV of the repository the current folder is in has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GitRevision {
    /// The revision, as git reads it (`HEAD~1`, `main`, a commit).
    rev: String,
    /// The store's folder, relative to the current folder.
    path: String,
}

impl FromStr for GitRevision {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let spec = text.trim();
        let rest = spec
            .strip_prefix(PREFIX)
            .ok_or_else(|| format!("{spec:?} is not git:REV:PATH"))?;
        // A ref name cannot hold ':', so the first one ends the revision.
        let (rev, path) = rest.split_once(':').ok_or_else(|| {
            format!("{spec:?} names no folder: write git:REV:PATH, such as git:HEAD~1:cassettes")
        })?;
        if rev.is_empty() {
            return Err(format!(
                "{spec:?} names no revision: write git:REV:PATH, such as git:HEAD~1:cassettes"
            ));
        }
        // Never an option to git, whatever the revision says.
        if rev.starts_with('-') || rev.chars().any(char::is_control) {
            return Err(format!("{rev:?} is not a git revision"));
        }
        let path = path.trim_end_matches('/');
        if path.is_empty() {
            return Err(format!(
                "{spec:?} names no folder: write git:REV:PATH, such as git:HEAD~1:cassettes"
            ));
        }
        Ok(GitRevision {
            rev: rev.to_owned(),
            path: path.to_owned(),
        })
    }
}

impl std::fmt::Display for GitRevision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{PREFIX}{}:{}", self.rev, self.path)
    }
}

/// What a revision held: its cassettes in a memory store, the commit, and the files that are
/// not cassettes (skipped).
pub(crate) struct Loaded {
    /// The cassettes, by key.
    pub(crate) store: DynStore,
    /// The commit the revision names, abbreviated.
    pub(crate) commit: String,
    /// Files under the folder that are not `XX/KEY.json` cassettes.
    pub(crate) skipped: usize,
}

impl GitRevision {
    /// Reads the cassettes of the revision in the repository of the current folder.
    pub(crate) fn load(&self, runtime: &tokio::runtime::Runtime) -> anyhow::Result<Loaded> {
        let here = std::env::current_dir().context("cannot read the current folder")?;
        self.load_in(&here, runtime)
    }

    fn load_in(&self, dir: &Path, runtime: &tokio::runtime::Runtime) -> anyhow::Result<Loaded> {
        let repo = git(dir, &["rev-parse", "--show-toplevel"]).map_err(|err| match err {
            Git::Failed(_) => anyhow::anyhow!(
                "{self}: {} is not in a git repository (git:REV:PATH reads a revision of the \
                 repository the current folder is in)",
                dir.display()
            ),
            Git::Missing(err) => err,
        })?;
        let repo = String::from_utf8_lossy(&repo).trim().to_owned();
        let commit = git(
            dir,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &format!("{}^{{commit}}", self.rev),
            ],
        )
        .map_err(|err| match err {
            Git::Failed(_) => anyhow::anyhow!(
                "{self}: {:?} is not a commit of the repository at {repo} (see git log)",
                self.rev
            ),
            Git::Missing(err) => err,
        })?;
        let commit = String::from_utf8_lossy(&commit).trim().to_owned();
        // `./` makes the path relative to the current folder, as a folder argument is.
        let object = format!("{commit}:./{}", self.path);
        let kind = git(dir, &["cat-file", "-t", &object]).map_err(|err| match err {
            Git::Failed(_) => anyhow::anyhow!(
                "{self}: there is no {} in {} (commit {}) of the repository at {repo}",
                self.path,
                self.rev,
                short(&commit)
            ),
            Git::Missing(err) => err,
        })?;
        if String::from_utf8_lossy(&kind).trim() != "tree" {
            bail!(
                "{self}: {} is a file in {}, not a folder of cassettes",
                self.path,
                self.rev
            );
        }
        let listing = git(dir, &["ls-tree", "-r", "-z", &object]).map_err(Git::into_error)?;
        let mut wanted: Vec<(Key, String)> = Vec::new();
        let mut skipped = 0;
        for entry in listing.split(|b| *b == 0).filter(|e| !e.is_empty()) {
            let entry = String::from_utf8_lossy(entry);
            // `MODE TYPE OID\tPATH`
            let Some((head, path)) = entry.split_once('\t') else {
                continue;
            };
            let mut fields = head.split(' ');
            let (Some(_mode), Some(kind), Some(oid)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            match (kind, cassette_key(path)) {
                ("blob", Some(key)) => wanted.push((key, oid.to_owned())),
                _ => skipped += 1,
            }
        }
        let documents = read_blobs(dir, &wanted)?;
        // The blobs go into memory as git holds them, not through the seal, and may: this
        // store lives for one `cassette diff`, which only reads it as it would read the file
        // store at that revision, and shows it through the review's own redaction; nothing
        // from it is ever written to a store (`copy` takes no `git:` side).
        let store: DynStore = Arc::new(MemoryStore::new());
        runtime.block_on(async {
            for (key, document) in documents {
                store.put(&key, document).await?;
            }
            anyhow::Ok(())
        })?;
        Ok(Loaded {
            store,
            commit: short(&commit).to_owned(),
            skipped,
        })
    }
}

/// The key of a file store's cassette file, `ab/abcd….json` (its folder is its key's first two
/// characters); `None` for any other file.
fn cassette_key(path: &str) -> Option<Key> {
    let mut parts = path.rsplit('/');
    let file = parts.next()?;
    let folder = parts.next()?;
    let key = Key::parse(file.strip_suffix(".json")?)?;
    (key.as_str().get(..2) == Some(folder)).then_some(key)
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// Why a git command did not give its output.
enum Git {
    /// git ran and refused (its message).
    Failed(String),
    /// git could not be run at all.
    Missing(anyhow::Error),
}

impl Git {
    fn into_error(self) -> anyhow::Error {
        match self {
            Git::Failed(message) => anyhow::anyhow!("git failed: {message}"),
            Git::Missing(err) => err,
        }
    }
}

/// Runs `git ARGS` in `dir` and returns its standard output.
fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, Git> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            Git::Missing(anyhow::anyhow!(
                "cannot run git (git:REV:PATH reads a revision with it; is git installed?): {e}"
            ))
        })?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(Git::Failed(
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ))
    }
}

/// Reads blobs by object id with one `git cat-file --batch`.
fn read_blobs(dir: &Path, wanted: &[(Key, String)]) -> anyhow::Result<Vec<(Key, Bytes)>> {
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let mut child = Command::new("git")
        .current_dir(dir)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot run git cat-file")?;
    let mut stdin = child.stdin.take().context("git cat-file has no input")?;
    let ids: Vec<String> = wanted.iter().map(|(_, oid)| oid.clone()).collect();
    // Written from another thread: git answers as it reads, and a full pipe would block both.
    let writer = std::thread::spawn(move || {
        for oid in ids {
            if writeln!(stdin, "{oid}").is_err() {
                break;
            }
        }
    });
    let stdout = child.stdout.take().context("git cat-file has no output")?;
    let mut reader = BufReader::new(stdout);
    let mut out = Vec::with_capacity(wanted.len());
    for (key, oid) in wanted {
        let mut header = String::new();
        reader
            .read_line(&mut header)
            .context("reading git cat-file")?;
        // `OID TYPE SIZE`, or `OID missing`.
        let fields: Vec<&str> = header.split_whitespace().collect();
        let size: usize = match fields.as_slice() {
            [_, "blob", size] => size.parse().context("git cat-file gave a bad size")?,
            _ => bail!("git cat-file could not read {oid}: {}", header.trim()),
        };
        let mut document = vec![0; size];
        reader
            .read_exact(&mut document)
            .context("reading git cat-file")?;
        let mut newline = [0u8; 1];
        reader
            .read_exact(&mut newline)
            .context("reading git cat-file")?;
        out.push((key.clone(), Bytes::from(document)));
    }
    let _ = writer.join();
    let _ = child.wait();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_a_revision_and_a_folder() {
        let spec: GitRevision = "git:HEAD~1:cassettes/".parse().unwrap();
        assert_eq!(
            (spec.rev.as_str(), spec.path.as_str()),
            ("HEAD~1", "cassettes")
        );
        assert_eq!(spec.to_string(), "git:HEAD~1:cassettes");
        let nested: GitRevision = "git:v1.2:tests/data/cassettes".parse().unwrap();
        assert_eq!(nested.path, "tests/data/cassettes");
        for bad in [
            "git:HEAD",
            "git::cassettes",
            "git:HEAD:",
            "git:--output=x:c",
        ] {
            assert!(bad.parse::<GitRevision>().is_err(), "{bad}");
        }
    }

    #[test]
    fn only_cassette_files_are_keys() {
        let key = "ab".repeat(32);
        assert!(cassette_key(&format!("cassettes/ab/{key}.json")).is_some());
        assert!(cassette_key(&format!("ab/{key}.json")).is_some());
        assert!(cassette_key(&format!("cassettes/cd/{key}.json")).is_none());
        assert!(cassette_key(&format!("{key}.json")).is_none());
        assert!(cassette_key("cassettes/.cassette-index/w-1.jsonl").is_none());
    }
}
