//! The format's limits (docs/session-packet.md, "Limits").

use crate::error::{Error, ErrorCode};
use crate::format::Format;

/// Upper bounds a reader enforces before it reads any body.
///
/// [`Limits::FORMAT`] holds the format's maximums; a consumer may tighten
/// them (an edge isolate may refuse packets larger than it can afford) but
/// never loosen them: constructors clamp to the format's maximums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest packet, in bytes, headers and end marker included.
    pub max_packet_bytes: u64,
    /// Most members, directories and symlinks included, `packet.json` not.
    pub max_members: u64,
    /// Longest member path or symlink target, in bytes.
    pub max_path_bytes: usize,
    /// Largest `packet.json`, in bytes.
    pub max_manifest_bytes: u64,
}

impl Limits {
    /// The format's maximums: 16 GiB (1 GiB for a /1 packet, see
    /// [`Limits::for_format`]), 250,000 members, 4096-byte paths, 64 MiB of
    /// manifest.
    pub const FORMAT: Limits = Limits {
        max_packet_bytes: Format::V2.max_packet_bytes(),
        max_members: 250_000,
        max_path_bytes: 4096,
        max_manifest_bytes: 64 << 20,
    };

    /// These limits, each clamped to the format's maximum.
    pub fn clamped(self) -> Limits {
        Limits {
            max_packet_bytes: self.max_packet_bytes.min(Self::FORMAT.max_packet_bytes),
            max_members: self.max_members.min(Self::FORMAT.max_members),
            max_path_bytes: self.max_path_bytes.min(Self::FORMAT.max_path_bytes),
            max_manifest_bytes: self.max_manifest_bytes.min(Self::FORMAT.max_manifest_bytes),
        }
    }
}

impl Limits {
    /// These limits, clamped to the format's maximums and to those of
    /// version `format` (a /1 packet is at most 1 GiB).
    pub fn for_format(self, format: Format) -> Limits {
        let clamped = self.clamped();
        Limits {
            max_packet_bytes: clamped.max_packet_bytes.min(format.max_packet_bytes()),
            ..clamped
        }
    }
}

impl Limits {
    /// Refuses a packet of `size` bytes if it is larger than these limits
    /// allow (`limit_size`): a size a manifest determines, or one declared
    /// before a byte is read (a request's or a response's length), so
    /// that nothing is read for it.
    pub fn check_packet_size(&self, size: u64) -> Result<(), Error> {
        if size > self.max_packet_bytes {
            return Err(Error::new(
                ErrorCode::LimitSize,
                alloc::format!(
                    "the packet is {size} bytes, the limit is {}",
                    self.max_packet_bytes
                ),
            ));
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::FORMAT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_over_the_size_limit_is_refused_with_limit_size() {
        let limits = Limits {
            max_packet_bytes: 4096,
            ..Limits::FORMAT
        };
        assert_eq!(limits.check_packet_size(4096), Ok(()));
        let e = limits.check_packet_size(4097).unwrap_err();
        assert_eq!(e.code(), ErrorCode::LimitSize);
        assert_eq!(e.message(), "the packet is 4097 bytes, the limit is 4096");
        assert_eq!(e.path(), None);
    }
}
