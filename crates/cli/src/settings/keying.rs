//! How request bodies are keyed: `--volatile` and `--keep-volatile`, shared by every command
//! that computes a key (the recorder commands, `cassette key` and `cassette verify`), so that
//! all of them key a request alike when given the same flags.

use cassette_keying::KeyConfig;

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
}

impl KeyingArgs {
    /// The canonicalization options these flags ask for.
    pub(crate) fn config(&self) -> KeyConfig {
        KeyConfig {
            extra_volatile: self.volatile.clone(),
            keep_volatile: self.keep_volatile.clone(),
        }
    }
}
