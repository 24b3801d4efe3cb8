//! What a request body may hold (docs/transfer.md, "Decoding limits"):
//! at most so many bytes as sent and so many once decoded, the count that
//! holds a body to both as it arrives, the refusals, and what becomes of
//! the rest of a refused body. Pure; `body` reads the bytes.

use crate::problem::Problem;

/// After a refusal, the rest of a body is read and dropped, never decoded,
/// while no more than this many bytes of it are left to come (the answer
/// then reaches the client and the connection stays usable). A body with
/// more left is cancelled and the runtime closes the connection. More than
/// Cloudflare's 100 MB request cap on most plans; reading it costs the
/// isolate a fraction of a second of waiting and almost no CPU.
pub const DRAIN_LIMIT: u64 = 128 << 20;

/// A cap a body went past, with its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Over {
    /// More than this many bytes as sent.
    Sent(u64),
    /// More than this many bytes once decoded.
    Decoded(u64),
}

/// What a body may hold, and the refusal of one that holds more.
#[derive(Clone, Copy, Debug)]
pub struct Caps {
    /// Most bytes as sent (`Content-Length`, or counted as they arrive).
    pub sent: u64,
    /// Most bytes once decoded (counted as they come out of the decoder).
    pub decoded: u64,
    /// The refusal of a body over a cap.
    pub refuse: fn(Over) -> Problem,
}

impl Caps {
    /// At most `decoded` bytes once decoded, and what any encoding needs to
    /// send that many: gzip and zstd add a few bytes per block to bytes they
    /// cannot compress, well under 1/128 of them, and a header.
    pub fn decoded(decoded: u64, refuse: fn(Over) -> Problem) -> Caps {
        Caps {
            sent: decoded.saturating_add(decoded / 128 + (64 << 10)),
            decoded,
            refuse,
        }
    }
}

/// 413 `body_too_large` (as sent) or `decoded_too_large` (once decoded).
pub fn too_large(over: Over) -> Problem {
    match over {
        Over::Sent(max) => Problem::too_large(
            "body_too_large",
            format!("this body is over {} as sent", bytes(max)),
            format!(
                "send at most {} (proto/openapi.yaml gives each route's cap)",
                bytes(max)
            ),
        ),
        Over::Decoded(max) => decoded_too_large(max),
    }
}

/// 413 `decoded_too_large`: a compressed body that decodes past its cap.
pub fn decoded_too_large(max: u64) -> Problem {
    Problem::too_large(
        "decoded_too_large",
        format!(
            "this body decodes to more than {}; the rest was not decoded",
            bytes(max)
        ),
        format!(
            "send a body of at most {} once decoded (a smaller one: fewer chunks per part, a smaller manifest); the cap is the same for every Content-Encoding",
            bytes(max)
        ),
    )
}

/// `n` bytes, in the largest binary unit that divides it.
pub fn bytes(n: u64) -> String {
    match n {
        0 => "0 bytes".into(),
        n if n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// A body's bytes counted against its caps as they arrive.
#[derive(Clone, Copy, Debug)]
pub struct Meter {
    caps: Caps,
    identity: bool,
    sent: u64,
    decoded: u64,
}

impl Meter {
    /// A count for a body; `identity` when its bytes as sent are its
    /// decoded bytes (then it is held to the smaller cap, as sent).
    pub fn new(caps: Caps, identity: bool) -> Meter {
        Meter {
            caps,
            identity,
            sent: 0,
            decoded: 0,
        }
    }

    /// Bytes counted as sent.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Bytes counted once decoded.
    pub fn decoded(&self) -> u64 {
        self.decoded
    }

    fn sent_cap(&self) -> u64 {
        if self.identity {
            self.caps.sent.min(self.caps.decoded)
        } else {
            self.caps.sent
        }
    }

    /// Checks a declared `Content-Length` before any byte is read.
    pub fn declared(&self, length: u64) -> Result<(), Over> {
        let cap = self.sent_cap();
        if length > cap {
            return Err(Over::Sent(cap));
        }
        Ok(())
    }

    /// Counts `n` bytes as sent.
    pub fn add_sent(&mut self, n: u64) -> Result<(), Over> {
        self.sent = self.sent.saturating_add(n);
        self.declared(self.sent)
    }

    /// Counts `n` bytes decoded.
    pub fn add_decoded(&mut self, n: u64) -> Result<(), Over> {
        self.decoded = self.decoded.saturating_add(n);
        if self.decoded > self.caps.decoded {
            return Err(Over::Decoded(self.caps.decoded));
        }
        Ok(())
    }

    /// The refusal of a body over `over`.
    pub fn refusal(&self, over: Over) -> Problem {
        (self.caps.refuse)(over)
    }
}

/// What to do with the rest of a refused (or unread) body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rest {
    /// Read and drop at most this many more bytes as sent, then cancel
    /// what is still left.
    Drain(u64),
    /// Cancel it now.
    Cancel,
}

/// The rest of a body of `length` bytes (if declared) of which `read`
/// were read: drained while what is left is within [`DRAIN_LIMIT`].
pub fn rest(length: Option<u64>, read: u64) -> Rest {
    match length {
        Some(length) if length.saturating_sub(read) > DRAIN_LIMIT => Rest::Cancel,
        Some(length) => Rest::Drain(length.saturating_sub(read)),
        None => Rest::Drain(DRAIN_LIMIT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(sent: u64, decoded: u64) -> Caps {
        Caps {
            sent,
            decoded,
            refuse: too_large,
        }
    }

    #[test]
    fn a_compressed_body_is_held_to_both_caps() {
        let mut m = Meter::new(caps(100, 1000), false);
        assert_eq!(m.declared(100), Ok(()));
        assert_eq!(m.declared(101), Err(Over::Sent(100)));
        assert_eq!(m.add_sent(60), Ok(()));
        assert_eq!(m.add_decoded(999), Ok(()));
        assert_eq!(m.add_decoded(1), Ok(()));
        assert_eq!(m.add_decoded(1), Err(Over::Decoded(1000)));
        assert_eq!(m.add_sent(40), Ok(()));
        assert_eq!(m.add_sent(1), Err(Over::Sent(100)));
        assert_eq!((m.sent(), m.decoded()), (101, 1001));
    }

    #[test]
    fn an_identity_body_is_held_to_the_smaller_cap_as_sent() {
        let m = Meter::new(caps(2000, 1000), true);
        assert_eq!(m.declared(1000), Ok(()));
        assert_eq!(m.declared(1001), Err(Over::Sent(1000)));
        let mut m = Meter::new(caps(10, 1000), true);
        assert_eq!(m.add_sent(11), Err(Over::Sent(10)));
        let mut m = Meter::new(Caps::decoded(64 << 10, too_large), true);
        assert_eq!(m.add_sent(64 << 10), Ok(()));
        assert_eq!(m.add_decoded(64 << 10), Ok(()));
        assert_eq!(m.add_sent(1), Err(Over::Sent(64 << 10)));
    }

    #[test]
    fn counts_saturate() {
        let mut m = Meter::new(Caps::decoded(u64::MAX, too_large), false);
        assert_eq!(m.add_sent(u64::MAX), Ok(()));
        assert_eq!(m.add_sent(u64::MAX), Ok(()));
        assert_eq!(m.add_decoded(u64::MAX), Ok(()));
        assert_eq!(m.sent(), u64::MAX);
    }

    #[test]
    fn what_is_sent_for_a_decoded_cap_leaves_room_for_compression_overhead() {
        let c = Caps::decoded(64 << 20, too_large);
        assert_eq!(c.decoded, 64 << 20);
        assert_eq!(c.sent, (64 << 20) + (512 << 10) + (64 << 10));
    }

    #[test]
    fn refusals_are_typed_and_say_the_cap() {
        let p = too_large(Over::Sent(5 << 20));
        assert_eq!((p.status, p.error.code()), (413, "body_too_large"));
        assert!(p.error.message().contains("5 MiB"), "{}", p.error.message());
        let p = too_large(Over::Decoded(16 << 20));
        assert_eq!((p.status, p.error.code()), (413, "decoded_too_large"));
        assert!(p.error.message().contains("16 MiB"));
        assert_eq!(bytes(65_536), "64 KiB");
        assert_eq!(bytes(1000), "1000 bytes");
    }

    #[test]
    fn the_rest_of_a_refused_body_is_drained_only_when_little_is_left() {
        assert_eq!(rest(Some(10 << 20), 1 << 20), Rest::Drain(9 << 20));
        assert_eq!(rest(Some(DRAIN_LIMIT + 5), 5), Rest::Drain(DRAIN_LIMIT));
        assert_eq!(rest(Some(DRAIN_LIMIT + 6), 5), Rest::Cancel);
        assert_eq!(rest(Some(100), 200), Rest::Drain(0));
        assert_eq!(rest(None, 1 << 30), Rest::Drain(DRAIN_LIMIT));
    }
}
