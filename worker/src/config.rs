//! Settings read from the Worker's variables (`[vars]` in wrangler.toml,
//! `--var` on `wrangler dev`). Unset or malformed values fall back to the
//! defaults documented in docs/worker.md.

use packet_core::Limits;

use crate::auth::ReadAccess;
use crate::multipart::MIN_PART_SIZE;

/// Where the whole-packet SHA-256 is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketHasher {
    /// The runtime's native `crypto.DigestStream` (packet-core hashes
    /// members only).
    Platform,
    /// packet-core, in wasm.
    Core,
}

/// The Worker's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Limits passed to packet-core (clamped to the format's).
    pub limits: Limits,
    /// Largest body a single `PUT /v1/packets/{digest}` accepts.
    pub max_single_upload_bytes: u64,
    /// Part size when a client does not ask for one.
    pub default_part_size: u64,
    /// Who may read.
    pub read_access: ReadAccess,
    /// `Access-Control-Allow-Origin`.
    pub cors_origin: String,
    /// Where the packet digest is computed.
    pub packet_hasher: PacketHasher,
}

impl Config {
    /// Reads the settings through `var` (a variable's value by name).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Config {
        let number = |name: &str| var(name).and_then(|v| v.trim().parse::<u64>().ok());
        let limits = Limits {
            max_packet_bytes: number("MAX_PACKET_BYTES").unwrap_or(Limits::FORMAT.max_packet_bytes),
            max_members: number("MAX_MEMBERS").unwrap_or(Limits::FORMAT.max_members),
            ..Limits::FORMAT
        }
        .clamped();
        let max_single_upload_bytes = number("MAX_SINGLE_UPLOAD_BYTES").unwrap_or(64 << 20).max(1);
        let default_part_size = number("PART_SIZE_BYTES")
            .unwrap_or(32 << 20)
            .clamp(MIN_PART_SIZE, max_single_upload_bytes.max(MIN_PART_SIZE));
        Config {
            limits,
            max_single_upload_bytes,
            default_part_size,
            read_access: ReadAccess::parse(var("READ_ACCESS").as_deref()),
            cors_origin: var("CORS_ORIGIN")
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| "*".into()),
            packet_hasher: match var("PACKET_HASHER").as_deref().map(str::trim) {
                Some("core") => PacketHasher::Core,
                _ => PacketHasher::Platform,
            },
        }
    }

    /// The largest part a client may ask for.
    pub fn max_part_size(&self) -> u64 {
        self.max_single_upload_bytes.max(MIN_PART_SIZE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let c = Config::from_vars(|_| None);
        assert_eq!(c.limits, Limits::FORMAT);
        assert_eq!(c.max_single_upload_bytes, 64 << 20);
        assert_eq!(c.default_part_size, 32 << 20);
        assert_eq!(c.read_access, ReadAccess::Public);
        assert_eq!(c.cors_origin, "*");
        assert_eq!(c.packet_hasher, PacketHasher::Platform);
    }

    #[test]
    fn limits_can_tighten_but_not_loosen() {
        let c = Config::from_vars(|name| match name {
            "MAX_PACKET_BYTES" => Some("4096".into()),
            "MAX_MEMBERS" => Some("99999999".into()),
            "PART_SIZE_BYTES" => Some("1".into()),
            "READ_ACCESS" => Some("token".into()),
            "PACKET_HASHER" => Some("core".into()),
            _ => None,
        });
        assert_eq!(c.limits.max_packet_bytes, 4096);
        assert_eq!(c.limits.max_members, Limits::FORMAT.max_members);
        assert_eq!(c.default_part_size, MIN_PART_SIZE);
        assert_eq!(c.read_access, ReadAccess::Token);
        assert_eq!(c.packet_hasher, PacketHasher::Core);
    }
}
