//! Which flag or variable fixes a library error. The libraries say what to change in their own
//! terms ("the body limit", "a route named `x`"); only the command line knows that `--max-body`
//! or `--route` sets it (or which key of cassette.toml), so it adds that advice where it prints
//! their errors.

use cassette_recorder::config::DEFAULT_TARGET;
use cassette_recorder::{Error, Setting};

/// The flags or variables that fix a recorder error, when some do.
pub(crate) fn for_recorder(err: &Error) -> Option<String> {
    let advice = match err {
        Error::Miss(_) => "CASSETTE_MODE=record or auto",
        Error::Corrupt { .. } => "CASSETTE_MODE=record",
        Error::BodyTooLarge { .. }
        | Error::InvalidSetting {
            setting: Setting::BodyLimit,
            ..
        } => "--max-body",
        Error::AnswerTooLarge { .. }
        | Error::InvalidSetting {
            setting: Setting::AnswerLimit,
            ..
        } => "--max-answer or CASSETTE_MAX_ANSWER, or max_answer in cassette.toml",
        Error::InvalidSetting {
            setting: Setting::StreamChunkSize,
            ..
        } => "--stream-chunk-size or CASSETTE_STREAM_CHUNK",
        Error::InvalidSetting {
            setting: Setting::MissStatus,
            ..
        } => "--miss-status, or miss_status in cassette.toml",
        Error::InvalidSetting {
            setting: Setting::Runner,
            ..
        } => "cassette proxy --runner-pid PID",
        Error::NoUpstream { target } if target == DEFAULT_TARGET => {
            "--upstream or UPSTREAM_BASE, or [routes.default] upstream in cassette.toml"
        }
        Error::NoUpstream { target } => {
            return Some(format!(
                "--route {target}=URL, or [routes.{target}] upstream in cassette.toml"
            ))
        }
        Error::InvalidRoute { .. } => {
            "--route NAME=URL, --upstream or UPSTREAM_BASE, or [routes.NAME] in cassette.toml"
        }
        Error::NotLoopback { .. } => "--allow-remote",
        Error::ForeignHost { .. } => "cassette proxy --serve-host NAME",
        Error::BrowserOrigin { .. }
        | Error::InvalidSetting {
            setting: Setting::AllowedOrigin,
            ..
        } => "cassette proxy --allow-origin ORIGIN",
        Error::Bind { .. } => "--listen or PORT",
        Error::UsageLog { .. } => "--usage-log or CASSETTE_USAGE_LOG",
        Error::Redact(_) => "--redact-path or --redact-pattern, or [redact] in cassette.toml",
        Error::Store(err) => return for_store(err),
        _ => return None,
    };
    Some(advice.to_owned())
}

/// The flags or variables that fix a store error, when some do.
pub(crate) fn for_store(err: &cassette_store::Error) -> Option<String> {
    match err {
        cassette_store::Error::InvalidUrl { .. } => {
            Some("--store or CASSETTE_STORE, --cache or CASSETTE_CACHE".to_owned())
        }
        cassette_store::Error::ReadOnly { .. } => Some("CASSETTE_MODE=record or auto".to_owned()),
        cassette_store::Error::Corrupt { .. } => Some("CASSETTE_MODE=record".to_owned()),
        _ => None,
    }
}

/// The advice for the first library error in a chain, as `main` prints it.
pub(crate) fn for_chain(err: &anyhow::Error) -> Option<String> {
    err.chain().find_map(|cause| {
        if let Some(err) = cause.downcast_ref::<Error>() {
            return for_recorder(err);
        }
        cause
            .downcast_ref::<cassette_store::Error>()
            .and_then(for_store)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;
    use std::net::SocketAddr;

    #[test]
    fn library_errors_get_the_flag_that_fixes_them() {
        let remote = Error::NotLoopback {
            addr: SocketAddr::from(([0, 0, 0, 0], 8089)),
        };
        assert_eq!(for_recorder(&remote).as_deref(), Some("--allow-remote"));
        let big = Error::BodyTooLarge { size: 2, limit: 1 };
        assert_eq!(for_recorder(&big).as_deref(), Some("--max-body"));
        let unrouted = Error::NoUpstream {
            target: "anthropic".into(),
        };
        assert_eq!(
            for_recorder(&unrouted).as_deref(),
            Some("--route anthropic=URL, or [routes.anthropic] upstream in cassette.toml")
        );
        let default = Error::NoUpstream {
            target: DEFAULT_TARGET.into(),
        };
        assert!(for_recorder(&default).is_some_and(|a| a.contains("UPSTREAM_BASE")));

        // Found through context and through the recorder's wrapping of store errors.
        let store = Error::Store(cassette_store::Error::InvalidUrl {
            url: "ftp://x".into(),
            reason: "unknown scheme".into(),
        });
        let chained = Err::<(), _>(store)
            .context("cannot open the store")
            .unwrap_err();
        assert!(for_chain(&chained).is_some_and(|a| a.contains("--store")));
        let plain = anyhow::anyhow!("no library error here");
        assert_eq!(for_chain(&plain), None);
    }
}
