//! One module per subcommand. A command builds on the libraries and on `crate::shared`, never
//! on another command (tests/cli_layers.rs).

pub(crate) mod canary;
pub(crate) mod compact;
pub(crate) mod config;
pub(crate) mod copy;
pub(crate) mod diff;
pub(crate) mod diff_runs;
pub(crate) mod exec;
pub(crate) mod explain;
pub(crate) mod gc;
pub(crate) mod grade;
pub(crate) mod import;
pub(crate) mod index;
pub(crate) mod init;
pub(crate) mod key;
pub(crate) mod ls;
pub(crate) mod mcp;
#[cfg(unix)]
pub(crate) mod npm;
pub(crate) mod probe;
pub(crate) mod proxy;
pub(crate) mod rekey;
pub(crate) mod run;
pub(crate) mod show;
pub(crate) mod verify;
