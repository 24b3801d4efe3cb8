//! The ustar header codec and the one permitted PAX use
//! (docs/session-packet.md, "Headers").
//!
//! There is exactly one encoding of a member's header. The writer produces
//! it with [`encode`]; the reader decodes a header just far enough to know
//! which member it claims to be, then re-encodes that member and compares
//! the bytes, so any deviation is refused.

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::{Error, ErrorCode};
use crate::path::MANIFEST_PATH;
use crate::scan;

/// The tar block size.
pub const BLOCK: usize = 512;

/// The name written in the ustar header of a PAX extended header.
pub const PAX_HEADER_NAME: &str = "././@PaxHeader";

/// Largest PAX body the reader will buffer: a path and a link path at the
/// format's maximum length, with their record framing.
pub const MAX_PAX_BYTES: u64 = 2 * 4096 + 64;

/// The most bytes a member's header can declare: 11 octal digits.
pub const MAX_MEMBER_BYTES: u64 = 0o77_777_777_777;

pub(crate) const TYPE_FILE: u8 = b'0';
pub(crate) const TYPE_SYMLINK: u8 = b'2';
pub(crate) const TYPE_DIR: u8 = b'5';
pub(crate) const TYPE_PAX: u8 = b'x';

const NAME: (usize, usize) = (0, 100);
const MODE: (usize, usize) = (100, 8);
const UID: (usize, usize) = (108, 8);
const GID: (usize, usize) = (116, 8);
const SIZE: (usize, usize) = (124, 12);
const MTIME: (usize, usize) = (136, 12);
const CHKSUM: (usize, usize) = (148, 8);
const TYPEFLAG: usize = 156;
const LINKNAME: (usize, usize) = (157, 100);
const MAGIC: (usize, usize) = (257, 6);
const VERSION: (usize, usize) = (263, 2);
const UNAME: (usize, usize) = (265, 32);
const GNAME: (usize, usize) = (297, 32);
const DEVMAJOR: (usize, usize) = (329, 8);
const DEVMINOR: (usize, usize) = (337, 8);
const PREFIX: (usize, usize) = (345, 155);
const PAD: (usize, usize) = (500, 12);

/// The member types the format allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
}

impl Kind {
    /// The manifest's name for the type.
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Dir => "dir",
            Kind::Symlink => "symlink",
        }
    }

    /// Whether `mode` is a canonical mode for this type
    /// (docs/session-packet.md §4): 0644 or 0755 for files, 0755 for
    /// directories, 0777 for symlinks.
    pub const fn allows_mode(self, mode: u32) -> bool {
        match self {
            Kind::File => mode == 0o644 || mode == 0o755,
            Kind::Dir => mode == 0o755,
            Kind::Symlink => mode == 0o777,
        }
    }

    pub(crate) const fn typeflag(self) -> u8 {
        match self {
            Kind::File => TYPE_FILE,
            Kind::Dir => TYPE_DIR,
            Kind::Symlink => TYPE_SYMLINK,
        }
    }
}

impl core::fmt::Display for Kind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The manifest's name for the type, as its JSON writes it.
impl serde::Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// What a header says about its member: everything the encoding depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderSpec<'a> {
    /// The member path.
    pub path: &'a str,
    /// The member type.
    pub kind: Kind,
    /// The permission bits (already canonical).
    pub mode: u32,
    /// The body size (zero for directories and symlinks).
    pub size: u64,
    /// The symlink target (empty for other types).
    pub target: &'a str,
}

impl HeaderSpec<'static> {
    /// The header of `packet.json` for a manifest of `len` bytes: the first
    /// member, a regular file of mode 0644 (docs/session-packet.md §5).
    pub const fn manifest(len: u64) -> HeaderSpec<'static> {
        HeaderSpec {
            path: MANIFEST_PATH,
            kind: Kind::File,
            mode: 0o644,
            size: len,
            target: "",
        }
    }
}

/// Rounds `n` up to a whole number of blocks.
pub const fn padded(n: u64) -> u64 {
    n.div_ceil(BLOCK as u64) * BLOCK as u64
}

/// Splits a path into the ustar `prefix` and `name` fields, if it fits:
/// the whole path in `name` when it is at most 100 bytes; otherwise the
/// longest leading part of at most 155 bytes that ends just before a `/`
/// goes to `prefix` and the rest (at most 100 bytes, not empty) to `name`.
pub fn split_ustar(path: &str) -> Option<(&str, &str)> {
    if path.len() <= NAME.1 {
        return Some(("", path));
    }
    let bytes = path.as_bytes();
    let limit = bytes.len().min(PREFIX.1 + 1);
    let slash = bytes[..limit].iter().rposition(|&b| b == b'/')?;
    let (prefix, name) = (&path[..slash], &path[slash + 1..]);
    if prefix.len() <= PREFIX.1 && !name.is_empty() && name.len() <= NAME.1 {
        Some((prefix, name))
    } else {
        None
    }
}

/// Number of bytes [`encode`] appends for this member: the ustar header plus,
/// when needed, the PAX header and its padded body.
pub fn encoded_len(spec: &HeaderSpec<'_>) -> u64 {
    let pax = pax_body_len(spec);
    let pax_part = if pax == 0 {
        0
    } else {
        BLOCK as u64 + padded(pax)
    };
    pax_part + BLOCK as u64
}

/// Whether a path needs a PAX `path` record (it does not fit name/prefix).
pub fn needs_pax_path(path: &str) -> bool {
    split_ustar(path).is_none()
}

/// Whether a symlink target needs a PAX `linkpath` record (over 100 bytes).
pub fn needs_pax_linkpath(target: &str) -> bool {
    target.len() > LINKNAME.1
}

fn pax_record_len(key: &str, value: &str) -> usize {
    // "<len> <key>=<value>\n", where <len> counts its own digits.
    let rest = key.len() + value.len() + 3;
    let mut len = rest + 1;
    loop {
        let digits = decimal_digits(len);
        if digits + rest == len {
            return len;
        }
        len = digits + rest;
    }
}

fn decimal_digits(mut n: usize) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

fn pax_body_len(spec: &HeaderSpec<'_>) -> u64 {
    let mut len = 0;
    if spec.kind == Kind::Symlink && needs_pax_linkpath(spec.target) {
        len += pax_record_len("linkpath", spec.target);
    }
    if needs_pax_path(spec.path) {
        len += pax_record_len("path", spec.path);
    }
    len as u64
}

fn push_record(out: &mut Vec<u8>, key: &str, value: &str) {
    let len = pax_record_len(key, value);
    out.extend_from_slice(alloc::format!("{len} {key}={value}\n").as_bytes());
}

/// The canonical header of a member that needs no PAX header (its path
/// fits the name and prefix fields, its link target the linkname field):
/// then [`encode`] appends exactly this block. `None` when it needs one.
pub fn single_block(spec: &HeaderSpec<'_>) -> Option<[u8; BLOCK]> {
    let symlink = spec.kind == Kind::Symlink;
    if symlink && needs_pax_linkpath(spec.target) {
        return None;
    }
    let (prefix, name) = split_ustar(spec.path)?;
    let link = if symlink { spec.target } else { "" };
    Some(ustar_block(
        spec,
        spec.kind.typeflag(),
        (prefix, name),
        link,
    ))
}

/// Appends the canonical encoding of one member's header(s) to `out`.
pub fn encode(spec: &HeaderSpec<'_>, out: &mut Vec<u8>) {
    if let Some(block) = single_block(spec) {
        out.extend_from_slice(&block);
        return;
    }
    let pax_path = needs_pax_path(spec.path);
    let pax_link = spec.kind == Kind::Symlink && needs_pax_linkpath(spec.target);
    if pax_path || pax_link {
        let mut body = Vec::new();
        // Records in bytewise key order: linkpath before path.
        if pax_link {
            push_record(&mut body, "linkpath", spec.target);
        }
        if pax_path {
            push_record(&mut body, "path", spec.path);
        }
        out.extend_from_slice(&pax_header_block(body.len() as u64));
        out.extend_from_slice(&body);
        out.resize(
            out.len() + (padded(body.len() as u64) as usize - body.len()),
            0,
        );
    }
    let (prefix, name) = if pax_path {
        ("", "")
    } else {
        split_ustar(spec.path).unwrap_or(("", ""))
    };
    let link = if spec.kind == Kind::Symlink && !pax_link {
        spec.target
    } else {
        ""
    };
    out.extend_from_slice(&ustar_block(
        spec,
        spec.kind.typeflag(),
        (prefix, name),
        link,
    ));
}

/// The canonical ustar header of a PAX extended header with a body of
/// `size` bytes.
pub fn pax_header_block(size: u64) -> [u8; BLOCK] {
    let spec = HeaderSpec {
        path: PAX_HEADER_NAME,
        kind: Kind::File,
        mode: 0o644,
        size,
        target: "",
    };
    ustar_block(&spec, TYPE_PAX, ("", PAX_HEADER_NAME), "")
}

const fn put(block: &mut [u8; BLOCK], field: (usize, usize), value: &[u8]) {
    let (_, tail) = block.split_at_mut(field.0);
    tail.split_at_mut(value.len()).0.copy_from_slice(value);
}

const fn put_octal(block: &mut [u8; BLOCK], field: (usize, usize), value: u64) {
    // width-1 zero-padded octal digits, then NUL.
    let digits = field.1 - 1;
    let mut v = value;
    let mut i = digits;
    while i > 0 {
        i -= 1;
        block[field.0 + i] = b'0' + (v & 7) as u8;
        v >>= 3;
    }
    block[field.0 + digits] = 0;
}

/// The fields every canonical header holds whatever its member: zero
/// ids, times and device numbers, the magic and the version.
const TEMPLATE: [u8; BLOCK] = {
    let mut b = [0u8; BLOCK];
    put_octal(&mut b, UID, 0);
    put_octal(&mut b, GID, 0);
    put_octal(&mut b, MTIME, 0);
    put(&mut b, MAGIC, b"ustar\0");
    put(&mut b, VERSION, b"00");
    put_octal(&mut b, DEVMAJOR, 0);
    put_octal(&mut b, DEVMINOR, 0);
    b
};

fn ustar_block(
    spec: &HeaderSpec<'_>,
    typeflag: u8,
    (prefix, name): (&str, &str),
    link: &str,
) -> [u8; BLOCK] {
    let mut b = TEMPLATE;
    put(&mut b, NAME, name.as_bytes());
    put_octal(&mut b, MODE, u64::from(spec.mode));
    put_octal(&mut b, SIZE, spec.size);
    b[TYPEFLAG] = typeflag;
    put(&mut b, LINKNAME, link.as_bytes());
    put(&mut b, PREFIX, prefix.as_bytes());
    let sum = checksum(&b);
    // Six octal digits, NUL, space: the traditional checksum layout.
    put_octal(&mut b, (CHKSUM.0, 7), u64::from(sum));
    b[CHKSUM.0 + 7] = b' ';
    b
}

/// The header checksum: the sum of the block's bytes, with the checksum
/// field's eight bytes counted as spaces.
fn checksum(block: &[u8; BLOCK]) -> u32 {
    let all: u32 = block.iter().map(|&b| u32::from(b)).sum();
    let field: u32 = field(block, CHKSUM).iter().map(|&b| u32::from(b)).sum();
    all - field + CHKSUM.1 as u32 * u32::from(b' ')
}

/// Whether a block is all zero (an end-of-archive block).
pub fn is_zero_block(block: &[u8]) -> bool {
    all_zero(block)
}

/// Whether every byte of `bytes` is zero.
pub(crate) fn all_zero(bytes: &[u8]) -> bool {
    !scan::any(bytes, |b| b != 0)
}

/// The offset of the first non-zero byte of `bytes`, if any.
pub(crate) fn first_nonzero(bytes: &[u8]) -> Option<usize> {
    scan::position(bytes, |b| b != 0)
}

fn field(block: &[u8; BLOCK], f: (usize, usize)) -> &[u8] {
    &block[f.0..f.0 + f.1]
}

/// A string field: the bytes up to the first NUL; everything after it must
/// be NUL too.
fn string_field<'a>(
    block: &'a [u8; BLOCK],
    f: (usize, usize),
    what: &str,
) -> Result<&'a [u8], Error> {
    let raw = field(block, f);
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    if !all_zero(&raw[end..]) {
        return Err(Error::new(
            ErrorCode::HeaderNotCanonical,
            alloc::format!("the {what} field has bytes after its terminating NUL"),
        ));
    }
    Ok(&raw[..end])
}

/// Parses a numeric field in the one form the format writes: width-1
/// octal digits followed by NUL.
fn octal_field(block: &[u8; BLOCK], f: (usize, usize), what: &str) -> Result<u64, Error> {
    let raw = field(block, f);
    let (digits, term) = raw.split_at(raw.len() - 1);
    let bad = || {
        Error::new(
            ErrorCode::HeaderNumeric,
            alloc::format!(
                "the {what} field is not {} octal digits and a NUL: {:?}",
                digits.len(),
                String::from_utf8_lossy(raw)
            ),
        )
    };
    if term != [0] || digits.iter().any(|d| !(b'0'..=b'7').contains(d)) {
        return Err(bad());
    }
    // At most 11 octal digits: 33 bits, no overflow in u64.
    Ok(digits
        .iter()
        .fold(0u64, |acc, d| (acc << 3) | u64::from(d - b'0')))
}

/// The numeric fields that must be zero, with their names.
const ZERO_FIELDS: [((usize, usize), &str); 5] = [
    (UID, "uid"),
    (GID, "gid"),
    (MTIME, "mtime"),
    (DEVMAJOR, "devmajor"),
    (DEVMINOR, "devminor"),
];

/// A header decoded just far enough to identify its member, borrowed from
/// the block. The reader then re-encodes what this describes and compares
/// bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fields<'a> {
    pub(crate) typeflag: u8,
    pub(crate) name: &'a [u8],
    pub(crate) prefix: &'a [u8],
    pub(crate) linkname: &'a [u8],
    pub(crate) mode: u32,
    pub(crate) size: u64,
}

impl Fields<'_> {
    /// `prefix/name` (or `name`) as stored.
    pub(crate) fn path(&self) -> Vec<u8> {
        if self.prefix.is_empty() {
            self.name.to_vec()
        } else {
            let mut p = Vec::with_capacity(self.prefix.len() + 1 + self.name.len());
            p.extend_from_slice(self.prefix);
            p.push(b'/');
            p.extend_from_slice(self.name);
            p
        }
    }

    /// Whether [`Fields::path`] would be empty.
    pub(crate) fn path_is_empty(&self) -> bool {
        self.prefix.is_empty() && self.name.is_empty()
    }

    /// Whether [`Fields::path`] equals `path`, without building it.
    pub(crate) fn path_is(&self, path: &[u8]) -> bool {
        if self.prefix.is_empty() {
            return self.name == path;
        }
        let (prefix, name) = (self.prefix, self.name);
        path.len() == prefix.len() + 1 + name.len()
            && path.starts_with(prefix)
            && path[prefix.len()] == b'/'
            && path.ends_with(name)
    }
}

/// Decodes one non-zero header block: magic, checksum, typeflag, numeric
/// fields and the fields that must be zero. Path, mode and size are returned
/// (borrowed from the block) for the caller to check against the manifest
/// and re-encode.
pub(crate) fn decode_fields(block: &[u8; BLOCK]) -> Result<Fields<'_>, Error> {
    if field(block, MAGIC) != b"ustar\0" || field(block, VERSION) != b"00" {
        return Err(Error::new(
            ErrorCode::HeaderMagic,
            alloc::format!(
                "the header is not POSIX ustar (magic {:?}, version {:?})",
                String::from_utf8_lossy(field(block, MAGIC)),
                String::from_utf8_lossy(field(block, VERSION))
            ),
        ));
    }
    let stored = {
        // The octal digits of the field, NULs and spaces skipped.
        let (mut value, mut digits, mut octal) = (0u32, 0, true);
        for &b in field(block, CHKSUM) {
            match b {
                0 | b' ' => {}
                b'0'..=b'7' => {
                    value = (value << 3) | u32::from(b - b'0');
                    digits += 1;
                }
                _ => octal = false,
            }
        }
        if digits == 0 || !octal {
            return Err(Error::new(
                ErrorCode::HeaderChecksum,
                "the checksum field is not an octal number",
            ));
        }
        value
    };
    let computed = checksum(block);
    if stored != computed {
        return Err(Error::new(
            ErrorCode::HeaderChecksum,
            alloc::format!("header checksum is {stored:o}, the bytes sum to {computed:o}"),
        ));
    }
    let typeflag = block[TYPEFLAG];
    if !matches!(typeflag, TYPE_FILE | TYPE_DIR | TYPE_SYMLINK | TYPE_PAX) {
        return Err(Error::new(
            ErrorCode::TypeflagForbidden,
            alloc::format!(
                "typeflag {:?} is not allowed: only regular files, directories and symlinks are",
                typeflag as char
            ),
        ));
    }
    let mode = octal_field(block, MODE, "mode")?;
    let size = octal_field(block, SIZE, "size")?;
    // A field reads as zero exactly when it holds the canonical zero, so
    // comparing with the template settles the common case at once.
    let canonical_zero = |f: (usize, usize)| field(block, f) == field(&TEMPLATE, f);
    if !ZERO_FIELDS.iter().all(|&(f, _)| canonical_zero(f)) {
        for (f, what) in ZERO_FIELDS {
            if octal_field(block, f, what)? != 0 {
                return Err(Error::new(
                    ErrorCode::HeaderNotCanonical,
                    alloc::format!("the {what} field must be zero"),
                ));
            }
        }
    }
    for (f, what) in [(UNAME, "uname"), (GNAME, "gname"), (PAD, "padding")] {
        if !all_zero(field(block, f)) {
            return Err(Error::new(
                ErrorCode::HeaderNotCanonical,
                alloc::format!("the {what} field must be empty"),
            ));
        }
    }
    let name = string_field(block, NAME, "name")?;
    let prefix = string_field(block, PREFIX, "prefix")?;
    let linkname = string_field(block, LINKNAME, "linkname")?;
    Ok(Fields {
        typeflag,
        name,
        prefix,
        linkname,
        mode: mode as u32,
        size,
    })
}

/// The values a PAX header supplies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PaxValues {
    /// `path`, if present.
    pub path: Option<Vec<u8>>,
    /// `linkpath`, if present.
    pub linkpath: Option<Vec<u8>>,
}

/// Parses a PAX body holding only `path` and/or `linkpath`, each at most
/// once, in bytewise key order, with canonical record lengths.
pub fn decode_pax(body: &[u8]) -> Result<PaxValues, Error> {
    let bad = |msg: &str| Error::new(ErrorCode::PaxInvalid, String::from(msg));
    let mut values = PaxValues::default();
    let mut rest = body;
    let mut last_key: &[u8] = b"";
    while !rest.is_empty() {
        let space = rest
            .iter()
            .position(|&b| b == b' ')
            .ok_or_else(|| bad("a PAX record has no length"))?;
        let len_digits = &rest[..space];
        if len_digits.is_empty()
            || len_digits.len() > 5
            || len_digits[0] == b'0'
            || !len_digits.iter().all(u8::is_ascii_digit)
        {
            return Err(bad("a PAX record length is not a canonical decimal number"));
        }
        let len = len_digits
            .iter()
            .fold(0usize, |acc, d| acc * 10 + usize::from(d - b'0'));
        if len > rest.len() || len <= space + 1 {
            return Err(bad("a PAX record's length runs past the header"));
        }
        let record = &rest[space + 1..len];
        let Some((&b'\n', kv)) = record.split_last() else {
            return Err(bad("a PAX record does not end with a newline"));
        };
        let eq = kv
            .iter()
            .position(|&b| b == b'=')
            .ok_or_else(|| bad("a PAX record has no '='"))?;
        let (key, value) = (&kv[..eq], &kv[eq + 1..]);
        if key <= last_key {
            return Err(bad("PAX keys are repeated or out of order"));
        }
        let value = value.to_vec();
        match key {
            b"path" => values.path = Some(value),
            b"linkpath" => values.linkpath = Some(value),
            other => {
                return Err(Error::new(
                    ErrorCode::PaxInvalid,
                    alloc::format!(
                        "PAX key {:?} is not allowed: only path and linkpath are",
                        String::from_utf8_lossy(other)
                    ),
                ))
            }
        }
        last_key = key;
        rest = &rest[len..];
    }
    if values.path.is_none() && values.linkpath.is_none() {
        return Err(bad("an empty PAX header"));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_counts_its_own_field_as_spaces() {
        let reference = |block: &[u8; BLOCK]| -> u32 {
            block
                .iter()
                .enumerate()
                .map(|(i, &byte)| {
                    if (CHKSUM.0..CHKSUM.0 + CHKSUM.1).contains(&i) {
                        u32::from(b' ')
                    } else {
                        u32::from(byte)
                    }
                })
                .sum()
        };
        let mut block = [0u8; BLOCK];
        assert_eq!(checksum(&block), reference(&block));
        for (i, b) in block.iter_mut().enumerate() {
            *b = (i * 37 % 256) as u8;
        }
        assert_eq!(checksum(&block), reference(&block));
        block = [0xff; BLOCK];
        assert_eq!(checksum(&block), reference(&block));
    }

    #[test]
    fn split_rule() {
        assert_eq!(split_ustar("a/b"), Some(("", "a/b")));
        let p = alloc::format!("{}/{}", "d".repeat(150), "f".repeat(90));
        assert_eq!(split_ustar(&p), Some((&p[..150], &p[151..])));
        let p = alloc::format!("{}/{}", "d".repeat(156), "f".repeat(10));
        assert_eq!(split_ustar(&p), None);
        let p = alloc::format!("w/{}", "f".repeat(101));
        assert_eq!(split_ustar(&p), None);
    }

    #[test]
    fn pax_record_length_counts_itself() {
        assert_eq!(pax_record_len("path", "abc"), 12); // "12 path=abc\n"
        let v = "x".repeat(90); // 90 + 4 + 3 = 97 -> 99
        assert_eq!(pax_record_len("path", &v), 99);
        let v = "x".repeat(92); // 99 -> 3 digits -> 102
        assert_eq!(pax_record_len("path", &v), 102);
    }

    #[test]
    fn encode_decode_round_trip() {
        let long = alloc::format!("workspace/{}", "n".repeat(300));
        for spec in [
            HeaderSpec {
                path: "workspace/a",
                kind: Kind::File,
                mode: 0o755,
                size: 1234,
                target: "",
            },
            HeaderSpec {
                path: "workspace",
                kind: Kind::Dir,
                mode: 0o755,
                size: 0,
                target: "",
            },
            HeaderSpec {
                path: "workspace/l",
                kind: Kind::Symlink,
                mode: 0o777,
                size: 0,
                target: "a",
            },
            HeaderSpec {
                path: &long,
                kind: Kind::Symlink,
                mode: 0o777,
                size: 0,
                target: &long[10..],
            },
        ] {
            let mut out = Vec::new();
            encode(&spec, &mut out);
            assert_eq!(out.len() as u64, encoded_len(&spec));
            let last: &[u8; BLOCK] = out[out.len() - BLOCK..].try_into().unwrap();
            let raw = decode_fields(last).unwrap();
            assert_eq!(raw.size, spec.size);
            assert_eq!(raw.mode, spec.mode);
            if out.len() > BLOCK {
                let first: &[u8; BLOCK] = out[..BLOCK].try_into().unwrap();
                let pax = decode_fields(first).unwrap();
                assert_eq!(pax.typeflag, TYPE_PAX);
                let body = &out[BLOCK..BLOCK + pax.size as usize];
                let v = decode_pax(body).unwrap();
                assert_eq!(v.path.as_deref(), Some(spec.path.as_bytes()));
            } else {
                assert_eq!(raw.path(), spec.path.as_bytes());
            }
        }
    }
}
