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
//! A settings file would be one more source between the environment and the defaults: it
//! fills the raw layer's `None`s inside `resolve`, and everything after stays as it is.
//!
//! | settings          | flags                                            | used by                       |
//! |-------------------|--------------------------------------------------|-------------------------------|
//! | [`StoreArgs`]     | `--store` (`CASSETTE_STORE`, `CASSETTE_DIR`)     | every command with a store    |
//! | [`KeyingArgs`]    | `--volatile`, `--keep-volatile`                  | recorder commands, `key`, `verify` |
//! | [`RecorderArgs`]  | mode, store, cache, routes, redaction, keying... | `proxy`, `exec`, `run`, `explain`, `probe` |

mod keying;
mod recorder;
mod store;
mod values;

pub(crate) use keying::KeyingArgs;
pub(crate) use recorder::{RecorderArgs, RecorderSettings};
pub(crate) use store::{StoreArgs, StoreSpec};
pub(crate) use values::{is_plain_name, parse_size};
