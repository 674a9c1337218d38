//! How request bodies are keyed: `--volatile`, `--keep-volatile` and `--ignore-path`, shared by
//! every command that computes a key (the recorder commands, `cassette key` and
//! `cassette verify`), so that all of them key a request alike when given the same flags.
//!
//! Settings that would leave the model, the prompt or the whole body out of the key
//! (`volatile = ["messages"]`, `ignore = ["$.*"]`) give every prompt sent to a path one key, so
//! one recording would answer every prompt as a hit; they are refused with the reason unless
//! the escape hatch, `--dangerously-allow-prompt-out` or `[keying]
//! dangerously_allow_prompt_out = true`, says that is meant.

use super::file::SettingsFile;
use super::values::{parse_ignore_path, question_out_reason};
use anyhow::bail;
use cassette_keying::{JsonPath, KeyConfig};

/// The escape hatch's flag, named in the refusal.
pub(crate) const ALLOW_PROMPT_OUT_FLAG: &str = "--dangerously-allow-prompt-out";

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

    /// Accept keying settings that leave the model or the prompt out of the key, so that one
    /// recording answers every prompt sent to a path.
    #[arg(long = "dangerously-allow-prompt-out")]
    allow_prompt_out: bool,
}

impl KeyingArgs {
    /// The canonicalization options: the file's `[keying]` lists, then these flags' (flags add
    /// to the file, never replace it). Refused when they would leave the question out of the
    /// key, unless the escape hatch is set (flag or file).
    pub(crate) fn config(&self, file: &SettingsFile) -> anyhow::Result<KeyConfig> {
        let config = KeyConfig {
            extra_volatile: [&file.volatile[..], &self.volatile[..]].concat(),
            keep_volatile: [&file.keep_volatile[..], &self.keep_volatile[..]].concat(),
            ignore: [&file.ignore[..], &self.ignore[..]].concat(),
        };
        if self.allow_prompt_out || file.allow_prompt_out {
            return Ok(config);
        }
        if let Some(located) = file.question_out.first() {
            bail!("{located}");
        }
        let flags = KeyConfig {
            extra_volatile: self.volatile.clone(),
            ignore: self.ignore.clone(),
            ..KeyConfig::default()
        };
        if let Some(found) = flags.question_left_out().first() {
            let flag = match found.setting {
                "volatile" => "--volatile",
                _ => "--ignore-path",
            };
            bail!(
                "{flag} {}",
                question_out_reason(found, ALLOW_PROMPT_OUT_FLAG)
            );
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: KeyingArgs,
    }

    fn args(argv: &[&str]) -> KeyingArgs {
        Cli::try_parse_from(std::iter::once("cassette").chain(argv.iter().copied()))
            .unwrap_or_else(|e| panic!("{e}"))
            .args
    }

    fn file(text: &str) -> SettingsFile {
        SettingsFile::parse(std::path::Path::new("/p/cassette.toml"), text)
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    fn refusal(argv: &[&str], text: &str) -> String {
        format!("{:#}", args(argv).config(&file(text)).unwrap_err())
    }

    #[test]
    fn settings_that_leave_the_prompt_or_model_out_are_refused_with_the_reason() {
        for (text, position, needle) in [
            (
                "[keying]\nignore = ['$.*']",
                ":2:11:",
                "every member of the body",
            ),
            ("[keying]\nignore = ['$.messages']", ":2:11:", "the prompt"),
            (
                "[keying]\nignore = ['$.seed', \"$.messages[*].content\"]",
                ":2:21:",
                "the prompt",
            ),
            (
                "[keying]\nvolatile = [\"messages\", \"model\"]",
                ":2:13:",
                "the prompt",
            ),
            (
                "[keying]\nvolatile = [\"seed\", \"model\"]",
                ":2:21:",
                "the model",
            ),
            ("[keying]\nignore = ['$..contents']", ":2:11:", "the prompt"),
        ] {
            let err = refusal(&[], text);
            assert!(err.contains(position), "{text}: {err}");
            assert!(err.contains(needle), "{text}: {err}");
            assert!(
                err.contains("one recording would answer every prompt"),
                "{err}"
            );
            assert!(err.contains("dangerously_allow_prompt_out"), "{err}");
        }
        for argv in [
            &["--volatile", "messages"][..],
            &["--volatile", "model"],
            &["--ignore-path", "$.input"],
            &["--ignore-path", "$.*"],
        ] {
            let err = refusal(argv, "");
            assert!(err.starts_with(argv[0]), "{argv:?}: {err}");
            assert!(err.contains(ALLOW_PROMPT_OUT_FLAG), "{err}");
        }
    }

    #[test]
    fn the_escape_hatch_and_harmless_settings_pass() {
        let ok = "[keying]\nvolatile = [\"seed\"]\nignore = ['$.contents[*].parts[*].functionCall.id', '$..call_id']";
        assert!(args(&["--volatile", "temperature"])
            .config(&file(ok))
            .is_ok());
        let hatch = "[keying]\ndangerously_allow_prompt_out = true\nignore = ['$.messages']";
        let config = args(&[]).config(&file(hatch)).unwrap();
        assert_eq!(config.ignore[0].to_string(), "$.messages");
        let config = args(&[ALLOW_PROMPT_OUT_FLAG, "--volatile", "model"])
            .config(&file("[keying]\nvolatile = [\"messages\"]"))
            .unwrap();
        assert_eq!(config.extra_volatile, ["messages", "model"]);
    }
}
