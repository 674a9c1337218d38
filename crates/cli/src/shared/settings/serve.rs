//! The settings of the proxy's HTTP face, shared by `cassette proxy` and `cassette exec` (and
//! shown by `cassette config`): the status a replay miss is answered with, and what becomes of
//! traffic that bypasses the base URL (the catch, and the hosts allowed past it).

use super::file::SettingsFile;
pub(crate) use super::values::parse_miss_status;
use cassette_recorder::proxy::{
    Forwarding, HostPattern, DEFAULT_MISS_STATUS, DEFAULT_RETRYING_MISS_STATUS,
};

/// Raw flags; see [`ServeArgs::resolve`].
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ServeArgs {
    /// HTTP status of a replay miss [default: 409, and 424 for the clients known to retry a
    /// 409 whatever x-should-retry says: the Vercel AI SDK, Mastra, Cohere]. A status given
    /// here answers every client.
    #[arg(long, env = "CASSETTE_MISS_STATUS", value_name = "CODE", value_parser = parse_miss_status)]
    pub(crate) miss_status: Option<u16>,

    /// A host the command legitimately reaches (`huggingface.co`, `db.internal:5432`,
    /// `*.internal.example`): not a bypass, and reached directly (it goes into NO_PROXY).
    /// Repeatable; adds to `[bypass] allow` in cassette.toml.
    #[arg(long = "allow-host", value_name = "HOST", value_parser = parse_host_pattern)]
    pub(crate) allow_hosts: Vec<HostPattern>,

    /// Do not catch traffic that bypasses the base URL: exec sets no proxy variables, and the
    /// proxy refuses forward-proxy requests without counting them.
    #[arg(long, overrides_with = "catch_bypass")]
    pub(crate) no_catch_bypass: bool,

    /// Catch it even when cassette.toml says `[bypass] catch = false`.
    #[arg(long, overrides_with = "no_catch_bypass")]
    pub(crate) catch_bypass: bool,
}

/// The settings, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServeSettings {
    /// The status of a replay miss.
    pub(crate) miss_status: u16,
    /// The status for clients that retry a 409, when no miss status was chosen.
    pub(crate) retrying_miss_status: Option<u16>,
    /// The catch and its allow list, or no catch.
    pub(crate) forwarding: Forwarding,
}

impl ServeSettings {
    /// Whether traffic that bypasses the base URL is caught.
    pub(crate) fn catches(&self) -> bool {
        matches!(self.forwarding, Forwarding::Catch { .. })
    }

    /// The allowed hosts (none when nothing is caught).
    pub(crate) fn allowed(&self) -> &[HostPattern] {
        match &self.forwarding {
            Forwarding::Catch { allow } => allow,
            Forwarding::Off => &[],
        }
    }
}

impl ServeArgs {
    /// Flags over the environment over the file over the defaults; the allow list is the
    /// file's followed by the flags'.
    pub(crate) fn resolve(&self, file: &SettingsFile) -> ServeSettings {
        let catch = if self.no_catch_bypass {
            false
        } else {
            self.catch_bypass || file.catch_bypass.unwrap_or(true)
        };
        let forwarding = if catch {
            Forwarding::Catch {
                allow: [&file.allow_hosts[..], &self.allow_hosts[..]].concat(),
            }
        } else {
            Forwarding::Off
        };
        let chosen = self.miss_status.or(file.miss_status);
        ServeSettings {
            miss_status: chosen.unwrap_or(DEFAULT_MISS_STATUS),
            // A status the user chose answers every client; by default each client gets one it
            // fails on at once.
            retrying_miss_status: match chosen {
                Some(_) => None,
                None => Some(DEFAULT_RETRYING_MISS_STATUS),
            },
            forwarding,
        }
    }
}

/// A host, `host:port` or `*.domain`.
pub(crate) fn parse_host_pattern(text: &str) -> Result<HostPattern, String> {
    text.parse()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: ServeArgs,
    }

    fn parse(argv: &[&str]) -> Result<ServeArgs, String> {
        Cli::try_parse_from(std::iter::once("cassette").chain(argv.iter().copied()))
            .map(|c| c.args)
            .map_err(|e| e.to_string())
    }

    fn file(text: &str) -> SettingsFile {
        SettingsFile::parse(std::path::Path::new("/p/cassette.toml"), text).unwrap()
    }

    #[test]
    fn defaults_catch_and_answer_misses_with_409() {
        let settings = parse(&[]).unwrap().resolve(&SettingsFile::default());
        assert_eq!(settings.miss_status, 409);
        assert!(settings.catches());
        assert!(settings.allowed().is_empty());
    }

    #[test]
    fn flags_win_and_allow_lists_add() {
        let team = file("miss_status = 424\n[bypass]\nallow = [\"huggingface.co\"]\n");
        let settings = parse(&["--allow-host", "*.internal.example"])
            .unwrap()
            .resolve(&team);
        assert_eq!(settings.miss_status, 424);
        let allowed: Vec<String> = settings.allowed().iter().map(|p| p.to_string()).collect();
        assert_eq!(allowed, ["huggingface.co", "*.internal.example"]);
        let settings = parse(&["--miss-status", "404", "--no-catch-bypass"])
            .unwrap()
            .resolve(&team);
        assert_eq!(settings.miss_status, 404);
        assert_eq!(settings.forwarding, Forwarding::Off);
        let off = file("[bypass]\ncatch = false\n");
        assert!(!parse(&[]).unwrap().resolve(&off).catches());
        assert!(parse(&["--catch-bypass"]).unwrap().resolve(&off).catches());
    }

    #[test]
    fn bad_values_name_the_flag() {
        for (argv, needle) in [
            (&["--miss-status", "200"][..], "400 to 599"),
            (&["--miss-status", "x"], "400 to 599"),
            (&["--allow-host", "http://x.com"], "host pattern"),
        ] {
            let err = parse(argv).unwrap_err();
            assert!(err.contains(needle) && err.contains(argv[0]), "{err}");
        }
    }
}
