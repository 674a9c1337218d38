//! Finding the next byte a JSON string cannot hold as it is: `"`, `\` or a control character
//! below U+0020. It is the inner loop of both parsing a body and escaping a string, so it looks
//! at sixteen bytes per step.

/// Whether JSON text needs an escape for `b` (RFC 8785 escapes exactly these).
pub(crate) fn is_special(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// The index of the first special byte at or after `from`, or the length.
pub(crate) fn next_special(bytes: &[u8], from: usize) -> usize {
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 16) {
        let found = special_mask(chunk.try_into().unwrap_or(&[0; 16]));
        if found != 0 {
            return at + found.trailing_zeros() as usize;
        }
        at += 16;
    }
    // Fewer than sixteen bytes left: pad with spaces, which are not special.
    let rest = bytes.get(at..).unwrap_or_default();
    let mut chunk = [b' '; 16];
    chunk[..rest.len()].copy_from_slice(rest);
    match special_mask(&chunk) {
        0 => bytes.len(),
        found => at + found.trailing_zeros() as usize,
    }
}

/// Bit `k` is set when `chunk[k]` is special.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn special_mask(chunk: &[u8; 16]) -> u32 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    // SAFETY: the build enables SSE2 (checked by the `cfg` above; it is part of every x86_64
    // target), so every instruction used here exists. The only memory access is the unaligned
    // load of sixteen bytes from `chunk`, a reference to exactly sixteen initialized bytes.
    unsafe {
        let bytes = _mm_loadu_si128(chunk.as_ptr().cast());
        let quote = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(b'\\' as i8));
        // Unsigned `b < 0x20` is `max(b, 0x1f) == 0x1f`.
        let limit = _mm_set1_epi8(0x1f);
        let control = _mm_cmpeq_epi8(_mm_max_epu8(bytes, limit), limit);
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
    }
}

/// Bit `k` is set when `chunk[k]` is special.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
fn special_mask(chunk: &[u8; 16]) -> u32 {
    portable_special_mask(chunk)
}

#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn portable_special_mask(chunk: &[u8; 16]) -> u32 {
    chunk
        .iter()
        .enumerate()
        .filter(|(_, &b)| is_special(b))
        .fold(0, |mask, (k, _)| mask | 1 << k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte value at every position of a chunk, against the definition.
    #[test]
    fn the_mask_flags_exactly_the_special_bytes() {
        for b in 0..=u8::MAX {
            for at in 0..16 {
                let mut chunk = [b'a'; 16];
                chunk[at] = b;
                let expected = if is_special(b) { 1 << at } else { 0 };
                assert_eq!(special_mask(&chunk), expected, "byte {b:#x} at {at}");
                assert_eq!(
                    portable_special_mask(&chunk),
                    expected,
                    "byte {b:#x} at {at}"
                );
            }
        }
    }

    #[test]
    fn finds_the_first_special_byte_from_any_start() {
        for len in 0..40 {
            for special_at in 0..=len {
                let mut bytes = vec![b'x'; len];
                if special_at < len {
                    bytes[special_at] = b'"';
                }
                for from in 0..=len {
                    let expected = if from <= special_at { special_at } else { len };
                    assert_eq!(
                        next_special(&bytes, from),
                        expected,
                        "{len} {special_at} {from}"
                    );
                }
            }
        }
        assert_eq!(
            next_special(b"abc", 7),
            3,
            "a start past the end finds nothing"
        );
    }
}
