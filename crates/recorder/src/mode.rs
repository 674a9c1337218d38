//! The four recorder modes and how they are spelled.

use std::fmt;
use std::str::FromStr;

/// What the recorder does with a request. Read once when a recorder is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Answer from the store; a miss is an error and never touches the network.
    #[default]
    Replay,
    /// Always call the upstream and store (overwrite) the result.
    Record,
    /// Replay a hit, record a miss.
    Auto,
    /// Pass through to the upstream, neither reading nor writing the store.
    Off,
}

impl Mode {
    /// The mode's name, as [`FromStr`] reads it back.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Replay => "replay",
            Mode::Record => "record",
            Mode::Auto => "auto",
            Mode::Off => "off",
        }
    }

    /// Whether this mode may read cassettes.
    pub fn reads_store(self) -> bool {
        matches!(self, Mode::Replay | Mode::Auto)
    }

    /// Whether this mode may open connections to an upstream.
    pub fn may_call_upstream(self) -> bool {
        !matches!(self, Mode::Replay)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "replay" => Ok(Mode::Replay),
            "record" => Ok(Mode::Record),
            "auto" => Ok(Mode::Auto),
            "off" => Ok(Mode::Off),
            other => Err(format!(
                "unknown mode `{other}`: expected replay, record, auto or off"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        for mode in [Mode::Replay, Mode::Record, Mode::Auto, Mode::Off] {
            assert_eq!(mode.as_str().parse::<Mode>(), Ok(mode));
        }
        assert_eq!(" AUTO ".parse::<Mode>(), Ok(Mode::Auto));
        assert!("replays".parse::<Mode>().unwrap_err().contains("replays"));
        assert_eq!(Mode::default(), Mode::Replay);
    }
}
