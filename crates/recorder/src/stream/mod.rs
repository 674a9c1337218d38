//! Streaming: assembling recorded streams and re-synthesizing them on replay.
