//! Settings: what the flags and environment variables of every command mean, parsed and
//! validated before a file or socket is opened.
//!
//! Two layers:
//!
//! 1. **Raw** (`*Args`, clap derives): one field per flag, each parsed into its type by clap as
//!    it is read, so a malformed value fails at once and the error names the flag: store URLs
//!    become [`StoreSpec`]s ([`cassette_store::StoreUrl`] inside), `--route NAME=URL` a
//!    [`cassette_recorder::Route`], sizes numbers. A flag wins over its environment variable
//!    (clap's `env`). Settings with a default are `Option`s here, so "not given" stays visible
//!    for a later source to fill.
//! 2. **Validated** ([`RecorderSettings`], [`StoreSpec`], [`KeyConfig`](cassette_keying::KeyConfig)):
//!    built from the raw layer by `resolve`/`config`, which applies the defaults and the checks
//!    that span several flags (a route given twice, a cache that is the store itself), and
//!    does no IO. Commands only ever read this layer.
//!
//! The settings file, cassette.toml ([`SettingsFile`]), is read once by `main` for every
//! command and validated whole. It is one more source between the environment and the
//! defaults: `resolve` takes it and fills the raw layer's `None`s from it (flags > environment
//! > file > defaults); lists are the file's followed by the flags'.
//!
//! | settings          | flags                                            | used by                       |
//! |-------------------|--------------------------------------------------|-------------------------------|
//! | [`StoreArgs`]     | `--store` (`CASSETTE_STORE`, `CASSETTE_DIR`)     | every command with a store    |
//! | [`FileArgs`]      | `--config` (`CASSETTE_CONFIG`), `--no-config`    | every command (global flags)  |
//! | [`KeyingArgs`]    | `--volatile`, `--keep-volatile`, `--ignore-path` | recorder commands, `key`, `verify` |
//! | [`RecorderArgs`]  | mode, store, cache, routes, redaction, keying... | `proxy`, `exec`, `run`, `explain`, `probe` |
//! | [`ServeArgs`]     | `--miss-status`, `--allow-host`, `--no-catch-bypass` | `proxy`, `exec`, `config`  |

mod file;
mod keying;
mod own_endpoint;
mod recorder;
mod serve;
mod store;
mod unopened;
mod usage_log;
mod values;

pub(crate) use file::{FileArgs, SettingsFile, FILE_NAME};
pub(crate) use keying::KeyingArgs;
pub(crate) use own_endpoint::{Honoured, BASE_URL_VARIABLES};
pub(crate) use recorder::{key_sources, keys_summary, RecorderArgs, RecorderSettings, RouteKey};
pub(crate) use serve::{ServeArgs, ServeSettings};
pub(crate) use store::{StoreArgs, StoreSpec};
pub(crate) use values::{is_built_in_route, is_plain_name, parse_flag, parse_size};
