//! What a served proxy says when it stops: one line of its counters (`proxy` on shutdown,
//! `exec` after its command ends).

use cassette_recorder::proxy::ProxyStats;

/// One line of counters, as printed on shutdown and by `cassette exec`.
pub(crate) fn summary(stats: &ProxyStats) -> String {
    let s = &stats.recorder;
    let failed = match s.failed_recordings {
        0 => String::new(),
        n => format!(", {n} failed recordings"),
    };
    let replayed = match s.failures_replayed {
        0 => String::new(),
        n => format!(", {n} failures replayed"),
    };
    let bypassed = match stats.bypass_count() {
        0 => String::new(),
        n => format!(", {n} bypassed the base URL"),
    };
    format!(
        "{} requests: {} hits, {} misses, {} recorded{failed}, {} upstream requests, {} upstream \
         errors{replayed}{bypassed}",
        stats.requests, s.hits, s.misses, s.recorded, s.upstream_requests, s.upstream_errors
    )
}
