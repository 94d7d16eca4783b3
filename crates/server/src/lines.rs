//! Splitting a streamed body into numbered lines without ever passing on half a line.

/// One line of the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Line {
        line: u64,
        text: String,
    },
    /// Longer than the line limit: rejected, its bytes dropped.
    TooLong {
        line: u64,
    },
    NotUtf8 {
        line: u64,
    },
}

impl Piece {
    pub fn line(&self) -> u64 {
        match self {
            Piece::Line { line, .. } | Piece::TooLong { line } | Piece::NotUtf8 { line } => *line,
        }
    }
}

pub struct LineSplitter {
    pending: Vec<u8>,
    max_line: usize,
    next_line: u64,
    /// The current line passed the limit: drop bytes until its end.
    oversized: bool,
}

impl LineSplitter {
    pub fn new(max_line: usize) -> LineSplitter {
        LineSplitter {
            pending: Vec::new(),
            max_line,
            next_line: 1,
            oversized: false,
        }
    }

    /// The complete lines `bytes` finishes; a trailing partial line waits for more.
    pub fn push(&mut self, mut bytes: &[u8]) -> Vec<Piece> {
        let mut pieces = Vec::new();
        while let Some(end) = bytes.iter().position(|&b| b == b'\n') {
            if !self.oversized {
                self.pending.extend_from_slice(&bytes[..end]);
            }
            pieces.push(self.take_line());
            bytes = &bytes[end + 1..];
        }
        if !self.oversized {
            self.pending.extend_from_slice(bytes);
            if self.pending.len() > self.max_line {
                self.oversized = true;
                self.pending = Vec::new();
            }
        }
        pieces
    }

    /// At a clean end of the body: the last line, if it had no newline.
    pub fn finish(&mut self) -> Option<Piece> {
        (self.oversized || !self.pending.is_empty()).then(|| self.take_line())
    }

    fn take_line(&mut self) -> Piece {
        let line = self.next_line;
        self.next_line += 1;
        if std::mem::take(&mut self.oversized) {
            self.pending.clear();
            return Piece::TooLong { line };
        }
        let mut bytes = std::mem::take(&mut self.pending);
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        if bytes.len() > self.max_line {
            return Piece::TooLong { line };
        }
        match String::from_utf8(bytes) {
            Ok(text) => Piece::Line { line, text },
            Err(_) => Piece::NotUtf8 { line },
        }
    }
}
