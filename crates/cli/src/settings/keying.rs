//! How request bodies are keyed: `--volatile`, `--keep-volatile` and `--ignore-path`, shared by
//! every command that computes a key (the recorder commands, `cassette key` and
//! `cassette verify`), so that all of them key a request alike when given the same flags.

use super::file::SettingsFile;
use cassette_keying::{JsonPath, KeyConfig};

/// The keying flags (raw); [`KeyingArgs::config`] is the keying crate's [`KeyConfig`].
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct KeyingArgs {
    /// Also treat this top-level body member as volatile (left out of the key). Repeatable.
    /// Changes keys: give the same list when recording, replaying and verifying.
    #[arg(long = "volatile", value_name = "NAME")]
    volatile: Vec<String>,

    /// Keep this member of the default volatile list in the key after all. Repeatable.
    #[arg(long = "keep-volatile", value_name = "NAME")]
    keep_volatile: Vec<String>,

    /// Leave the values at this JSON path out of the key, wherever they are in the body
    /// (client-generated ids: `$.contents[*].parts[*].functionCall.id`). Repeatable.
    #[arg(long = "ignore-path", value_name = "JSONPATH", value_parser = parse_ignore_path)]
    ignore: Vec<JsonPath>,
}

impl KeyingArgs {
    /// The canonicalization options: the file's `[keying]` lists, then these flags' (flags add
    /// to the file, never replace it).
    pub(crate) fn config(&self, file: &SettingsFile) -> KeyConfig {
        KeyConfig {
            extra_volatile: [&file.volatile[..], &self.volatile[..]].concat(),
            keep_volatile: [&file.keep_volatile[..], &self.keep_volatile[..]].concat(),
            ignore: [&file.ignore[..], &self.ignore[..]].concat(),
        }
    }
}

/// Parses an `ignore` path: any JSON path but `$`, which would leave the whole body out.
pub(crate) fn parse_ignore_path(text: &str) -> Result<JsonPath, String> {
    let path = JsonPath::parse(text).map_err(|e| e.to_string())?;
    if path.is_root() {
        return Err("`$` would leave the whole body out of the key; name a member".to_owned());
    }
    Ok(path)
}
