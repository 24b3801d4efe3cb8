//! The versions of the format (docs/session-packet.md §1, §8, §9): what
//! the manifest's `format` key names, what names a packet of each, and
//! its size limit. A leaf: the limits, the manifest and the reader all
//! ask it.

/// The format id of the packets this crate writes: the value of the
/// manifest's `format` key.
pub const FORMAT_ID: &str = Format::CURRENT.id();

/// The versions of the format, named by the manifest's `format` key.
///
/// The two share every byte rule (docs/session-packet.md §1 to §8); they
/// differ in what names a packet (§9) and in the size limit (§8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    /// `pillbox.session-packet/1`: named by the SHA-256 of the whole file;
    /// at most 1 GiB. Read, never written.
    V1,
    /// `pillbox.session-packet/2`: named by the SHA-256 of `packet.json`'s
    /// exact bytes, which determine every other byte of the packet.
    V2,
}

impl Format {
    /// The version this crate writes.
    pub const CURRENT: Format = Format::V2;

    /// Every version a reader accepts, oldest first.
    pub const ALL: [Format; 2] = [Format::V1, Format::V2];

    /// The manifest's `format` value.
    pub const fn id(self) -> &'static str {
        match self {
            Format::V1 => "pillbox.session-packet/1",
            Format::V2 => "pillbox.session-packet/2",
        }
    }

    /// The version whose id is `id`.
    pub fn from_id(id: &str) -> Option<Format> {
        Self::ALL.into_iter().find(|f| f.id() == id)
    }

    /// Whether the packet digest is the SHA-256 of `packet.json` alone
    /// (/2) rather than of the whole file (/1).
    pub const fn named_by_manifest(self) -> bool {
        matches!(self, Format::V2)
    }

    /// The largest packet of this version, in bytes, headers and end
    /// marker included: 1 GiB for /1, 16 GiB for /2.
    pub const fn max_packet_bytes(self) -> u64 {
        match self {
            Format::V1 => 1 << 30,
            Format::V2 => 1 << 34,
        }
    }
}
