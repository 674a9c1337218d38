//! What several commands use: settings, advice on errors, the environment of a child behind
//! the proxy, bypass hints, progress bars, review output, and the process runtime. Nothing here
//! imports a command (tests/cli_layers.rs).

pub(crate) mod advice;
pub(crate) mod bypass;
pub(crate) mod call;
pub(crate) mod cassettes;
pub(crate) mod child_env;
pub(crate) mod compaction;
pub(crate) mod exec_report;
pub(crate) mod git;
pub(crate) mod judge;
pub(crate) mod mcp_report;
pub(crate) mod miss;
pub(crate) mod progress;
pub(crate) mod request_file;
pub(crate) mod review;
pub(crate) mod run_secret;
pub(crate) mod runs;
pub(crate) mod runtime;
pub(crate) mod served;
pub(crate) mod settings;
