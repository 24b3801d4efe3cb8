//! Raw tar construction for hostile-input tests.
//!
//! Everything here is written from the ustar and PAX specifications
//! (POSIX.1-2001 `pax` interchange format) and docs/session-packet.md, not
//! from packet-core's writer, so the tests do not trust the code they test:
//!
//! - [`Header`] is one 512-byte ustar header block, filled field by field
//!   with the canonical values of the format (octal numbers zero-padded to
//!   the field width minus one and NUL-terminated, mtime/uid/gid/devices
//!   zero, owner names empty, magic `ustar\0`, version `00`). Any field can
//!   be overwritten with raw bytes; [`Header::finish`] writes the checksum
//!   (six octal digits, NUL, space) unless told to keep a broken one.
//! - [`Tar`] appends headers, bodies (zero-padded to a block), PAX headers
//!   and the end marker.
//! - [`Member`] and [`manifest_json`] describe a packet's member set and
//!   produce the canonical `packet.json` with a small JSON writer of its
//!   own (sorted keys, no whitespace, minimal escapes).
//! - [`packet`] puts the two together; [`headers`] walks a valid packet and
//!   [`patch`] rewrites one header field in place and fixes its checksum.
#![allow(dead_code)]

use sha2::{Digest as _, Sha256};

/// The tar block size.
pub const BLOCK: usize = 512;

/// A ustar header field: offset and width.
#[derive(Clone, Copy, Debug)]
pub struct Field(pub usize, pub usize);

pub const NAME: Field = Field(0, 100);
pub const MODE: Field = Field(100, 8);
pub const UID: Field = Field(108, 8);
pub const GID: Field = Field(116, 8);
pub const SIZE: Field = Field(124, 12);
pub const MTIME: Field = Field(136, 12);
pub const CHKSUM: Field = Field(148, 8);
pub const TYPEFLAG: Field = Field(156, 1);
pub const LINKNAME: Field = Field(157, 100);
pub const MAGIC: Field = Field(257, 6);
pub const VERSION: Field = Field(263, 2);
pub const UNAME: Field = Field(265, 32);
pub const GNAME: Field = Field(297, 32);
pub const DEVMAJOR: Field = Field(329, 8);
pub const DEVMINOR: Field = Field(337, 8);
pub const PREFIX: Field = Field(345, 155);
pub const PAD: Field = Field(500, 12);

/// `value` as zero-padded octal digits filling `width - 1` bytes, then NUL.
pub fn octal(value: u64, width: usize) -> Vec<u8> {
    let mut s = format!("{value:0w$o}", w = width - 1).into_bytes();
    s.push(0);
    s
}

/// The ustar checksum: the byte sum of the block with the checksum field
/// counted as eight spaces.
pub fn checksum(block: &[u8]) -> u32 {
    block
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (CHKSUM.0..CHKSUM.0 + CHKSUM.1).contains(&i) {
                u32::from(b' ')
            } else {
                u32::from(b)
            }
        })
        .sum()
}

/// Rewrites the checksum field of the header block at the start of `block`.
pub fn fix_checksum(block: &mut [u8]) {
    let sum = checksum(&block[..BLOCK]);
    let text = format!("{sum:06o}\0 ");
    block[CHKSUM.0..CHKSUM.0 + 8].copy_from_slice(text.as_bytes());
}

/// Splits a path into ustar (prefix, name), per the format: the whole path
/// in `name` if it is at most 100 bytes, otherwise the longest prefix of at
/// most 155 bytes ending before a `/` whose remainder fits in `name`.
pub fn ustar_split(path: &str) -> Option<(String, String)> {
    if path.len() <= 100 {
        return Some((String::new(), path.to_string()));
    }
    let slashes: Vec<usize> = path.match_indices('/').map(|(i, _)| i).collect();
    slashes.iter().rev().find(|&&i| i <= 155).and_then(|&i| {
        let (p, n) = (&path[..i], &path[i + 1..]);
        (!n.is_empty() && n.len() <= 100).then(|| (p.to_string(), n.to_string()))
    })
}

/// One ustar header block under construction.
#[derive(Clone)]
pub struct Header {
    pub block: [u8; BLOCK],
    keep_checksum: bool,
}

impl Header {
    /// A canonical header with an empty name.
    pub fn new(typeflag: u8, mode: u32, size: u64) -> Header {
        let mut h = Header {
            block: [0; BLOCK],
            keep_checksum: false,
        };
        h.set(MODE, &octal(u64::from(mode), 8));
        h.set(UID, &octal(0, 8));
        h.set(GID, &octal(0, 8));
        h.set(SIZE, &octal(size, 12));
        h.set(MTIME, &octal(0, 12));
        h.block[TYPEFLAG.0] = typeflag;
        h.set(MAGIC, b"ustar\0");
        h.set(VERSION, b"00");
        h.set(DEVMAJOR, &octal(0, 8));
        h.set(DEVMINOR, &octal(0, 8));
        h
    }

    /// A canonical header for `path` (which must fit name/prefix).
    pub fn for_path(typeflag: u8, path: &str, mode: u32, size: u64) -> Header {
        let mut h = Header::new(typeflag, mode, size);
        let (prefix, name) = ustar_split(path).expect("path fits the ustar fields");
        h.set(NAME, name.as_bytes());
        h.set(PREFIX, prefix.as_bytes());
        h
    }

    /// Writes `bytes` at the start of `field`, clearing the rest of it.
    pub fn set(&mut self, field: Field, bytes: &[u8]) -> &mut Header {
        assert!(bytes.len() <= field.1, "value longer than the field");
        self.block[field.0..field.0 + field.1].fill(0);
        self.block[field.0..field.0 + bytes.len()].copy_from_slice(bytes);
        self
    }

    /// Writes `bytes` over the field's full width (no clearing needed).
    pub fn raw(&mut self, offset: usize, bytes: &[u8]) -> &mut Header {
        self.block[offset..offset + bytes.len()].copy_from_slice(bytes);
        self
    }

    /// Keeps whatever checksum field the block holds instead of computing it.
    pub fn keep_checksum(&mut self) -> &mut Header {
        self.keep_checksum = true;
        self
    }

    /// The finished block.
    pub fn finish(&self) -> [u8; BLOCK] {
        let mut b = self.block;
        if !self.keep_checksum {
            fix_checksum(&mut b);
        }
        b
    }
}

/// One PAX record: `"<len> <key>=<value>\n"` where `<len>` counts itself.
pub fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    let rest = key.len() + value.len() + 3; // space, '=', newline
    let mut len = rest + 1;
    while len.to_string().len() + rest != len {
        len = len.to_string().len() + rest;
    }
    let mut r = format!("{len} {key}=").into_bytes();
    r.extend_from_slice(value);
    r.push(b'\n');
    r
}

/// The header block of a PAX extended header with a body of `size` bytes,
/// as the format writes it: name `././@PaxHeader`, mode 0644, typeflag `x`.
pub fn pax_header(size: u64) -> Header {
    let mut h = Header::new(b'x', 0o644, size);
    h.set(NAME, b"././@PaxHeader");
    h
}

/// An archive under construction.
#[derive(Clone, Default)]
pub struct Tar {
    pub bytes: Vec<u8>,
}

impl Tar {
    pub fn new() -> Tar {
        Tar::default()
    }

    /// Appends a finished header block.
    pub fn header(&mut self, h: &Header) -> &mut Tar {
        self.bytes.extend_from_slice(&h.finish());
        self
    }

    /// Appends a body and zero padding up to the next block.
    pub fn body(&mut self, data: &[u8]) -> &mut Tar {
        self.bytes.extend_from_slice(data);
        self.zero_pad();
        self
    }

    /// Appends raw bytes.
    pub fn raw(&mut self, data: &[u8]) -> &mut Tar {
        self.bytes.extend_from_slice(data);
        self
    }

    /// Pads with zeros to a block boundary.
    pub fn zero_pad(&mut self) -> &mut Tar {
        let rem = self.bytes.len() % BLOCK;
        if rem != 0 {
            self.bytes.resize(self.bytes.len() + BLOCK - rem, 0);
        }
        self
    }

    /// Appends a PAX extended header with these records, as written.
    pub fn pax(&mut self, records: &[u8]) -> &mut Tar {
        self.header(&pax_header(records.len() as u64));
        self.body(records)
    }

    /// Appends the headers (PAX when needed) and padded body of a member,
    /// encoded as the format specifies.
    pub fn member(&mut self, m: &Member) -> &mut Tar {
        let path = m.path();
        let target = match m {
            Member::Symlink(_, t) => t.as_str(),
            _ => "",
        };
        let split = ustar_split(path);
        let long_link = target.len() > 100;
        let mut records = Vec::new();
        if long_link {
            records.extend(pax_record("linkpath", target.as_bytes()));
        }
        if split.is_none() {
            records.extend(pax_record("path", path.as_bytes()));
        }
        if !records.is_empty() {
            self.pax(&records);
        }
        let mut h = Header::new(m.typeflag(), m.mode(), m.size());
        if let Some((prefix, name)) = split {
            h.set(NAME, name.as_bytes()).set(PREFIX, prefix.as_bytes());
        }
        if !long_link {
            h.set(LINKNAME, target.as_bytes());
        }
        self.header(&h);
        if let Member::File(_, contents, _) = m {
            self.body(contents);
        }
        self
    }

    /// Appends the `packet.json` member holding `json`.
    pub fn manifest(&mut self, json: &[u8]) -> &mut Tar {
        self.header(&Header::for_path(
            b'0',
            "packet.json",
            0o644,
            json.len() as u64,
        ));
        self.body(json)
    }

    /// Appends the end-of-archive marker: two zero blocks.
    pub fn end(&mut self) -> &mut Tar {
        self.bytes.resize(self.bytes.len() + 2 * BLOCK, 0);
        self
    }

    /// A copy of the bytes so far.
    pub fn to_vec(&self) -> Vec<u8> {
        self.bytes.clone()
    }
}

/// A member with its contents.
#[derive(Clone, Debug)]
pub enum Member {
    Dir(String),
    /// Path, contents, executable.
    File(String, Vec<u8>, bool),
    /// Path, target.
    Symlink(String, String),
}

pub fn dir(p: &str) -> Member {
    Member::Dir(p.into())
}
pub fn file(p: &str, contents: &[u8]) -> Member {
    Member::File(p.into(), contents.to_vec(), false)
}
pub fn exe(p: &str, contents: &[u8]) -> Member {
    Member::File(p.into(), contents.to_vec(), true)
}
pub fn symlink(p: &str, target: &str) -> Member {
    Member::Symlink(p.into(), target.into())
}

impl Member {
    pub fn path(&self) -> &str {
        match self {
            Member::Dir(p) | Member::File(p, ..) | Member::Symlink(p, _) => p,
        }
    }
    pub fn typeflag(&self) -> u8 {
        match self {
            Member::Dir(_) => b'5',
            Member::File(..) => b'0',
            Member::Symlink(..) => b'2',
        }
    }
    pub fn mode(&self) -> u32 {
        match self {
            Member::Dir(_) => 0o755,
            Member::File(_, _, true) => 0o755,
            Member::File(_, _, false) => 0o644,
            Member::Symlink(..) => 0o777,
        }
    }
    pub fn size(&self) -> u64 {
        match self {
            Member::File(_, c, _) => c.len() as u64,
            _ => 0,
        }
    }
    /// The member's manifest entry.
    pub fn entry(&self) -> Json {
        let mut fields = vec![
            ("mode", Json::str(&format!("{:04o}", self.mode()))),
            ("path", Json::str(self.path())),
        ];
        match self {
            Member::Dir(_) => fields.push(("type", Json::str("dir"))),
            Member::File(_, c, _) => {
                fields.push(("sha256", Json::str(&sha256_hex(c))));
                fields.push(("size", Json::Num(c.len() as u64)));
                fields.push(("type", Json::str("file")));
            }
            Member::Symlink(_, t) => {
                fields.push(("target", Json::str(t)));
                fields.push(("type", Json::str("symlink")));
            }
        }
        Json::obj(fields)
    }
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A tiny JSON value whose serialisation is the format's canonical one:
/// object keys sorted bytewise, no whitespace, strings escaped minimally
/// (`\"`, `\\`, `\b\f\n\r\t`, other controls as `\u00xx`, everything else
/// raw UTF-8).
#[derive(Clone, Debug)]
pub enum Json {
    Null,
    Bool(bool),
    Num(u64),
    Str(String),
    Arr(Vec<Json>),
    /// Keys are sorted when written unless the object is built with
    /// [`Json::obj_as_is`].
    Obj(Vec<(String, Json)>, bool),
}

impl Json {
    pub fn str(s: &str) -> Json {
        Json::Str(s.into())
    }
    pub fn obj(fields: Vec<(&str, Json)>) -> Json {
        Json::Obj(
            fields.into_iter().map(|(k, v)| (k.into(), v)).collect(),
            true,
        )
    }
    /// An object written in the given key order (for non-canonical tests).
    pub fn obj_as_is(fields: Vec<(&str, Json)>) -> Json {
        Json::Obj(
            fields.into_iter().map(|(k, v)| (k.into(), v)).collect(),
            false,
        )
    }
    /// Sets (or adds) a key of an object.
    pub fn with(mut self, key: &str, value: Json) -> Json {
        if let Json::Obj(fields, _) = &mut self {
            match fields.iter_mut().find(|(k, _)| k == key) {
                Some(slot) => slot.1 = value,
                None => fields.push((key.into(), value)),
            }
        }
        self
    }
    /// Removes a key of an object.
    pub fn without(mut self, key: &str) -> Json {
        if let Json::Obj(fields, _) = &mut self {
            fields.retain(|(k, _)| k != key);
        }
        self
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = String::new();
        self.write(&mut out);
        out.into_bytes()
    }
    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Num(n) => out.push_str(&n.to_string()),
            Json::Str(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        '\u{8}' => out.push_str("\\b"),
                        '\u{c}' => out.push_str("\\f"),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        '\t' => out.push_str("\\t"),
                        c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            Json::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Json::Obj(fields, sort) => {
                let mut fields: Vec<&(String, Json)> = fields.iter().collect();
                if *sort {
                    fields.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                }
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    Json::Str(k.clone()).write(out);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// The totals object for these members.
pub fn totals(members: &[Member]) -> Json {
    let count = |f: fn(&Member) -> bool| members.iter().filter(|m| f(m)).count() as u64;
    Json::obj(vec![
        ("bytes", Json::Num(members.iter().map(Member::size).sum())),
        (
            "directories",
            Json::Num(count(|m| matches!(m, Member::Dir(_)))),
        ),
        ("files", Json::Num(count(|m| matches!(m, Member::File(..))))),
        ("members", Json::Num(members.len() as u64)),
        (
            "symlinks",
            Json::Num(count(|m| matches!(m, Member::Symlink(..)))),
        ),
    ])
}

/// The manifest object for these members, listed in the order given.
pub fn manifest_value(members: &[Member]) -> Json {
    Json::obj(vec![
        ("format", Json::str("pillbox.session-packet/1")),
        (
            "members",
            Json::Arr(members.iter().map(Member::entry).collect()),
        ),
        ("totals", totals(members)),
    ])
}

/// Canonical `packet.json` bytes for these members, in the order given.
pub fn manifest_json(members: &[Member]) -> Vec<u8> {
    manifest_value(members).to_bytes()
}

/// A packet: `packet.json` describing `listed`, then `archived` members,
/// then the end marker. Pass the same slice twice for a valid packet.
pub fn packet_with(manifest: &[u8], archived: &[Member]) -> Vec<u8> {
    let mut t = Tar::new();
    t.manifest(manifest);
    for m in archived {
        t.member(m);
    }
    t.end();
    t.to_vec()
}

/// A packet whose manifest lists exactly the archived members.
pub fn packet(members: &[Member]) -> Vec<u8> {
    packet_with(&manifest_json(members), members)
}

/// A small valid member set: directories, a plain file, an executable, a
/// symlink and an empty file.
pub fn base_members() -> Vec<Member> {
    vec![
        dir("workspace"),
        file("workspace/a.txt", b"hello\n"),
        dir("workspace/bin"),
        exe("workspace/bin/run", b"#!/bin/sh\necho run\n"),
        file("workspace/empty", b""),
        symlink("workspace/link", "a.txt"),
    ]
}

/// The packet of [`base_members`].
pub fn base_packet() -> Vec<u8> {
    packet(&base_members())
}

/// A header found while walking a packet.
#[derive(Clone, Debug)]
pub struct Found {
    /// Offset of the header block.
    pub offset: usize,
    pub typeflag: u8,
    /// The path from name/prefix (empty for PAX headers and long paths).
    pub path: String,
    pub size: u64,
}

/// Walks the headers of a well-formed archive (no checks at all).
pub fn headers(packet: &[u8]) -> Vec<Found> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + BLOCK <= packet.len() && packet[at..at + BLOCK].iter().any(|&b| b != 0) {
        let b = &packet[at..at + BLOCK];
        let cstr = |f: Field| {
            let raw = &b[f.0..f.0 + f.1];
            let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
            String::from_utf8_lossy(&raw[..end]).into_owned()
        };
        let size = u64::from_str_radix(cstr(SIZE).trim(), 8).unwrap_or(0);
        let (prefix, name) = (cstr(PREFIX), cstr(NAME));
        let path = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        out.push(Found {
            offset: at,
            typeflag: b[TYPEFLAG.0],
            path,
            size,
        });
        at += BLOCK + (size as usize).div_ceil(BLOCK) * BLOCK;
    }
    out
}

/// The header of the member with this path.
pub fn find(packet: &[u8], path: &str) -> Found {
    headers(packet)
        .into_iter()
        .find(|h| h.path == path)
        .unwrap_or_else(|| panic!("no header for {path}"))
}

/// Offset just past the end of the last member (where the end marker starts).
pub fn end_marker_offset(packet: &[u8]) -> usize {
    let last = headers(packet).pop().expect("a member");
    last.offset + BLOCK + (last.size as usize).div_ceil(BLOCK) * BLOCK
}

/// A copy of `packet` with `field` of the header at `offset` set to `value`
/// (cleared first) and the checksum fixed.
pub fn patch(packet: &[u8], offset: usize, field: Field, value: &[u8]) -> Vec<u8> {
    patch_raw(packet, offset, field, value, true)
}

/// Like [`patch`], optionally leaving the checksum as it was.
pub fn patch_raw(packet: &[u8], offset: usize, field: Field, value: &[u8], fix: bool) -> Vec<u8> {
    assert!(value.len() <= field.1);
    let mut p = packet.to_vec();
    let b = &mut p[offset..offset + BLOCK];
    b[field.0..field.0 + field.1].fill(0);
    b[field.0..field.0 + value.len()].copy_from_slice(value);
    if fix {
        fix_checksum(b);
    }
    p
}

/// A copy of `packet` with the header of `path` patched.
pub fn patch_member(packet: &[u8], path: &str, field: Field, value: &[u8]) -> Vec<u8> {
    patch(packet, find(packet, path).offset, field, value)
}

/// Verifies with default options and returns the refusal.
pub fn refuse(bytes: &[u8]) -> packet_core::Error {
    refuse_with(bytes, packet_core::ReaderOptions::default())
}

/// Verifies with `options`; the packet must be refused, and refused the same
/// way whether it is fed whole or one byte at a time.
pub fn refuse_with(bytes: &[u8], options: packet_core::ReaderOptions) -> packet_core::Error {
    let whole = match packet_core::reader::verify(bytes, options) {
        Ok(_) => panic!("the packet was accepted"),
        Err(e) => e,
    };
    let bytewise = feed_chunked(bytes, options, 1).expect_err("accepted when fed byte by byte");
    assert_eq!(whole.code(), bytewise.code(), "{whole} / {bytewise}");
    assert_eq!(whole.path(), bytewise.path());
    whole
}

/// Feeds `bytes` in chunks of `chunk` bytes, ignoring events.
pub fn feed_chunked(
    bytes: &[u8],
    options: packet_core::ReaderOptions,
    chunk: usize,
) -> Result<packet_core::VerifiedPacket, packet_core::Error> {
    let mut reader = packet_core::Reader::new(options);
    for piece in bytes.chunks(chunk.max(1)) {
        reader.feed(piece)?;
    }
    reader.finish()
}

/// Asserts the refusal's code and path.
#[track_caller]
pub fn assert_refused(bytes: &[u8], code: packet_core::ErrorCode, path: Option<&str>) {
    let e = refuse(bytes);
    assert_eq!(e.code(), code, "wrong code: {e}");
    assert_eq!(e.path(), path, "wrong path: {e}");
}
