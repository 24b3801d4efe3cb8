//! HTTP `Range` for whole packets (RFC 9110 §14): one byte range per
//! request; several ranges are answered with the whole packet, which the
//! RFC allows. `Content-Range` is computed here from the request and the
//! object's size (the R2 object's own range accessor is not used).

/// What to send for a `Range` header on an object of a given size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeAnswer {
    /// No (usable) range: 200 with the whole object.
    Full,
    /// 206 with bytes `start..=end`.
    Partial {
        /// First byte.
        start: u64,
        /// Last byte (inclusive).
        end: u64,
    },
    /// 416 with `Content-Range: bytes */size`.
    Unsatisfiable,
}

impl RangeAnswer {
    /// The `Content-Range` value for a 206 or 416 answer.
    pub fn content_range(&self, size: u64) -> Option<String> {
        match self {
            RangeAnswer::Full => None,
            RangeAnswer::Partial { start, end } => Some(format!("bytes {start}-{end}/{size}")),
            RangeAnswer::Unsatisfiable => Some(format!("bytes */{size}")),
        }
    }

    /// Bytes in the answer's body.
    pub fn length(&self, size: u64) -> u64 {
        match self {
            RangeAnswer::Full => size,
            RangeAnswer::Partial { start, end } => end - start + 1,
            RangeAnswer::Unsatisfiable => 0,
        }
    }
}

/// Interprets a `Range` header for an object of `size` bytes.
pub fn answer(header: Option<&str>, size: u64) -> RangeAnswer {
    let Some(spec) = header.map(str::trim).and_then(|h| h.strip_prefix("bytes=")) else {
        return RangeAnswer::Full;
    };
    if spec.contains(',') {
        return RangeAnswer::Full;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return RangeAnswer::Full;
    };
    let number = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    match (first.trim(), last.trim()) {
        ("", suffix) => match number(suffix) {
            Some(0) => RangeAnswer::Unsatisfiable,
            Some(_) if size == 0 => RangeAnswer::Unsatisfiable,
            Some(n) => RangeAnswer::Partial {
                start: size.saturating_sub(n),
                end: size - 1,
            },
            None => RangeAnswer::Full,
        },
        (start, "") => match number(start) {
            Some(s) if s < size => RangeAnswer::Partial {
                start: s,
                end: size - 1,
            },
            Some(_) => RangeAnswer::Unsatisfiable,
            None => RangeAnswer::Full,
        },
        (start, end) => match (number(start), number(end)) {
            (Some(s), Some(e)) if s > e => RangeAnswer::Full,
            (Some(s), Some(_)) if s >= size => RangeAnswer::Unsatisfiable,
            (Some(s), Some(e)) => RangeAnswer::Partial {
                start: s,
                end: e.min(size - 1),
            },
            _ => RangeAnswer::Full,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RangeAnswer::*;

    #[test]
    fn single_ranges() {
        assert_eq!(answer(Some("bytes=0-9"), 100), Partial { start: 0, end: 9 });
        assert_eq!(
            answer(Some("bytes=90-"), 100),
            Partial { start: 90, end: 99 }
        );
        assert_eq!(
            answer(Some("bytes=-10"), 100),
            Partial { start: 90, end: 99 }
        );
        assert_eq!(
            answer(Some("bytes=-1000"), 100),
            Partial { start: 0, end: 99 }
        );
        assert_eq!(
            answer(Some("bytes=50-1000"), 100),
            Partial { start: 50, end: 99 }
        );
        assert_eq!(
            Partial { start: 0, end: 9 }.content_range(100).unwrap(),
            "bytes 0-9/100"
        );
        assert_eq!(Partial { start: 0, end: 9 }.length(100), 10);
    }

    #[test]
    fn unsatisfiable_ranges() {
        assert_eq!(answer(Some("bytes=100-"), 100), Unsatisfiable);
        assert_eq!(answer(Some("bytes=100-200"), 100), Unsatisfiable);
        assert_eq!(answer(Some("bytes=-0"), 100), Unsatisfiable);
        assert_eq!(answer(Some("bytes=-5"), 0), Unsatisfiable);
        assert_eq!(Unsatisfiable.content_range(100).unwrap(), "bytes */100");
    }

    #[test]
    fn ignored_ranges_serve_everything() {
        assert_eq!(answer(None, 100), Full);
        assert_eq!(answer(Some("items=0-1"), 100), Full);
        assert_eq!(answer(Some("bytes=0-1,5-6"), 100), Full);
        assert_eq!(answer(Some("bytes=9-1"), 100), Full);
        assert_eq!(answer(Some("bytes=a-b"), 100), Full);
        assert_eq!(answer(Some("bytes=+1-2"), 100), Full);
    }
}
