//! Reading commands off a connection's buffer: RESP arrays of bulk strings
//! (what every client sends) and inline commands (what a person types into
//! `nc`), with the caps checked as each header is read, before any of the
//! frame is buffered (docs/design.md, "The RESP door").
//!
//! A decoder that returns whole frames would buffer a `$1000000000` bulk
//! or a `*1000000` array until it completed; here the header alone is
//! refused. Arguments are offsets into the read buffer: nothing is copied
//! and nothing allocated per command once the argument list has grown (an
//! inline argument's escapes are decoded in place).
//!
//! What is read follows redis-server's own reader (`networking.c`): lengths
//! and counts are integers as its `string2ll` reads them ([`integer`]),
//! inline lines are split as its `sdssplitargs` splits them. One place is
//! stricter: a header or a bulk string not followed by CRLF is an error
//! (Redis skips two bytes, whatever they are).

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
/// the caps so far). A complete inline command is unescaped in place:
/// only its own `n` bytes change.
pub fn parse(
    buf: &mut [u8],
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
    // The common header, a count of one digit (`*2`, `$4`): what
    // [`integer`] would read of it, without the search for its end.
    if let [_, d @ b'0'..=b'9', b'\r', b'\n', ..] = line {
        return Ok(Some((i64::from(d - b'0'), at + 4)));
    }
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
    let n = integer(&line[1..cr]).ok_or(FrameError::BadLength(what))?;
    Ok(Some((n, at + cr + 2)))
}

/// An integer as Redis reads one (`string2ll`): an optional `-`, then
/// digits with no leading zero (`0` alone is zero), nothing else: no `+`,
/// no blank, no `-0`, within `i64`.
pub fn integer(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, text),
    };
    match digits {
        [b'0'] if !negative => return Some(0),
        [b'1'..=b'9', ..] if digits.iter().all(u8::is_ascii_digit) => {}
        _ => return None,
    }
    // Counted below zero, so that `i64::MIN` fits.
    let mut below = 0i64;
    for &d in digits {
        below = below.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?;
    }
    if negative {
        Some(below)
    } else {
        below.checked_neg()
    }
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

/// An inline command: one line (its CR before LF dropped), split into
/// arguments by [`split_inline`].
fn parse_inline(
    buf: &mut [u8],
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
    split_inline(&mut buf[..line_end], limits, args)?;
    Ok(Some(nl + 1))
}

/// Splits `line` as Redis's `sdssplitargs` does: arguments separated by
/// blanks (space, tab, CR, LF, VT, FF; within an unquoted argument only
/// the first four end it); a `"` opens a quote where `\xHH`, `\n`, `\r`,
/// `\t`, `\b`, `\a` stand for their bytes and a backslash before any other
/// byte for that byte; a `'` opens one where only `\'` is an escape. A
/// quote may open within an argument, and its closing quote must end the
/// argument (a blank or the end of the line after it); an unclosed quote,
/// or a closing one followed by more, is [`FrameError::Quotes`]. Each
/// argument is written, unescaped, over its own bytes (never longer than
/// them), so it stays a range of `line`.
fn split_inline(
    line: &mut [u8],
    limits: &FrameLimits,
    args: &mut Vec<Range<usize>>,
) -> Result<(), FrameError> {
    #[derive(PartialEq)]
    enum In {
        Plain,
        Double,
        Single,
    }
    let len = line.len();
    let blank = |b: u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c);
    let hex = |b: Option<&u8>| b.and_then(|b| (*b as char).to_digit(16));
    let mut read = 0;
    loop {
        while read < len && blank(line[read]) {
            read += 1;
        }
        if read == len {
            return Ok(());
        }
        if args.len() == limits.max_args {
            return Err(FrameError::TooManyArgs(
                limits.max_args as i64 + 1,
                limits.max_args,
            ));
        }
        let start = read;
        let mut write = read;
        let mut quote = In::Plain;
        loop {
            let Some(&b) = line.get(read) else {
                if quote != In::Plain {
                    return Err(FrameError::Quotes);
                }
                break;
            };
            let next = line.get(read + 1).copied();
            let (byte, used) = match (&quote, b) {
                (In::Plain, b' ' | b'\t' | b'\r' | b'\n') => break,
                (In::Plain, b'"') => {
                    quote = In::Double;
                    read += 1;
                    continue;
                }
                (In::Plain, b'\'') => {
                    quote = In::Single;
                    read += 1;
                    continue;
                }
                (In::Double, b'\\') if next == Some(b'x') => {
                    match (hex(line.get(read + 2)), hex(line.get(read + 3))) {
                        (Some(h), Some(l)) => ((h * 16 + l) as u8, 4),
                        _ => (b'x', 2),
                    }
                }
                (In::Double, b'\\') if next.is_some() => {
                    let escaped = match next {
                        Some(b'n') => b'\n',
                        Some(b'r') => b'\r',
                        Some(b't') => b'\t',
                        Some(b'b') => 0x08,
                        Some(b'a') => 0x07,
                        other => other.unwrap_or_default(),
                    };
                    (escaped, 2)
                }
                (In::Single, b'\\') if next == Some(b'\'') => (b'\'', 2),
                (In::Double, b'"') | (In::Single, b'\'') => {
                    if next.is_some_and(|n| !blank(n)) {
                        return Err(FrameError::Quotes);
                    }
                    read += 1;
                    break;
                }
                _ => (b, 1),
            };
            line[write] = byte;
            write += 1;
            read += used;
        }
        args.push(start..write);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A command read: its length and its arguments.
    type Read = Option<(usize, Vec<Vec<u8>>)>;

    fn words(buf: &[u8]) -> Result<Read, FrameError> {
        let mut buf = buf.to_vec();
        let mut args = Vec::new();
        let r = parse(&mut buf, &FrameLimits::default(), &mut args)?;
        Ok(r.map(|n| (n, args.iter().map(|r| buf[r.clone()].to_vec()).collect())))
    }

    /// The arguments of the inline command `line`.
    fn inline(line: &[u8]) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut with_end = line.to_vec();
        with_end.extend_from_slice(b"\r\n");
        Ok(words(&with_end)?.expect("a whole line").1)
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

    /// Each line as redis-server 7.0 split it (tried against it).
    #[test]
    fn inline_lines_are_split_as_redis_splits_them() {
        let ok: [(&[u8], &[&[u8]]); 13] = [
            (
                br#"ECHO "a\x41\x4a\n\r\t\b\a\z\\\"""#,
                &[b"ECHO", b"aAJ\n\r\t\x08\x07z\\\""],
            ),
            (br#"ECHO "\xZZ\x4""#, &[b"ECHO", b"xZZx4"]),
            (br"ECHO 'a\'b\n'", &[b"ECHO", b"a'b\\n"]),
            (br#"ECHO ab"c d""#, &[b"ECHO", b"abc d"]),
            (b"ECHO a'b'", &[b"ECHO", b"ab"]),
            (br#"ECHO """#, &[b"ECHO", b""]),
            (b"ECHO \"a\"\x0bb", &[b"ECHO", b"a", b"b"]),
            (b"ECHO a\x0bb", &[b"ECHO", b"a\x0bb"]),
            (b"\x0bECHO\t\x0c x\r", &[b"ECHO", b"x"]),
            (b"ECHO\x0cx", &[b"ECHO\x0cx"]),
            (br#"ECHO "a'b" 'a"b'"#, &[b"ECHO", b"a'b", b"a\"b"]),
            (b"  ", &[]),
            (br#"INCRBY order "+5""#, &[b"INCRBY", b"order", b"+5"]),
        ];
        for (line, expected) in ok {
            let expected: Vec<Vec<u8>> = expected.iter().map(|a| a.to_vec()).collect();
            assert_eq!(
                inline(line),
                Ok(expected),
                "{:?}",
                String::from_utf8_lossy(line)
            );
        }
        for line in [
            &br#"ECHO "ab"cd"#[..],
            b"ECHO 'ab'cd",
            br#"ECHO "a""b""#,
            br#"ECHO a"b"#,
            br"ECHO 'a\\'",
            br#"ECHO "a\"#,
            br#"ECHO "a\""#,
        ] {
            assert_eq!(
                inline(line),
                Err(FrameError::Quotes),
                "{:?}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn integers_are_read_as_redis_reads_them() {
        for (text, n) in [
            (&b"0"[..], 0),
            (b"7", 7),
            (b"-7", -7),
            (b"10000", 10_000),
            (b"9223372036854775807", i64::MAX),
            (b"-9223372036854775808", i64::MIN),
        ] {
            assert_eq!(
                integer(text),
                Some(n),
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
        for text in [
            &b""[..],
            b"+5",
            b"05",
            b"00",
            b"-0",
            b"-",
            b" 5",
            b"5 ",
            b"5.0",
            b"1e3",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"\xd9\xa3",
        ] {
            assert_eq!(integer(text), None, "{:?}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn a_header_of_one_digit_reads_as_integer_reads_it() {
        for d in b'0'..=b'9' {
            for kind in [b'*', b'$'] {
                let line = [kind, d, b'\r', b'\n', b'x'];
                let n = integer(&[d]).unwrap();
                assert_eq!(header(&line, 0, "bulk"), Ok(Some((n, 4))));
                assert_eq!(header(&line[..3], 0, "bulk"), Ok(None), "incomplete: waits");
            }
        }
        // Past the one-digit form: read by the general path.
        assert_eq!(header(b"*10\r\n", 0, "multibulk"), Ok(Some((10, 5))));
        assert_eq!(
            header(b"*1\rx", 0, "multibulk"),
            Err(FrameError::BadLength("multibulk"))
        );
    }

    #[test]
    fn a_length_or_count_redis_refuses_is_refused() {
        for (frame, what) in [
            (&b"*+1\r\n$4\r\nPING\r\n"[..], "multibulk"),
            (b"*01\r\n$4\r\nPING\r\n", "multibulk"),
            (b"*-0\r\n", "multibulk"),
            (b"* 1\r\n", "multibulk"),
            (b"*1 \r\n", "multibulk"),
            (b"*1\r\n$+4\r\nPING\r\n", "bulk"),
            (b"*1\r\n$04\r\nPING\r\n", "bulk"),
            (b"*1\r\n$-0\r\nPING\r\n", "bulk"),
        ] {
            assert_eq!(
                words(frame),
                Err(FrameError::BadLength(what)),
                "{:?}",
                String::from_utf8_lossy(frame)
            );
        }
        // `*-1` carries no command, as in Redis.
        assert_eq!(words(b"*-1\r\n").unwrap(), Some((5, vec![])));
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

        /// Whatever the arguments, written as an inline line of double
        /// quotes with every byte escaped (`\xHH`, or `\n` and the like),
        /// they read back as themselves.
        #[test]
        fn escaped_inline_arguments_read_back_as_written(args in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..20), 1..6))
        {
            let mut line = Vec::new();
            for a in &args {
                line.extend_from_slice(b" \"");
                for &b in a {
                    match b {
                        b'\n' => line.extend_from_slice(b"\\n"),
                        b'"' | b'\\' => line.extend_from_slice(&[b'\\', b]),
                        b if b.is_ascii_alphanumeric() => line.push(b),
                        b => line.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
                    }
                }
                line.push(b'"');
            }
            prop_assert_eq!(inline(&line), Ok(args));
        }

        /// Random bytes never panic: a command, a wait or an error.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = words(&bytes);
        }
    }
}
