//! A replay miss as every command prints it: key, request, store, the nearest recording and
//! what differs, and what to do.

use cassette_recorder::Miss;

/// Prints a miss the way every command does: key, request, nearest recording, differences.
pub(crate) fn print_miss(miss: &Miss) {
    for line in miss_lines(miss) {
        eprintln!("{line}");
    }
}

/// A miss as every command explains it, one line each: key, request, store, the nearest
/// recording and what differs, and what to do.
pub(crate) fn miss_lines(miss: &Miss) -> Vec<String> {
    let mut lines = vec![
        format!("  key:     {}", miss.key),
        format!(
            "  request: {} {} (target {}, profile {}{})",
            miss.method,
            miss.path,
            miss.target,
            miss.profile,
            miss.model
                .as_deref()
                .map(|m| format!(", model {m}"))
                .unwrap_or_default()
        ),
        format!("  store:   {}", miss.store),
    ];
    match &miss.explanation.nearest {
        Some(nearest) => {
            lines.push(format!(
                "  nearest: {} (recorded {}), which differs in:",
                nearest.key, nearest.recorded_at
            ));
            lines.extend(nearest.differences.iter().map(|l| format!("    - {l}")));
            if let Some(hint) = &nearest.hint {
                lines.push(format!("  {hint}"));
            }
        }
        None => lines.push(format!("  {}", miss.explanation.summary)),
    }
    lines.push("  Record it with CASSETTE_MODE=record (or auto), or fix the request.".to_owned());
    lines
}
