//! Numbers and names as a person reads them: sizes in binary units,
//! digests shortened as git shortens commit ids.

use packet_core::DigestPrefix;

/// How many hex digits a shortened digest keeps (git's default is 7 to
/// 12; 12 keeps collisions out of any one store's reach).
pub const SHORT_HEX: usize = 12;

/// `18 B`, `5.5 KiB`, `1.2 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value >= 100.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `sha256:1a2b3c4d5e6f` from `sha256:<64 hex>` or a longer prefix of one
/// (anything else unchanged).
pub fn short_digest(digest: &str) -> String {
    match DigestPrefix::parse(digest) {
        Ok(prefix) => prefix.shortened(SHORT_HEX).to_string(),
        Err(_) => digest.to_owned(),
    }
}

/// `1 file`, `2 files`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `0.42 s`, `3.1 s`, `2 min 5 s`.
pub fn seconds(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.2} s")
    } else if s < 120.0 {
        format!("{s:.1} s")
    } else {
        let whole = s.round() as u64;
        format!("{} min {} s", whole / 60, whole % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1.0 KiB");
        assert_eq!(bytes(5632), "5.5 KiB");
        assert_eq!(bytes(27 * 1024 + 300), "27.3 KiB");
        assert_eq!(bytes(150 << 20), "150 MiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(bytes(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn digests_shorten_like_git() {
        let d = format!("sha256:{}", &"1a2b3c4d5e6f".repeat(6)[..64]);
        assert_eq!(short_digest(&d), "sha256:1a2b3c4d5e6f");
        assert_eq!(short_digest("absent"), "absent");
        assert_eq!(short_digest("sha256:abc"), "sha256:abc");
    }

    #[test]
    fn counts_and_times() {
        assert_eq!(count(1, "file", "files"), "1 file");
        assert_eq!(count(2, "file", "files"), "2 files");
        assert_eq!(seconds(0.4213), "0.42 s");
        assert_eq!(seconds(42.25), "42.2 s");
        assert_eq!(seconds(125.0), "2 min 5 s");
    }
}
