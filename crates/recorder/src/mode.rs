//! The four recorder modes, how they are spelled, and what each does on a hit and on a miss:
//! the one decision the HTTP engine and the MCP relays both ask.

use cassette_store::PutMode;
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

    /// What this mode does with a request whose recording is stored.
    pub fn on_hit(self) -> OnHit {
        match self {
            Mode::Replay | Mode::Auto => OnHit::Replay,
            Mode::Record => OnHit::Forward(Write::Overwrite),
            Mode::Off => OnHit::Forward(Write::Nothing),
        }
    }

    /// What this mode does with a request this recorder itself recorded earlier in its life
    /// (its session): a session asks the upstream each request once, so two tests sending one
    /// request in one record run get the one answer a replay of the run will give them. Only
    /// `off`, which stores nothing, has no such recording.
    pub fn on_recorded_here(self) -> OnHit {
        match self {
            Mode::Off => OnHit::Forward(Write::Nothing),
            Mode::Replay | Mode::Record | Mode::Auto => OnHit::Replay,
        }
    }

    /// What this mode does with a request whose recording is not stored.
    pub fn on_miss(self) -> OnMiss {
        match self {
            Mode::Replay => OnMiss::Fail,
            Mode::Auto => OnMiss::Forward(Write::CreateOnly),
            Mode::Record => OnMiss::Forward(Write::Overwrite),
            Mode::Off => OnMiss::Forward(Write::Nothing),
        }
    }

    /// What this mode does with a request whose recording came from another origin than the
    /// one its route now points at (`docs/keying.md`, "The upstream's origin"): that recording
    /// is another vendor's answer, so it is a miss, and a mode that records replaces it.
    pub fn on_moved(self) -> OnMiss {
        match self {
            Mode::Replay => OnMiss::Fail,
            Mode::Auto | Mode::Record => OnMiss::Forward(Write::Overwrite),
            Mode::Off => OnMiss::Forward(Write::Nothing),
        }
    }

    /// Whether this mode reads cassettes: only when a hit and a miss are answered differently
    /// (`record` and `off` call the upstream either way).
    pub fn reads_store(self) -> bool {
        match (self.on_hit(), self.on_miss()) {
            (OnHit::Forward(hit), OnMiss::Forward(miss)) => hit != miss,
            _ => true,
        }
    }

    /// Whether this mode may open connections to an upstream.
    pub fn may_call_upstream(self) -> bool {
        !matches!(self, Mode::Replay)
    }
}

/// What a mode does with a request whose recording is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnHit {
    /// Answer from the recording.
    Replay,
    /// Call the upstream anyway, and write its answer so.
    Forward(Write),
}

/// What a mode does with a request whose recording is not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMiss {
    /// A miss: an error that explains itself, never a call to the upstream.
    Fail,
    /// Call the upstream, and write its answer so.
    Forward(Write),
}

/// How a recording is written, for live recordings (HTTP and MCP), imports and re-keys: the
/// store's [`PutMode`] ([`Write::put_mode`]), or nothing at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Replace what is stored (mode `record`: the user asked to re-record).
    Overwrite,
    /// Keep what another writer stored first (mode `auto` filling a miss; an import run
    /// twice changes nothing).
    CreateOnly,
    /// Store nothing (mode `off`; an import's dry run).
    Nothing,
}

impl Write {
    /// The store's mode for this write; `None` when nothing is written.
    pub fn put_mode(self) -> Option<PutMode> {
        match self {
            Write::Overwrite => Some(PutMode::Overwrite),
            Write::CreateOnly => Some(PutMode::Create),
            Write::Nothing => None,
        }
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

    #[test]
    fn a_session_replays_what_it_recorded_itself() {
        assert_eq!(Mode::Record.on_hit(), OnHit::Forward(Write::Overwrite));
        for mode in [Mode::Replay, Mode::Record, Mode::Auto] {
            assert_eq!(mode.on_recorded_here(), OnHit::Replay, "{mode}");
        }
        assert_eq!(Mode::Off.on_recorded_here(), OnHit::Forward(Write::Nothing));
    }

    #[test]
    fn a_write_is_the_stores_put_mode_or_nothing() {
        assert_eq!(Write::Overwrite.put_mode(), Some(PutMode::Overwrite));
        assert_eq!(Write::CreateOnly.put_mode(), Some(PutMode::Create));
        assert_eq!(Write::Nothing.put_mode(), None);
    }

    #[test]
    fn each_mode_means_one_thing_on_a_hit_and_on_a_miss() {
        use Write::*;
        let table = [
            (Mode::Replay, OnHit::Replay, OnMiss::Fail, true),
            (Mode::Auto, OnHit::Replay, OnMiss::Forward(CreateOnly), true),
            (
                Mode::Record,
                OnHit::Forward(Overwrite),
                OnMiss::Forward(Overwrite),
                false,
            ),
            (
                Mode::Off,
                OnHit::Forward(Nothing),
                OnMiss::Forward(Nothing),
                false,
            ),
        ];
        for (mode, hit, miss, reads) in table {
            assert_eq!((mode.on_hit(), mode.on_miss()), (hit, miss), "{mode}");
            assert_eq!(mode.reads_store(), reads, "{mode}");
            assert_eq!(mode.may_call_upstream(), miss != OnMiss::Fail, "{mode}");
        }
    }
}
