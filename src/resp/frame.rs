//! Reading commands off a connection's buffer: RESP arrays of bulk strings
//! (what every client sends) and inline commands (what a person types into
//! `nc`), with the caps checked as each header is read, before any of the
//! frame is buffered (docs/design.md, "The RESP door").
//!
//! A decoder that returns whole frames would buffer a `$1000000000` bulk
//! or a `*1000000` array until it completed; here the header alone is
//! refused. Arguments are offsets into the read buffer: nothing is copied
//! and nothing allocated per command once the argument list has grown.

use std::ops::Range;

/// The caps of one command frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    /// Most bytes of one command, headers included.
    pub max_frame: usize,
    /// Most arguments of one command, its name included.
    pub max_args: usize,
}

impl Default for FrameLimits {
    fn default() -> Self {
        FrameLimits {
            max_frame: 64 * 1024,
            max_args: 1024,
        }
    }
}

/// Why a frame cannot be read: answered as an `ERR Protocol error` and the
/// connection closed (the stream cannot be resynchronised after it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A header that is not `*<n>` / `$<n>` with a count in range.
    #[error("invalid {0} length")]
    BadLength(&'static str),
    /// An array element that is not a bulk string.
    #[error("expected '$', got '{0}'")]
    NotBulk(char),
    /// A bulk string not followed by CRLF.
    #[error("a bulk string must end with CRLF")]
    NoCrlf,
    /// More arguments than [`FrameLimits::max_args`].
    #[error("too many arguments: {0} (at most {1})")]
    TooManyArgs(i64, usize),
    /// A frame larger than [`FrameLimits::max_frame`].
    #[error("a command of more than {0} bytes")]
    TooLarge(usize),
    /// An inline command with an unbalanced quote.
    #[error("unbalanced quotes in request")]
    Quotes,
}

/// Reads one command at the start of `buf` into `args` (offsets into
/// `buf`, cleared first). `Ok(Some(n))`: a command of `n` bytes was read
/// (`args` may be empty: an empty line or `*0`, which is answered with
/// nothing); `Ok(None)`: the command is not complete yet (and is within
/// the caps so far).
pub fn parse(
    buf: &[u8],
    limits: &FrameLimits,
    args: &mut Vec<Range<usize>>,
) -> Result<Option<usize>, FrameError> {
    args.clear();
    match buf.first() {
        None => Ok(None),
        Some(b'*') => parse_array(buf, limits, args),
        Some(_) => parse_inline(buf, limits, args),
    }
}

/// The longest header line (`*`, `$`, sign and 19 digits, CRLF) and then
/// some: a longer one is refused before its end arrives.
const MAX_HEADER: usize = 32;

/// Reads `<prefix><integer>\r\n` at `at`: the integer and the offset past
/// the line, or `None` when the line is not complete.
fn header(buf: &[u8], at: usize, what: &'static str) -> Result<Option<(i64, usize)>, FrameError> {
    let line = &buf[at..];
    let end = line.len().min(MAX_HEADER);
    let Some(cr) = line[..end].iter().position(|&b| b == b'\r') else {
        return if line.len() >= MAX_HEADER {
            Err(FrameError::BadLength(what))
        } else {
            Ok(None)
        };
    };
    if cr + 1 >= line.len() {
        return Ok(None);
    }
    if line[cr + 1] != b'\n' {
        return Err(FrameError::BadLength(what));
    }
    let digits = &line[1..cr];
    let n = std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or(FrameError::BadLength(what))?;
    Ok(Some((n, at + cr + 2)))
}

fn parse_array(
    buf: &[u8],
    limits: &FrameLimits,
    args: &mut Vec<Range<usize>>,
) -> Result<Option<usize>, FrameError> {
    let Some((count, mut at)) = header(buf, 0, "multibulk")? else {
        return Ok(None);
    };
    if count <= 0 {
        // `*0` and `*-1` carry no command; Redis skips them too.
        return Ok(Some(at));
    }
    if count as u64 > limits.max_args as u64 {
        return Err(FrameError::TooManyArgs(count, limits.max_args));
    }
    for _ in 0..count {
        match buf.get(at) {
            None => return incomplete(at, limits),
            Some(b'$') => {}
            Some(&b) => return Err(FrameError::NotBulk(b as char)),
        }
        let Some((len, start)) = header(buf, at, "bulk")? else {
            return incomplete(buf.len(), limits);
        };
        if len < 0 {
            return Err(FrameError::BadLength("bulk"));
        }
        let end = start as u64 + len as u64;
        if end + 2 > limits.max_frame as u64 {
            return Err(FrameError::TooLarge(limits.max_frame));
        }
        let end = end as usize;
        if buf.len() < end + 2 {
            return incomplete(buf.len(), limits);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err(FrameError::NoCrlf);
        }
        args.push(start..end);
        at = end + 2;
    }
    Ok(Some(at))
}

/// Not complete yet: fine while what is buffered fits the cap.
fn incomplete(buffered: usize, limits: &FrameLimits) -> Result<Option<usize>, FrameError> {
    if buffered >= limits.max_frame {
        Err(FrameError::TooLarge(limits.max_frame))
    } else {
        Ok(None)
    }
}

/// An inline command: one line, arguments split on spaces and tabs, with
/// `"..."` and `'...'` quoting an argument (no escapes inside).
fn parse_inline(
    buf: &[u8],
    limits: &FrameLimits,
    args: &mut Vec<Range<usize>>,
) -> Result<Option<usize>, FrameError> {
    let Some(nl) = buf.iter().take(limits.max_frame).position(|&b| b == b'\n') else {
        return incomplete(buf.len(), limits);
    };
    let mut line_end = nl;
    if line_end > 0 && buf[line_end - 1] == b'\r' {
        line_end -= 1;
    }
    let mut i = 0;
    while i < line_end {
        let b = buf[i];
        if b == b' ' || b == b'\t' {
            i += 1;
            continue;
        }
        if args.len() == limits.max_args {
            return Err(FrameError::TooManyArgs(
                limits.max_args as i64 + 1,
                limits.max_args,
            ));
        }
        if b == b'"' || b == b'\'' {
            let close = buf[i + 1..line_end]
                .iter()
                .position(|&c| c == b)
                .ok_or(FrameError::Quotes)?;
            args.push(i + 1..i + 1 + close);
            i += close + 2;
        } else {
            let len = buf[i..line_end]
                .iter()
                .position(|&c| c == b' ' || c == b'\t')
                .unwrap_or(line_end - i);
            args.push(i..i + len);
            i += len;
        }
    }
    Ok(Some(nl + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A command read: its length and its arguments.
    type Read = Option<(usize, Vec<Vec<u8>>)>;

    fn words(buf: &[u8]) -> Result<Read, FrameError> {
        let mut args = Vec::new();
        let r = parse(buf, &FrameLimits::default(), &mut args)?;
        Ok(r.map(|n| (n, args.iter().map(|r| buf[r.clone()].to_vec()).collect())))
    }

    fn encode(args: &[Vec<u8>]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    #[test]
    fn an_array_of_bulk_strings_is_read_whole_and_a_part_of_it_waits() {
        let frame = b"*2\r\n$4\r\nINCR\r\n$5\r\norder\r\n";
        let (n, args) = words(frame).unwrap().unwrap();
        assert_eq!(n, frame.len());
        assert_eq!(args, vec![b"INCR".to_vec(), b"order".to_vec()]);
        for cut in 0..frame.len() {
            assert_eq!(words(&frame[..cut]).unwrap(), None, "cut at {cut}");
        }
    }

    #[test]
    fn inline_commands_split_on_spaces_and_honour_quotes() {
        let (n, args) = words(b"INCRBY  order 10\r\nPING\r\n").unwrap().unwrap();
        assert_eq!(n, 18);
        assert_eq!(
            args,
            vec![b"INCRBY".to_vec(), b"order".to_vec(), b"10".to_vec()]
        );
        let (_, args) = words(b"ECHO \"a b\" 'c'\n").unwrap().unwrap();
        assert_eq!(args, vec![b"ECHO".to_vec(), b"a b".to_vec(), b"c".to_vec()]);
        assert_eq!(words(b"ECHO \"a b\n"), Err(FrameError::Quotes));
        let (n, args) = words(b"\r\n").unwrap().unwrap();
        assert_eq!((n, args.len()), (2, 0));
    }

    #[test]
    fn caps_are_checked_on_the_header_before_the_frame_arrives() {
        assert_eq!(
            words(b"*1000000\r\n"),
            Err(FrameError::TooManyArgs(1_000_000, 1024))
        );
        assert_eq!(
            words(b"*1\r\n$1073741824\r\n"),
            Err(FrameError::TooLarge(64 * 1024))
        );
        assert_eq!(words(b"*1\r\n$-1\r\n"), Err(FrameError::BadLength("bulk")));
        assert_eq!(words(b"*x\r\n"), Err(FrameError::BadLength("multibulk")));
        assert_eq!(words(b"*1\r\n:1\r\n"), Err(FrameError::NotBulk(':')));
        assert_eq!(words(b"*1\r\n$1\r\nab\r\n"), Err(FrameError::NoCrlf));
        assert_eq!(words(&[b'*'; 40]), Err(FrameError::BadLength("multibulk")));
        // An inline line with no end, past the cap.
        assert_eq!(
            words(&vec![b'a'; 64 * 1024]),
            Err(FrameError::TooLarge(64 * 1024))
        );
        assert_eq!(words(b"*0\r\n").unwrap(), Some((4, vec![])));
    }

    proptest! {
        /// Whatever the arguments, a frame reads back as them, and every
        /// proper prefix of it waits for more.
        #[test]
        fn frames_read_back_as_written(args in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..40), 1..8))
        {
            let frame = encode(&args);
            let (n, read) = words(&frame).unwrap().unwrap();
            prop_assert_eq!(n, frame.len());
            prop_assert_eq!(read, args);
            for cut in 0..frame.len() {
                prop_assert_eq!(words(&frame[..cut]).unwrap(), None);
            }
        }

        /// Random bytes never panic: a command, a wait or an error.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = words(&bytes);
        }
    }
}
