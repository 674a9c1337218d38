//! Answers a tape keeps compressed (vcrpy without `decode_compressed_response`), decoded:
//! gzip, deflate and brotli; any other encoding is an error rather than an interaction holding
//! compressed bytes.

use bytes::Bytes;
use std::io::Read;

/// The first value of a header, trimmed.
pub(crate) fn header_value<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
}

/// The body without its content encoding.
pub(crate) fn decode(body: Bytes, headers: &[(String, String)]) -> Result<Bytes, String> {
    let encoding = header_value(headers, "content-encoding").map(str::to_ascii_lowercase);
    let mut out = Vec::new();
    let read = match encoding.as_deref() {
        None | Some("" | "identity") => return Ok(body),
        Some("gzip" | "x-gzip") => (
            "gzip",
            flate2::read::MultiGzDecoder::new(&body[..]).read_to_end(&mut out),
        ),
        Some("deflate") => (
            "deflate",
            flate2::read::ZlibDecoder::new(&body[..]).read_to_end(&mut out),
        ),
        Some("br") => (
            "brotli",
            brotli::Decompressor::new(&body[..], 4096).read_to_end(&mut out),
        ),
        Some(other) => {
            return Err(format!(
                "the answer is {other}-encoded, which cannot be decoded here; re-record it with \
                 vcrpy's decode_compressed_response=True"
            ))
        }
    };
    match read {
        (_, Ok(_)) => Ok(Bytes::from(out)),
        (name, Err(err)) => Err(format!(
            "the {name} answer does not decode (truncated?): {err}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn compressed_answers_are_decoded_and_bad_ones_refused() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(b"{\"ok\":true}").unwrap();
        let bytes = Bytes::from(gz.finish().unwrap());
        let gzip = vec![("Content-Encoding".to_owned(), "gzip".to_owned())];
        assert_eq!(
            decode(bytes.clone(), &gzip).unwrap(),
            Bytes::from("{\"ok\":true}")
        );
        let truncated = bytes.slice(..bytes.len() / 2);
        assert!(decode(truncated, &gzip).unwrap_err().contains("truncated"));
        let mut writer = brotli::CompressorWriter::new(Vec::new(), 4096, 5, 22);
        writer.write_all(b"{\"ok\":1}").unwrap();
        let br = writer.into_inner();
        let brotli = vec![("content-encoding".to_owned(), "br".to_owned())];
        assert_eq!(
            decode(Bytes::from(br), &brotli).unwrap(),
            Bytes::from("{\"ok\":1}")
        );
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zlib.write_all(b"deflated").unwrap();
        let deflate = vec![("content-encoding".to_owned(), "deflate".to_owned())];
        assert_eq!(
            decode(Bytes::from(zlib.finish().unwrap()), &deflate).unwrap(),
            Bytes::from("deflated")
        );
        let zstd = vec![("content-encoding".to_owned(), "zstd".to_owned())];
        assert!(decode(bytes, &zstd)
            .unwrap_err()
            .contains("decode_compressed_response"));
    }
}
