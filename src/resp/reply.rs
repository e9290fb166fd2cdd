//! Writing replies: RESP2, or RESP3 after `HELLO 3` (maps and nulls of
//! their own; every other reply seqd sends is the same in both).

/// The replies of one read, written to the socket together.
#[derive(Debug, Default)]
pub struct Out {
    /// The encoded replies.
    pub buf: Vec<u8>,
    /// The protocol the connection speaks: 2 or 3.
    pub proto: u8,
}

impl Out {
    /// An empty reply buffer speaking RESP2.
    pub fn new() -> Self {
        Out {
            buf: Vec::with_capacity(4096),
            proto: 2,
        }
    }

    /// `+text`.
    pub fn simple(&mut self, text: &str) {
        self.line(b'+', text.as_bytes());
    }

    /// `-CODE message`: the text with CR and LF replaced, so a message
    /// cannot end the line early.
    pub fn error(&mut self, code: &str, message: &str) {
        self.buf.push(b'-');
        self.buf.extend_from_slice(code.as_bytes());
        self.buf.push(b' ');
        self.buf.extend(
            message
                .bytes()
                .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `:n`.
    pub fn int(&mut self, n: i64) {
        let mut digits = itoa::Buffer::new();
        self.line(b':', digits.format(n).as_bytes());
    }

    /// `$len` and the bytes.
    pub fn bulk(&mut self, bytes: &[u8]) {
        let mut digits = itoa::Buffer::new();
        self.line(b'$', digits.format(bytes.len()).as_bytes());
        self.buf.extend_from_slice(bytes);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// The null reply: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        if self.proto == 3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"$-1\r\n");
        }
    }

    /// The header of an array of `n` elements.
    pub fn array(&mut self, n: usize) {
        let mut digits = itoa::Buffer::new();
        self.line(b'*', digits.format(n).as_bytes());
    }

    /// The header of a map of `n` pairs: `%n` in RESP3, an array of `2n`
    /// elements in RESP2.
    pub fn map(&mut self, n: usize) {
        if self.proto == 3 {
            let mut digits = itoa::Buffer::new();
            self.line(b'%', digits.format(n).as_bytes());
        } else {
            self.array(2 * n);
        }
    }

    fn line(&mut self, kind: u8, text: &[u8]) {
        self.buf.push(kind);
        self.buf.extend_from_slice(text);
        self.buf.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_encoded_as_redis_encodes_them() {
        let mut out = Out::new();
        out.simple("OK");
        out.int(-42);
        out.bulk(b"a\r\nb");
        out.null();
        out.array(2);
        out.map(1);
        out.error("ERR", "two\r\nlines");
        assert_eq!(
            out.buf,
            b"+OK\r\n:-42\r\n$4\r\na\r\nb\r\n$-1\r\n*2\r\n*2\r\n-ERR two  lines\r\n".to_vec()
        );
        let mut out = Out {
            proto: 3,
            ..Out::new()
        };
        out.null();
        out.map(2);
        assert_eq!(out.buf, b"_\r\n%2\r\n".to_vec());
    }
}
