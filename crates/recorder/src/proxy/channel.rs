//! The in-process channel: a Unix socket the proxy also listens on, for transports installed
//! inside a test process (the Python package's `_intercept.py`) that send every request with
//! its original URL (`POST https://api.openai.com/v1/chat/completions`), whatever base URL the
//! client was given. The server routes such a request by its host (`hosts.rs`); this module
//! only opens the socket so that only its owner can connect, and removes it when the proxy
//! stops.
//!
//! Who may connect: the socket lives in a directory only its owner can enter (0700: a fresh
//! one, or one the owner already keeps private), the socket itself is 0600, and every
//! connection's peer must run as the socket's owner (its credentials are checked on accept),
//! so another user on the machine can neither connect nor replace the socket.

use crate::error::Error;
use std::path::{Path, PathBuf};

/// Whether and where the proxy listens for in-process transports besides its HTTP port.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Channel {
    /// The HTTP port only (the default).
    #[default]
    Off,
    /// A Unix socket in a fresh private directory of the temporary directory.
    Fresh,
    /// A Unix socket at this path. Its directory is created private (0700) when absent and,
    /// when present, must be the owner's alone; a file already at the path is refused.
    At(PathBuf),
}

/// The socket's file name in a fresh directory.
const SOCKET_NAME: &str = "channel.sock";

/// A bound channel: the listener, and what to remove when it is dropped.
#[cfg(unix)]
pub(super) struct Socket {
    pub(super) listener: tokio::net::UnixListener,
    /// The owner every peer must be.
    pub(super) owner: u32,
    path: PathBuf,
    made_dir: Option<PathBuf>,
}

#[cfg(unix)]
impl Socket {
    /// The socket's path.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(unix)]
impl Drop for Socket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        if let Some(dir) = &self.made_dir {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Where there are no Unix sockets, a channel cannot be opened (`bind` refuses).
#[cfg(not(unix))]
pub(super) struct Socket;

#[cfg(not(unix))]
impl Socket {
    pub(super) fn path(&self) -> &Path {
        Path::new("")
    }
}

/// Opens the channel `channel` asks for; `None` when it is off.
pub(super) fn bind(channel: &Channel) -> Result<Option<Socket>, Error> {
    let (path, made_dir) = match channel {
        Channel::Off => return Ok(None),
        Channel::Fresh => {
            let dir = fresh_dir()?;
            (dir.join(SOCKET_NAME), Some(dir))
        }
        Channel::At(path) => (path.clone(), private_parent(path)?),
    };
    open(path, made_dir).map(Some)
}

#[cfg(unix)]
fn open(path: PathBuf, made_dir: Option<PathBuf>) -> Result<Socket, Error> {
    use std::os::unix::fs::PermissionsExt;
    let fail = |reason: String| Error::Channel {
        path: path.clone(),
        reason,
    };
    let cleanup = |made: &Option<PathBuf>| {
        if let Some(dir) = made {
            let _ = std::fs::remove_dir(dir);
        }
    };
    if std::fs::symlink_metadata(&path).is_ok() {
        cleanup(&made_dir);
        return Err(fail(
            "a file is there already (another proxy's channel?); name another path".to_owned(),
        ));
    }
    let listener = match tokio::net::UnixListener::bind(&path) {
        Ok(listener) => listener,
        Err(e) => {
            cleanup(&made_dir);
            return Err(fail(e.to_string()));
        }
    };
    let socket = Socket {
        listener,
        owner: own_uid(),
        path: path.clone(),
        made_dir,
    };
    // The directory keeps others out already; the socket's own mode says the same.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| fail(format!("cannot make it the owner's alone: {e}")))?;
    Ok(socket)
}

#[cfg(not(unix))]
fn open(path: PathBuf, _made_dir: Option<PathBuf>) -> Result<Socket, Error> {
    Err(Error::Channel {
        path,
        reason: "this platform has no Unix sockets: clients reach the proxy over HTTP".to_owned(),
    })
}

/// A new directory of the temporary directory that only its owner can enter (mode 0700, under
/// a name tempfile makes sure nobody else took); kept, since the socket's `Drop` removes it.
fn fresh_dir() -> Result<PathBuf, Error> {
    let mut builder = tempfile::Builder::new();
    builder.prefix("cassette-");
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
    builder
        .tempdir()
        .map(tempfile::TempDir::keep)
        .map_err(|e| Error::Channel {
            path: std::env::temp_dir(),
            reason: format!("cannot create its directory: {e}"),
        })
}

fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Makes sure the directory of `socket` is the owner's alone: created (0700) when absent, and
/// returned then to be removed with the socket; checked when present.
fn private_parent(socket: &Path) -> Result<Option<PathBuf>, Error> {
    let fail = |reason: String| Error::Channel {
        path: socket.to_owned(),
        reason,
    };
    let dir = match socket.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    match std::fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            make_private_dir(&dir)
                .map_err(|e| fail(format!("cannot create its directory: {e}")))?;
            Ok(Some(dir))
        }
        Err(e) => Err(fail(format!("cannot read its directory: {e}"))),
        Ok(meta) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::{MetadataExt, PermissionsExt};
                if !meta.is_dir()
                    || meta.permissions().mode() & 0o077 != 0
                    || meta.uid() != own_uid()
                {
                    return Err(fail(format!(
                        "its directory {} is not a directory only you can enter (mode 0700, \
                         owned by you); name a socket in a private directory, or one that does \
                         not exist yet",
                        dir.display()
                    )));
                }
            }
            #[cfg(not(unix))]
            let _ = meta;
            Ok(None)
        }
    }
}

/// The user this process runs as (its effective user id).
#[cfg(unix)]
pub(super) fn own_uid() -> u32 {
    // SAFETY: geteuid has no preconditions, cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() }
}
