//! The process around a command: its exit status for errors and the index flushed before it
//! ends.

/// Exit status for errors that are not a test verdict: usage errors, missing files, replay
/// misses. Distinct from 1, which means "an assertion failed".
pub(crate) const EXIT_ERROR: u8 = 2;

/// Writes the index records of the cassettes a command recorded (see
/// `cassette_recorder::miss`), warning rather than failing: the cassettes are written already,
/// and the index only makes explaining a later miss cheaper.
pub(crate) async fn flush_index(recorder: &cassette_recorder::Recorder) {
    if let Err(err) = recorder.flush_index().await {
        eprintln!(
            "cassette: warning: the nearest-recording index was not updated: {:#} (run `cassette index` later)",
            anyhow::Error::new(err)
        );
    }
}
