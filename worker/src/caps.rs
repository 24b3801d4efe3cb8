//! What a request body may hold (docs/transfer.md, "Decoding limits"):
//! at most so many bytes as sent, the count that holds a body there as it
//! arrives, the refusal, and what becomes of the rest of a refused body.
//! Every body is taken as it is sent (`Content-Encoding: identity`; a
//! push's chunks are compressed one by one): what a body's frames decode
//! to is held by its chunk batch's limits, from the table, before a frame
//! is decoded, and each frame to its raw size (`storage/frames.rs`). Pure;
//! `body` reads the bytes.

use crate::problem::Problem;
use pillbox_wire::ApiCode;

/// After a refusal, the rest of a body is read and dropped, never decoded,
/// while no more than this many bytes of it are left to come (the answer
/// then reaches the client and the connection stays usable). A body with
/// more left is cancelled and the runtime closes the connection. More than
/// Cloudflare's 100 MB request cap on most plans; reading it costs the
/// isolate a fraction of a second of waiting and almost no CPU.
pub const DRAIN_LIMIT: u64 = 128 << 20;

/// What a body may hold, and the refusal of one that holds more.
#[derive(Clone, Copy, Debug)]
pub struct Caps {
    /// Most bytes as sent (`Content-Length`, or counted as they arrive).
    pub sent: u64,
    /// The refusal of a body over `sent` (given the cap).
    pub refuse: fn(u64) -> Problem,
}

impl Caps {
    /// At most `sent` bytes, else 413 `body_too_large`.
    pub fn bytes(sent: u64) -> Caps {
        Caps {
            sent,
            refuse: too_large,
        }
    }
}

/// 413 `body_too_large`: a body over its cap as sent.
pub fn too_large(max: u64) -> Problem {
    Problem::new(
        ApiCode::BodyTooLarge,
        format!("this body is over {} as sent", bytes(max)),
        format!(
            "send at most {} (proto/openapi.yaml gives each route's cap)",
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

/// A body's bytes counted against its cap as they arrive.
#[derive(Clone, Copy, Debug)]
pub struct Meter {
    caps: Caps,
    sent: u64,
}

impl Meter {
    /// A count for a body held to `caps`.
    pub fn new(caps: Caps) -> Meter {
        Meter { caps, sent: 0 }
    }

    /// Bytes counted.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Checks a declared `Content-Length` before any byte is read.
    pub fn declared(&self, length: u64) -> Result<(), Problem> {
        if length > self.caps.sent {
            return Err((self.caps.refuse)(self.caps.sent));
        }
        Ok(())
    }

    /// Counts `n` more bytes: refused once the count passes the cap.
    pub fn add(&mut self, n: u64) -> Result<(), Problem> {
        self.sent = self.sent.saturating_add(n);
        self.declared(self.sent)
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

    fn refused(r: Result<(), Problem>) -> (u16, String, String) {
        let p = r.unwrap_err();
        (
            p.status,
            p.error.code().to_string(),
            p.error.message().into(),
        )
    }

    #[test]
    fn a_declared_length_over_the_cap_is_refused_before_a_byte() {
        let m = Meter::new(Caps::bytes(64 << 10));
        assert!(m.declared(64 << 10).is_ok());
        let (status, code, message) = refused(m.declared((64 << 10) + 1));
        assert_eq!((status, code.as_str()), (413, "body_too_large"));
        assert!(message.contains("64 KiB"), "{message}");
        assert_eq!(m.sent(), 0);
    }

    #[test]
    fn bytes_are_counted_as_they_arrive_and_refused_past_the_cap() {
        let mut m = Meter::new(Caps::bytes(100));
        assert!(m.add(60).is_ok());
        assert!(m.add(40).is_ok());
        assert_eq!(refused(m.add(1)).1, "body_too_large");
        assert_eq!(m.sent(), 101);
    }

    #[test]
    fn a_route_names_its_own_refusal() {
        fn part_too_large(most: u64) -> Problem {
            Problem::new(
                ApiCode::PartTooLarge,
                format!("at most {most}"),
                "send less",
            )
        }
        let mut m = Meter::new(Caps {
            sent: 10,
            refuse: part_too_large,
        });
        let (status, code, message) = refused(m.add(11));
        assert_eq!(
            (status, code.as_str(), message.as_str()),
            (413, "part_too_large", "at most 10")
        );
    }

    #[test]
    fn counts_saturate() {
        let mut m = Meter::new(Caps::bytes(u64::MAX));
        assert!(m.add(u64::MAX).is_ok());
        assert!(m.add(u64::MAX).is_ok());
        assert_eq!(m.sent(), u64::MAX);
    }

    #[test]
    fn sizes_are_said_in_their_unit() {
        assert_eq!(bytes(5 << 20), "5 MiB");
        assert_eq!(bytes(65_536), "64 KiB");
        assert_eq!(bytes(1000), "1000 bytes");
        assert_eq!(bytes(0), "0 bytes");
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
