//! Newline-delimited messages read with a size limit, so a client or server that sends an
//! endless line cannot make the engine buffer without bound.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// One read from a newline-delimited stream.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// The stream ended (an unterminated last line is returned as a line first).
    Eof,
    /// A whole line, without its `\n` (and without a `\r` before it).
    Line(Vec<u8>),
    /// A line over the limit: its first `limit` bytes. The rest of the line is still unread:
    /// call [`finish_line`] to pass it on or drop it.
    TooLong(Vec<u8>),
}

/// Reads the next line, stopping at `limit` bytes.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    limit: usize,
) -> std::io::Result<Read> {
    let mut line = Vec::new();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if line.is_empty() {
                Read::Eof
            } else {
                Read::Line(trim_cr(line))
            });
        }
        let room = limit.saturating_sub(line.len());
        match available.iter().position(|&b| b == b'\n') {
            Some(end) if end <= room => {
                line.extend_from_slice(&available[..end]);
                reader.consume(end + 1);
                return Ok(Read::Line(trim_cr(line)));
            }
            _ => {
                let take = available.len().min(room);
                line.extend_from_slice(&available[..take]);
                reader.consume(take);
                if line.len() >= limit {
                    return Ok(Read::TooLong(line));
                }
            }
        }
    }
}

/// Reads the rest of a line that was too long, writing it to `sink` when there is one (and
/// the terminating newline with it), and showing each piece to `inspect`. Returns how many
/// bytes the rest had.
pub(crate) async fn finish_line<R, W>(
    reader: &mut R,
    mut sink: Option<&mut W>,
    inspect: &mut (dyn FnMut(&[u8]) + Send),
) -> std::io::Result<u64>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut seen = 0u64;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(seen);
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(end) => (&available[..=end], true),
            None => (available, false),
        };
        inspect(chunk);
        if let Some(sink) = sink.as_deref_mut() {
            sink.write_all(chunk).await?;
        }
        let n = chunk.len();
        seen += n as u64;
        reader.consume(n);
        if done {
            return Ok(seen);
        }
    }
}

fn trim_cr(mut line: Vec<u8>) -> Vec<u8> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    #[tokio::test]
    async fn lines_are_split_and_limited() {
        let data: &[u8] = b"one\r\ntwo\n0123456789abc\nlast";
        let mut reader = BufReader::with_capacity(4, data);
        assert_eq!(
            read_line(&mut reader, 10).await.unwrap(),
            Read::Line(b"one".to_vec())
        );
        assert_eq!(
            read_line(&mut reader, 10).await.unwrap(),
            Read::Line(b"two".to_vec())
        );
        assert_eq!(
            read_line(&mut reader, 10).await.unwrap(),
            Read::TooLong(b"0123456789".to_vec())
        );
        let (mut rest, mut seen) = (Vec::new(), Vec::new());
        let mut inspect = |piece: &[u8]| seen.extend_from_slice(piece);
        let passed = finish_line(&mut reader, Some(&mut rest), &mut inspect).await;
        assert_eq!(passed.unwrap(), 4);
        assert_eq!(rest, b"abc\n");
        assert_eq!(seen, b"abc\n");
        assert_eq!(
            read_line(&mut reader, 10).await.unwrap(),
            Read::Line(b"last".to_vec())
        );
        assert_eq!(read_line(&mut reader, 10).await.unwrap(), Read::Eof);
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_limit_is_whole() {
        let data: &[u8] = b"0123456789\nx\n";
        let mut reader = BufReader::with_capacity(3, data);
        assert_eq!(
            read_line(&mut reader, 10).await.unwrap(),
            Read::Line(b"0123456789".to_vec())
        );
        assert_eq!(
            read_line(&mut reader, 10).await.unwrap(),
            Read::Line(b"x".to_vec())
        );
    }
}
