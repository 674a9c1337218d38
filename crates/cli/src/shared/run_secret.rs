//! The per-run secret of a recording proxy (`cassette_recorder::proxy::RunSecret`): drawn fresh
//! for each `cassette exec` and each runner's `cassette proxy --run-secret`, or read from
//! `CASSETTE_RUN_SECRET` for a proxy run by hand whose clients are configured with it.

use anyhow::Context;
use cassette_recorder::proxy::RunSecret;

/// The variable `cassette proxy --run-secret` reads its secret from, when set.
pub(crate) const RUN_SECRET_ENV: &str = "CASSETTE_RUN_SECRET";

/// 128 bits from the operating system, in hex: a run secret, or a control token.
pub(crate) fn fresh_hex() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("cannot draw a secret from the operating system: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A fresh run secret.
pub(crate) fn fresh() -> anyhow::Result<RunSecret> {
    Ok(RunSecret::new(fresh_hex()?)?)
}

/// The secret `CASSETTE_RUN_SECRET` holds (checked), when it is set and not empty.
pub(crate) fn from_env() -> anyhow::Result<Option<RunSecret>> {
    match std::env::var(RUN_SECRET_ENV) {
        Ok(value) if !value.trim().is_empty() => RunSecret::new(value.trim())
            .map(Some)
            .with_context(|| format!("{RUN_SECRET_ENV} is not a run secret")),
        _ => Ok(None),
    }
}
