#!/usr/bin/env python3
"""Generates the adversarial corpus of pillbox.session-packet/2.

Every case is a hostile or malformed packet (or a tricky one the format
accepts), built here from the ustar and PAX specifications and
docs/session-packet.md with a tar writer of this script's own: nothing is
taken from packet-core, so the corpus does not trust the code it tests.
Every case is a /2 packet but those of the group `v1`, which show that
packets written before /2 are still read by their own rules: named by the
whole file's SHA-256, at most 1 GiB, and every byte rule of /2.

    python3 tests/adversarial/generate.py          # rewrite cases.json, packets/, corpus.rs
    python3 tests/adversarial/generate.py --check  # fail if the checked-in files differ

Outputs (next to this script):
- cases.json: THE table, read by every consumer. For each case: id, group,
  description, expect ({"outcome": "refuse", "code": ..., "path": ...} or
  {"outcome": "accept"}), the packet file, its size and sha256 (the file's),
  its `digest` (the packet's name, `sha256:<hex>` by its version's rule: a
  /2 packet's is the SHA-256 of packet.json's bytes, a /1 packet's that of
  the whole file; a file without a complete packet.json as its first member
  is refused before any name is checked, and is given its whole file's),
  so that no consumer computes a name itself; the digest a consumer must be
  given as expected instead (`expected_digest`, only for the cases about the
  name), and for a refused packet whose manifest is honest, the member set
  behind it (`build`, in the shape of tests/vectors/descriptions/), which
  packing must refuse with the same code and path. Given `digest` as the
  expected digest, every case has its own outcome.
- packets/<id>.packet, or packets/<id>.packet.gz (gzip, mtime 0) for the
  few cases larger than 1 MiB; consumers decompress them.
- corpus.rs: the packet bytes for Rust tests that cannot read files (wasm),
  one include_bytes! per case, in the table's order.

Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import random
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
BLOCK = 512
FORMAT_ID = "pillbox.session-packet/2"
FORMAT_V1 = "pillbox.session-packet/1"
# The most bytes a ustar size field declares (11 octal digits): a member's
# limit. A /2 packet is at most 16 GiB, a /1 packet 1 GiB.
MEMBER_MAX = 0o77777777777
GIB = 1 << 30
GZIP_OVER = 1 << 20

# ustar fields: (offset, width)
NAME = (0, 100)
MODE = (100, 8)
UID = (108, 8)
GID = (116, 8)
SIZE = (124, 12)
MTIME = (136, 12)
CHKSUM = (148, 8)
TYPEFLAG = (156, 1)
LINKNAME = (157, 100)
MAGIC = (257, 6)
VERSION = (263, 2)
UNAME = (265, 32)
GNAME = (297, 32)
DEVMAJOR = (329, 8)
DEVMINOR = (337, 8)
PREFIX = (345, 155)
PAD = (500, 12)


# ----------------------------------------------------------------- encoding


def octal(value: int, width: int) -> bytes:
    return b"%0*o\0" % (width - 1, value)


def checksum(block: bytes, signed: bool = False) -> int:
    total = 0
    for i, b in enumerate(block):
        if CHKSUM[0] <= i < CHKSUM[0] + CHKSUM[1]:
            total += 32
        else:
            total += b - 256 if signed and b > 127 else b
    return total


def put(block: bytearray, field, value: bytes) -> None:
    off, width = field
    assert len(value) <= width, (field, value)
    block[off : off + width] = value + b"\0" * (width - len(value))


def fix_checksum(block: bytearray, signed: bool = False) -> None:
    block[148:156] = b"%06o\0 " % (checksum(bytes(block[:BLOCK]), signed) & 0o777777)


def ustar_split(path: bytes):
    if len(path) <= 100:
        return b"", path
    for i in range(min(len(path) - 1, 155), -1, -1):
        if path[i : i + 1] == b"/":
            prefix, name = path[:i], path[i + 1 :]
            if 0 < len(name) <= 100:
                return prefix, name
            return None
    return None


def header(name: bytes, typeflag: bytes, mode: int, size: int,
           linkname: bytes = b"", prefix: bytes = b"") -> bytearray:
    b = bytearray(BLOCK)
    put(b, NAME, name)
    put(b, MODE, octal(mode, 8))
    put(b, UID, octal(0, 8))
    put(b, GID, octal(0, 8))
    put(b, SIZE, octal(size, 12))
    put(b, MTIME, octal(0, 12))
    b[156:157] = typeflag
    put(b, LINKNAME, linkname)
    put(b, MAGIC, b"ustar\0")
    put(b, VERSION, b"00")
    put(b, DEVMAJOR, octal(0, 8))
    put(b, DEVMINOR, octal(0, 8))
    put(b, PREFIX, prefix)
    fix_checksum(b)
    return b


def pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % BLOCK)


def pax_record(key: str, value: bytes) -> bytes:
    rest = len(key) + len(value) + 3
    n = rest + 1
    while len(str(n)) + rest != n:
        n = len(str(n)) + rest
    return b"%d %s=" % (n, key.encode()) + value + b"\n"


def pax_block(records: bytes) -> bytes:
    return bytes(header(b"././@PaxHeader", b"x", 0o644, len(records))) + pad(records)


def canonical_json(value) -> bytes:
    # JCS for the subset the manifest uses: sorted keys, no whitespace,
    # minimal escapes (Python writes other controls as lowercase \u00xx).
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


# ------------------------------------------------------------------ members


def d(path):
    return {"path": path, "type": "dir"}


def f(path, data=b"", exe=False):
    return {"path": path, "type": "file", "data": data, "exe": exe}


def s(path, target):
    return {"path": path, "type": "symlink", "target": target}


def in_order(members):
    """Members in the format's order: component-wise, bytewise (§3)."""
    return sorted(members, key=lambda m: m["path"].encode().replace(b"/", b"\0"))


def mode_of(m) -> int:
    return {"dir": 0o755, "symlink": 0o777}.get(m["type"], 0o755 if m.get("exe") else 0o644)


def entry(m) -> dict:
    e = {"mode": "%04o" % m.get("mode", mode_of(m)), "path": m["path"], "type": m["type"]}
    if m["type"] == "file":
        e["size"] = m.get("size", len(m["data"]))
        e["sha256"] = m.get("sha256", hashlib.sha256(m["data"]).hexdigest())
    if m["type"] == "symlink":
        e["target"] = m["target"]
    return e


def totals(members) -> dict:
    t = {"bytes": 0, "directories": 0, "files": 0, "members": len(members), "symlinks": 0}
    for m in members:
        if m["type"] == "file":
            t["files"] += 1
            t["bytes"] += m.get("size", len(m["data"]))
        elif m["type"] == "dir":
            t["directories"] += 1
        else:
            t["symlinks"] += 1
    return t


def manifest(members, harness=None, exclusions=None, fmt=FORMAT_ID) -> dict:
    m = {"format": fmt, "members": [entry(x) for x in members], "totals": totals(members)}
    if harness is not None:
        m["harness"] = harness
    if exclusions:
        m["exclusions"] = exclusions
    return m


def member_bytes(m) -> bytes:
    path = m["path"].encode() if isinstance(m["path"], str) else m["path"]
    target = m.get("target", "")
    target = target.encode() if isinstance(target, str) else target
    records = b""
    long_link = m["type"] == "symlink" and len(target) > 100
    split = ustar_split(path)
    if long_link:
        records += pax_record("linkpath", target)
    if split is None:
        records += pax_record("path", path)
    out = pax_block(records) if records else b""
    prefix, name = split if split is not None else (b"", b"")
    tf = {"dir": b"5", "file": b"0", "symlink": b"2"}[m["type"]]
    data = m.get("data", b"")
    h = header(name, tf, m.get("mode", mode_of(m)), len(data),
               b"" if long_link else (target if m["type"] == "symlink" else b""), prefix)
    return out + bytes(h) + pad(data)


def manifest_member(body: bytes) -> bytes:
    return bytes(header(b"packet.json", b"0", 0o644, len(body))) + pad(body)


END = b"\0" * (2 * BLOCK)


def packet(members, harness=None, exclusions=None, manifest_bytes=None, archive=None,
           fmt=FORMAT_ID) -> bytes:
    """A packet: packet.json (from the members unless given), then the
    archive's members (the same members unless given), then the end marker."""
    body = manifest_bytes if manifest_bytes is not None else canonical_json(
        manifest(members, harness, exclusions, fmt))
    out = manifest_member(body)
    for m in members if archive is None else archive:
        out += member_bytes(m) if isinstance(m, dict) else m
    return out + END


def headers(p: bytes):
    """(offset of the ustar header, offset of the first block of the member
    (its PAX header if any), member path) for each member, manifest first."""
    out, off, pax_start, pax_path = [], 0, None, None
    while off + BLOCK <= len(p):
        block = p[off : off + BLOCK]
        if block == b"\0" * BLOCK:
            break
        size = int(block[124:135].rstrip(b"\0 ") or b"0", 8)
        tf = block[156:157]
        if tf == b"x":
            body = p[off + BLOCK : off + BLOCK + size]
            pax_start = off
            pax_path = None
            for rec in body.split(b"\n"):
                if b" path=" in rec:
                    pax_path = rec.split(b"=", 1)[1].decode()
            off += BLOCK + len(pad(body))
            continue
        name = block[0:100].split(b"\0")[0]
        prefix = block[345:500].split(b"\0")[0]
        path = pax_path or ((prefix + b"/" + name) if prefix else name).decode("utf-8", "replace")
        out.append((off, pax_start if pax_start is not None else off, path))
        pax_start, pax_path = None, None
        off += BLOCK + len(pad(b"\0" * size))
    return out


def header_offset(p: bytes, path: str) -> int:
    for off, _, name in headers(p):
        if name == path:
            return off
    raise KeyError(path)


def patch(p: bytes, path: str, field, value: bytes, fix: bool = True) -> bytes:
    """Rewrites one field of the named member's ustar header (NUL-padded to
    the field), fixing the checksum unless told not to."""
    off = header_offset(p, path)
    b = bytearray(p)
    block = bytearray(b[off : off + BLOCK])
    put(block, field, value)
    if fix:
        fix_checksum(block)
    b[off : off + BLOCK] = block
    return bytes(b)


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def manifest_body(p: bytes):
    """packet.json's bytes, when the file opens with a regular-file header of
    that name and holds all of the body it declares; else None."""
    if len(p) < BLOCK or p[:12] != b"packet.json\0" or p[156:157] != b"0":
        return None
    try:
        size = int(p[124:135], 8)
    except ValueError:
        return None
    body = p[BLOCK : BLOCK + size]
    return body if len(body) == size else None


def name_of(p: bytes, version: int = 2) -> str:
    """The packet's name by its version's rule (docs/session-packet.md §9):
    a /2 packet is named by packet.json's exact bytes, a /1 packet by the
    whole file. A file with no complete packet.json is refused before a
    name is checked; it is given the whole file's."""
    body = manifest_body(p)
    if version == 2 and body is not None:
        return "sha256:" + sha(body)
    return "sha256:" + sha(p)


def format_of(p: bytes):
    """The format id packet.json states, if it is JSON with one."""
    body = manifest_body(p)
    try:
        value = json.loads(body) if body is not None else None
    except ValueError:
        return None
    return value.get("format") if isinstance(value, dict) else None


# -------------------------------------------------------------------- cases

CASES = []


def case(group, cid, description, data, code=None, path=None, expected_digest=None, build=None,
         findings=None, version=2):
    """One row of the table. `build` (see `described`) is the member set
    behind a refused packet whose manifest is honest: packing it must be
    refused with the same code and path as reading the packet. `findings`
    is what a reader reports about an accepted packet (docs/session-packet.md
    §7.4); an accepted row without it must report nothing. `version` is the
    format version the packet is of (the group `v1` holds the /1 ones)."""
    assert (version == 1) == (group == "v1"), cid
    stated = format_of(data)
    assert stated not in (FORMAT_ID, FORMAT_V1) or stated == (FORMAT_V1 if version == 1 else FORMAT_ID), cid
    expect = {"outcome": "accept"} if code is None else {"outcome": "refuse", "code": code}
    if path is not None:
        expect["path"] = path
    if findings is not None:
        assert code is None, cid
        expect["findings"] = {"secrets": findings.get("secrets", []), "git": findings.get("git", [])}
    c = {"id": cid, "group": group, "description": description, "expect": expect, "bytes": data,
         "digest": name_of(data, version)}
    if expected_digest is not None:
        c["expected_digest"] = expected_digest
    if build is not None:
        assert code is not None, cid
        c["build"] = dict(build, about=description)
    assert all(x["id"] != cid for x in CASES), cid
    CASES.append(c)


def described(members, harness=None):
    """A member set as tests/vectors/src/description.rs reads it (the
    packer's input): contents as text when they are UTF-8, else hex."""
    out = []
    for m in members:
        e = {"path": m["path"], "type": m["type"]}
        if m["type"] == "file":
            try:
                e["text"] = m["data"].decode("utf-8")
            except UnicodeDecodeError:
                e["hex"] = m["data"].hex()
            if m.get("exe"):
                e["executable"] = True
        if m["type"] == "symlink":
            e["target"] = m["target"]
        out.append(e)
    b = {"members": out}
    if harness is not None:
        b["harness"] = harness
    return b


def refuse_built(group, cid, description, members, code, path=None, harness=None):
    """A refused packet with an honest manifest, whose member set packing
    refuses the same way."""
    case(group, cid, description, packet(members, harness=harness), code, path,
         build=described(members, harness))


def accept(group, cid, description, members, findings=None, **kw):
    case(group, cid, description, packet(members, **kw), findings=findings)


W = d("workspace")
DROP = object()  # a field to remove, for `entry_with`
BASE = [W, f("workspace/README.md", b"# demo\n" * 100), d("workspace/src"),
               f("workspace/src/main.rs", b"fn main() {}\n")]


def base():
    return packet(BASE)


# A file, a directory, an executable, an empty file and a symlink: the base
# of the cases that patch a header of each kind of member.
A = "workspace/a.txt"
RICH = [W, f(A, b"hello\n"), d("workspace/bin"), f("workspace/bin/run", b"#!/bin/sh\necho run\n", exe=True),
        f("workspace/empty"), s("workspace/link", "a.txt")]


def rich():
    return packet(RICH)


# A member whose path needs a PAX record (over 100 bytes, no prefix split).
LONG = "workspace/" + "n" * 120
LONG_MEMBERS = [W, f(LONG, b"x")]


def pax_packet(records: bytes, m, name: bytes = b"") -> bytes:
    """A packet of the workspace and `m`, whose ustar header (named `name`,
    no link name) follows a PAX header holding `records` as written."""
    tf = {"dir": b"5", "file": b"0", "symlink": b"2"}[m["type"]]
    data = m.get("data", b"")
    return packet([W, m], archive=[W, pax_block(records) + bytes(header(name, tf, mode_of(m), len(data)))
                                   + pad(data)])


def tar_cases():
    g = "tar"
    p = base()
    b = bytearray(p)
    b[148] = ord("7") if b[148] != ord("7") else ord("6")
    case(g, "tar-checksum-manifest", "packet.json's header checksum is wrong", bytes(b), "header_checksum")
    man = header_offset(p, "workspace/README.md")
    b = bytearray(p)
    b[man + 150] ^= 1
    case(g, "tar-checksum-member", "a member header's checksum is wrong", bytes(b), "header_checksum")
    # Historic tar writers summed signed chars: valid for them, not for us.
    u = packet([W, f("workspace/caf\u00e9.txt", b"x")])
    off = header_offset(u, "workspace/caf\u00e9.txt")
    b = bytearray(u)
    blk = bytearray(b[off : off + BLOCK])
    fix_checksum(blk, signed=True)
    b[off : off + BLOCK] = blk
    case(g, "tar-checksum-signed", "checksum computed over signed bytes (a non-ASCII name)", bytes(b), "header_checksum")
    # The right sum in another layout (7 digits then a space).
    b = bytearray(p)
    blk = bytearray(b[man : man + BLOCK])
    blk[148:156] = b"%07o " % checksum(bytes(blk))
    b[man : man + BLOCK] = blk
    case(g, "tar-checksum-layout", "the right checksum written as 7 digits and a space", bytes(b),
         "header_not_canonical", "workspace/README.md")
    case(g, "tar-magic-gnu", "GNU magic 'ustar  ' instead of POSIX ustar",
         patch(patch(p, "workspace/README.md", MAGIC, b"ustar "), "workspace/README.md", VERSION, b" \0"),
         "header_magic")
    case(g, "tar-magic-v7", "a v7 header (no magic)",
         patch(patch(p, "workspace/README.md", MAGIC, b""), "workspace/README.md", VERSION, b""),
         "header_magic")
    case(g, "tar-version-01", "ustar magic with version 01", patch(p, "workspace/README.md", VERSION, b"01"),
         "header_magic")
    for tf, what in [(b"7", "contiguous file"), (b"L", "GNU long name"), (b"K", "GNU long link name"),
                     (b"g", "PAX global header"), (b"S", "GNU sparse file"), (b"V", "volume label"),
                     (b"M", "multi-volume continuation"), (b"D", "GNU dump directory"),
                     (b"\0", "old-style regular file (NUL typeflag)"), (b"A", "vendor extension 'A'")]:
        cid = "tar-typeflag-" + ({b"\0": "nul"}.get(tf) or tf.decode())
        case(g, cid, "typeflag %r: %s" % (tf.decode(), what),
             patch(p, "workspace/README.md", TYPEFLAG, tf), "typeflag_forbidden")
    # Extension headers stacked, dangling, repeated, conflicting, carrying size.
    long_dir = "workspace/" + "d" * 120
    long_path = long_dir + "/" + "n" * 150
    lm = [W, d(long_dir), f(long_path, b"hello")]
    lp = packet(lm)
    rec = pax_record("path", long_path.encode())
    case(g, "pax-stacked", "two PAX headers in a row before one member",
         packet(lm, archive=[W, d(long_dir), pax_block(rec) + member_bytes(lm[2])]), "pax_invalid")
    case(g, "pax-dangling-end", "a PAX header followed by the end-of-archive marker",
         packet(lm, archive=[W, d(long_dir), pax_block(rec)]), "pax_invalid")
    case(g, "pax-before-manifest", "a PAX header naming packet.json before packet.json",
         pax_block(pax_record("path", b"packet.json")) + packet([W]), "pax_invalid")
    case(g, "pax-repeated-path", "a PAX header with the path record twice",
         packet(lm, archive=[W, d(long_dir),
                             pax_block(rec + rec) + bytes(header(b"", b"0", 0o644, 5)) + pad(b"hello")]),
         "pax_invalid")
    case(g, "pax-size-desync", "TARmageddon: a PAX size record that disagrees with the ustar size",
         packet(lm, archive=[W, d(long_dir),
                             pax_block(rec + pax_record("size", b"0")) + bytes(header(b"", b"0", 0o644, 5))
                             + pad(b"hello")]),
         "pax_invalid")
    sm = [W, f("workspace/a.txt", b"hello")]
    case(g, "pax-size-only", "a PAX header carrying only 'size' for a short-named member",
         packet(sm, archive=[W, pax_block(pax_record("size", b"1024")) + member_bytes(sm[1])]),
         "pax_invalid")
    smuggled = bytes(header(b"workspace/smuggled", b"0", 0o644, 5)) + pad(b"evil!")
    case(g, "pax-size-tarmageddon", "TARmageddon: ustar size 0, a PAX size covering a smuggled member header",
         packet([W, f("workspace/a.txt", b"")], archive=[
             W, pax_block(pax_record("size", b"%d" % len(smuggled))) + bytes(header(b"workspace/a.txt", b"0", 0o644, 0))
             + smuggled]), "pax_invalid")
    case(g, "pax-mtime", "a PAX mtime record", packet(lm, archive=[
        W, d(long_dir), pax_block(pax_record("mtime", b"1700000000") + rec)
        + bytes(header(b"", b"0", 0o644, 5)) + pad(b"hello")]), "pax_invalid")
    case(g, "pax-unneeded", "a PAX path record for a path that fits the ustar name",
         packet(sm, archive=[W, pax_block(pax_record("path", b"workspace/a.txt"))
                             + bytes(header(b"", b"0", 0o644, 5)) + pad(b"hello")]),
         "pax_invalid", "workspace/a.txt")
    case(g, "pax-path-and-name", "a PAX path and a different ustar name (which one wins?)",
         packet(lm, archive=[W, d(long_dir), pax_block(rec)
                             + bytes(header(b"workspace/evil", b"0", 0o644, 5)) + pad(b"hello")]),
         "pax_invalid")
    lt = "t/" * 60 + "x"
    lsm = [W, s("workspace/l", lt)]
    case(g, "pax-linkpath-conflict", "a PAX linkpath and a different ustar linkname",
         packet(lsm, archive=[W, pax_block(pax_record("linkpath", lt.encode()))
                              + bytes(header(b"workspace/l", b"2", 0o777, 0, b"../../etc/passwd"))]),
         "pax_invalid", "workspace/l")
    bad_len = b"0" + rec
    case(g, "pax-length-leading-zero", "a PAX record length with a leading zero",
         packet(lm, archive=[W, d(long_dir), pax_block(bad_len) + bytes(header(b"", b"0", 0o644, 5))
                             + pad(b"hello")]), "pax_invalid")
    case(g, "pax-oversized", "a PAX header declaring 8 GiB of records",
         packet(lm, archive=[W, d(long_dir), bytes(header(b"././@PaxHeader", b"x", 0o644, 0o77777777777))]),
         "pax_invalid")
    case(g, "pax-empty", "a PAX header with no records", packet(sm, archive=[
        W, bytes(header(b"././@PaxHeader", b"x", 0o644, 0)) + member_bytes(sm[1])]), "pax_invalid")
    case(g, "pax-path-dotdot", "a PAX path that climbs out of the root", packet(lm, archive=[
        W, d(long_dir), pax_block(pax_record("path", ("workspace/../../" + "e" * 300).encode()))
        + bytes(header(b"", b"0", 0o644, 5)) + pad(b"hello")]), "path_not_canonical")
    case(g, "checksum-blank", "a checksum field of spaces",
         patch(p, "workspace/README.md", CHKSUM, b" " * 8, fix=False), "header_checksum")
    dpk = packet([W, d("workspace/d")])
    case(g, "dir-with-size", "a directory header declaring a 512-byte body (data hidden in a directory)",
         dpk[:-2 * BLOCK - BLOCK] + bytes(header(b"workspace/d", b"5", 0o755, 512)) + b"x" * BLOCK + END,
         "member_mismatch", "workspace/d")
    # Size desyncs and numeric field abuse.
    case(g, "size-desync-ustar", "a header declares fewer bytes than the manifest (body read as headers)",
         patch(p, "workspace/README.md", SIZE, octal(0, 12)), "member_mismatch", "workspace/README.md")
    b256 = bytearray(12)
    b256[0] = 0x80
    b256[-4:] = (700).to_bytes(4, "big")
    case(g, "numeric-base256-size", "a size in GNU base-256", patch(p, "workspace/README.md", SIZE, bytes(b256)),
         "header_numeric")
    case(g, "numeric-space-padded", "a size padded with spaces, not zeros",
         patch(p, "workspace/README.md", SIZE, b"       1274 "), "header_numeric")
    case(g, "numeric-no-nul", "a mode field of 8 digits without NUL",
         patch(p, "workspace/README.md", MODE, b"00000644"), "header_numeric")
    case(g, "numeric-not-octal", "a digit 8 in the size field",
         patch(p, "workspace/README.md", SIZE, b"0000000128\0\0"[:11] + b"\0"), "header_numeric")
    case(g, "numeric-negative-mtime", "a negative base-256 mtime",
         patch(p, "workspace/README.md", MTIME, b"\xff" * 12), "header_numeric")
    # Padding.
    readme = header_offset(p, "workspace/README.md")
    b = bytearray(p)
    b[readme + BLOCK + 700 + 3] = 0x41
    case(g, "padding-body-nonzero", "bytes hidden in a body's padding", bytes(b), "padding_not_zero",
         "workspace/README.md")
    b = bytearray(p)
    b[BLOCK + len(canonical_json(manifest(BASE))) + 1] = 1
    case(g, "padding-manifest-nonzero", "bytes hidden in packet.json's padding", bytes(b), "padding_not_zero",
         "packet.json")
    case(g, "header-pad-nonzero", "bytes in a header's unused tail (500-511)",
         patch(p, "workspace/README.md", PAD, b"hidden"), "header_not_canonical")
    # Truncation at every block boundary, and inside a block.
    blocks = len(p) // BLOCK
    for i in range(blocks):
        case(g, "truncated-at-block-%02d" % i, "the packet cut after %d of %d blocks" % (i, blocks),
             p[: i * BLOCK], "truncated")
    case(g, "truncated-mid-header", "the packet cut inside a header block", p[: BLOCK + 100], "truncated")
    # Trailing data and concatenation.
    case(g, "trailing-zero-block", "a third zero block after the end marker", p + b"\0" * BLOCK, "trailing_data")
    case(g, "trailing-record-padding", "padded to a 10240-byte record as tar(1) does",
         p + b"\0" * (-len(p) % 10240 or 10240), "trailing_data")
    case(g, "trailing-byte", "one byte after the end marker", p + b"\n", "trailing_data")
    case(g, "concatenated", "two valid packets concatenated (tar -A, --ignore-zeros)", p + packet([W]),
         "trailing_data")
    case(g, "end-marker-then-header", "one zero block, then a member header",
         p[: -2 * BLOCK] + b"\0" * BLOCK + member_bytes(f("workspace/zz", b"")) + END, "end_marker")

    header_field_cases()
    pax_more_cases()
    end_cases()


def header_field_cases():
    """Header fields, patched one at a time in the packet of RICH."""
    g = "tar"
    r = rich()
    at = header_offset(r, A)
    case(g, "tar-checksum-not-octal", "a checksum field that is not octal digits",
         patch(r, A, CHKSUM, b"0x1234\0 ", fix=False), "header_checksum")
    b = bytearray(r)
    b[at + 20] ^= 1
    case(g, "tar-checksum-stale", "one bit of the name field changed and the checksum left as it was", bytes(b),
         "header_checksum")
    case(g, "tar-checksum-layout-nul", "the right checksum written as 7 digits and a NUL",
         patch(r, A, CHKSUM, b"%07o\0" % checksum(r[at : at + BLOCK]), fix=False), "header_not_canonical", A)
    case(g, "tar-magic-uppercase", "magic USTAR in capitals", patch(r, A, MAGIC, b"USTAR\0"), "header_magic")
    case(g, "tar-version-manifest", "packet.json's header with version '0\\0'",
         patch(r, "packet.json", VERSION, b"0\0"), "header_magic")
    for tf in (b"X", b"Z"):
        case(g, "tar-typeflag-" + tf.decode(), "typeflag %r: vendor extension" % tf.decode(),
             patch(r, A, TYPEFLAG, tf), "typeflag_forbidden")
    for cid, field, value, what in [
        ("numeric-size-space-inside", SIZE, b"0000000000 6", "a space among a size's digits"),
        ("numeric-size-leading-space", SIZE, b" 0000000006\0", "a size with a leading space (older tars)"),
        ("numeric-size-trailing-space", SIZE, b"0000000006 \0", "a size with a space before its NUL"),
        ("numeric-size-12-digits", SIZE, b"000000000006", "a size of 12 digits and no NUL"),
        ("numeric-size-base256-negative", SIZE, b"\xff" * 11 + b"\xfa", "a negative base-256 size"),
        ("numeric-size-minus", SIZE, b"-0000000006\0", "a size with a minus sign"),
        ("numeric-size-short", SIZE, b"6", "a size without its leading zeros"),
        ("numeric-mode-short", MODE, b"0644", "a mode without its leading zeros"),
        ("numeric-mode-leading-space", MODE, b" 000644\0", "a mode with a leading space"),
        ("numeric-uid-space-terminated", UID, b"0000000 ", "a uid ended by a space instead of a NUL"),
        ("numeric-mtime-base256", MTIME, b"\x80" + b"\0" * 10 + b"\x01", "an mtime in GNU base-256"),
        ("numeric-devmajor-empty", DEVMAJOR, b"", "a device number field left all NUL"),
    ]:
        case(g, cid, what, patch(r, A, field, value), "header_numeric")
    for cid, n in [("size-header-smaller", 5), ("size-header-larger", 7), ("size-header-block", 512)]:
        case(g, cid, "a header declaring %d bytes where the manifest says 6" % n, patch(r, A, SIZE, octal(n, 12)),
             "member_mismatch", A)
    for cid, path, what in [("dir-size-one", "workspace/bin", "directory"),
                            ("symlink-size-one", "workspace/link", "symlink")]:
        case(g, cid, "a %s header declaring a 1-byte body (none follows)" % what,
             patch(r, path, SIZE, octal(1, 12)), "member_mismatch", path)
    case(g, "header-typeflag-file-for-dir", "a directory's header says regular file",
         patch(r, "workspace/bin", TYPEFLAG, b"0"), "member_mismatch", "workspace/bin")
    case(g, "header-last-byte", "a byte in a header's last position (511)", patch(r, A, (511, 1), b"x"),
         "header_not_canonical")
    case(g, "header-prefix-after-nul", "bytes after the NUL of an empty prefix", patch(r, A, PREFIX, b"\0x"),
         "header_not_canonical")
    case(g, "header-linkname-after-nul", "bytes after the NUL of an empty link name",
         patch(r, A, LINKNAME, b"\0x"), "header_not_canonical")
    case(g, "header-linkname-on-file", "a link name on a regular file", patch(r, A, LINKNAME, b"x"),
         "header_not_canonical", A)
    case(g, "manifest-header-mode", "packet.json's header with mode 0755",
         patch(r, "packet.json", MODE, octal(0o755, 8)), "header_not_canonical", "packet.json")
    b = bytearray(r)
    b[at + 2 * BLOCK - 1] = 1
    case(g, "padding-body-last-byte", "a byte in the last position of a body's padding", bytes(b),
         "padding_not_zero", A)


def pax_more_cases():
    """The PAX header of LONG_MEMBERS, built wrong in each way."""
    g = "tar"
    m = LONG_MEMBERS[1]
    path_rec = pax_record("path", LONG.encode())
    for key in ["atime", "comment", "GNU.sparse.map", "hdrcharset"]:
        # Listed before `path` (bytewise order), so only the key is at fault.
        case(g, "pax-key-" + key.lower().replace(".", "-"), "a PAX %s record beside the path" % key,
             pax_packet(pax_record(key, b"0") + path_rec, m), "pax_invalid")
    target = "t" * 150
    case(g, "pax-records-unordered", "PAX path then linkpath (records out of bytewise order)",
         pax_packet(path_rec + pax_record("linkpath", target.encode()), s(LONG, target)), "pax_invalid")
    text = path_rec.decode()
    length, rest = text.split(" ", 1)
    for cid, bad, what in [
        ("pax-length-too-long", "%d %s" % (int(length) + 1, rest), "a record length one too long"),
        ("pax-length-too-short", "%d %s" % (int(length) - 1, rest), "a record length one too short"),
        ("pax-record-double-space", "%s  %s" % (length, rest), "two spaces after a record length"),
        ("pax-record-no-newline", text.replace("\n", "\r"), "a record ended by CR, not LF"),
        ("pax-record-no-equals", text.replace("=", ":", 1), "a record with no '='"),
        ("pax-record-no-space", length + rest, "a record with no space after its length"),
    ]:
        case(g, cid, what, pax_packet(bad.encode(), m), "pax_invalid")
    link = s("workspace/l", "a")
    case(g, "pax-unneeded-linkpath", "a PAX linkpath for a one-byte target",
         packet([W, link], archive=[W, pax_block(pax_record("linkpath", b"a"))
                                    + bytes(header(b"workspace/l", b"2", 0o777, 0))]),
         "pax_invalid", "workspace/l")
    case(g, "pax-linkpath-on-file", "a PAX linkpath on a regular file",
         pax_packet(pax_record("linkpath", target.encode()) + path_rec, m), "pax_invalid", LONG)
    case(g, "pax-record-too-large", "a PAX header of 9000 bytes of records",
         pax_packet(pax_record("path", b"a" * 9000), m), "pax_invalid")
    listed = manifest_member(canonical_json(manifest([W]))) + member_bytes(W)
    case(g, "pax-then-eof", "a PAX header, then nothing at all", listed + pax_block(path_rec), "truncated")
    case(g, "pax-header-gnu-name", "a PAX header named as GNU tar names them (./PaxHeaders/...)",
         packet(LONG_MEMBERS, archive=[W, bytes(header(b"./PaxHeaders/nnn", b"x", 0o644, len(path_rec)))
                                       + pad(path_rec) + member_bytes(m)]), "header_not_canonical")
    case(g, "pax-header-mode", "a PAX header with mode 0600 (then nothing)",
         manifest_member(canonical_json(manifest(LONG_MEMBERS))) + member_bytes(W)
         + bytes(header(b"././@PaxHeader", b"x", 0o600, len(path_rec))) + pad(path_rec), "header_not_canonical")
    lp = packet(LONG_MEMBERS)
    pax_at = [start for _, start, name in headers(lp) if name == LONG][0]
    b = bytearray(lp)
    b[pax_at + 2 * BLOCK - 1] = 1
    case(g, "padding-pax-nonzero", "a byte in a PAX header's padding", bytes(b), "padding_not_zero")
    case(g, "gnu-long-name-member", "a GNU long-name member (typeflag L) carrying the path",
         packet(LONG_MEMBERS, archive=[W, bytes(header(b"././@LongLink", b"L", 0o644, len(LONG) + 1))
                                       + pad(LONG.encode() + b"\0") + member_bytes(m)]), "typeflag_forbidden")
    case(g, "pax-path-not-utf8", "a PAX path ending in a lone UTF-8 lead byte",
         pax_packet(pax_record("path", LONG.encode() + b"\xc3"), m), "path_not_utf8")
    case(g, "truncated-in-pax-records", "the packet cut inside a PAX header's records",
         lp[: pax_at + BLOCK + 50], "truncated")


def end_cases():
    g = "tar"
    p = base()
    end = len(p) - 2 * BLOCK
    case(g, "trailing-nul-byte", "one NUL byte after the end marker", p + b"\0", "trailing_data")
    b = bytearray(p)
    b[end + BLOCK + 100] = 1
    case(g, "end-marker-second-block-nonzero", "one zero block, then a block that is not all zero", bytes(b),
         "end_marker")
    case(g, "truncated-mid-body", "the packet cut inside a body",
         p[: header_offset(p, "workspace/README.md") + BLOCK + 100], "truncated")
    case(g, "truncated-last-byte", "the packet one byte short", p[:-1], "truncated")


def path_cases():
    g = "paths"
    for cid, path, code, what in [
        ("path-absolute", "/etc/cron.d/evil", "path_absolute", "an absolute path"),
        ("path-dotdot", "workspace/../../etc/passwd", "path_not_canonical", "a '..' component"),
        ("path-dotdot-first", "../evil", "path_not_canonical", "a path starting with '..'"),
        ("path-dot", "workspace/./a", "path_not_canonical", "a '.' component"),
        ("path-empty-component", "workspace//a", "path_not_canonical", "an empty component"),
        ("path-trailing-slash", "workspace/a/", "path_not_canonical", "a trailing slash"),
        ("path-nul", "workspace/a\0.txt", "path_control_char", "a NUL inside a name"),
        ("path-newline", "workspace/a\nb", "path_control_char", "a newline inside a name"),
        ("path-escape-sequence", "workspace/\x1b[2J", "path_control_char", "a terminal escape sequence"),
        ("path-c1-control", "workspace/a\u0085b", "path_control_char", "a C1 control (NEL)"),
        ("path-del", "workspace/a\x7f", "path_control_char", "a DEL"),
        ("path-sibling-prefix", "workspacex/a", "path_outside_roots", "a sibling of the root sharing its prefix"),
        ("path-other-root", "home/user/.bashrc", "path_outside_roots", "a top-level name other than the roots"),
        ("path-manifest-again", "packet.json", "path_outside_roots", "a second packet.json among the members"),
        ("path-dotdot-last", "workspace/..", "path_not_canonical", "a path ending in '..'"),
        ("path-tab", "workspace/a\tb", "path_control_char", "a tab inside a name"),
        ("path-c1-csi", "workspace/a\u009bb", "path_control_char", "a C1 control (CSI)"),
        ("path-empty", "", "path_not_canonical", "an empty path"),
    ]:
        refuse_built(g, cid, what + " (in the manifest and the header)", [W, f(path, b"x")], code, path)
    long = "workspace/" + "a" * 4087
    assert len(long) == 4097
    case(g, "path-too-long", "a 4097-byte path", packet([W, f(long, b"x")]), "path_too_long")
    # The manifest is honest; the header lies.
    p = packet([W, f("workspace/a.txt", b"x")])
    case(g, "header-path-absolute", "the header names /workspace/a.txt, the manifest workspace/a.txt",
         patch(p, "workspace/a.txt", NAME, b"/workspace/a.txt"), "path_absolute")
    case(g, "header-path-dotdot", "the header names workspace/../a.txt",
         patch(p, "workspace/a.txt", NAME, b"workspace/../a.txt"), "path_not_canonical")
    case(g, "header-path-dot-prefix", "the header names ./workspace/a.txt (tar's habit)",
         patch(p, "workspace/a.txt", NAME, b"./workspace/a.txt"), "path_not_canonical")
    case(g, "header-path-nul-hidden", "the header names workspace/a.txt\\0/../../x (bytes after NUL)",
         patch(p, "workspace/a.txt", NAME, b"workspace/a.txt\0/../../x"), "header_not_canonical")
    u = packet([W, f("workspace/\u00e9", b"x")])
    case(g, "header-path-latin1", "the header name is Latin-1, not UTF-8",
         patch(u, "workspace/\u00e9", NAME, b"workspace/\xe9"), "path_not_utf8")
    dp = packet([W, d("workspace/a")])
    case(g, "header-dir-trailing-slash", "a directory header written with a trailing slash",
         patch(dp, "workspace/a", NAME, b"workspace/a/"), "path_not_canonical")
    case(g, "header-prefix-split-short", "a short path split into prefix and name",
         patch(patch(p, "workspace/a.txt", PREFIX, b"workspace"), "workspace/workspace/a.txt", NAME, b"a.txt"),
         "header_not_canonical", "workspace/a.txt")
    case(g, "header-second-manifest", "a member header named packet.json",
         patch(p, "workspace/a.txt", NAME, b"packet.json"), "path_outside_roots")
    for cid, name, code, what in [
        ("header-path-dot", b"workspace/./a.txt", "path_not_canonical", "a '.' component"),
        ("header-path-empty-component", b"workspace//a.txt", "path_not_canonical", "an empty component"),
        ("header-path-newline", b"workspace/a\nb", "path_control_char", "a newline"),
        ("header-path-escape", b"workspace/a\x1bb", "path_control_char", "an ESC"),
        ("header-path-outside-roots", b"elsewhere/a.txt", "path_outside_roots", "a top-level name other than the roots"),
        ("header-path-empty", b"", "path_not_canonical", "an empty name"),
    ]:
        case(g, cid, "the manifest is honest, the header's name has %s" % what, patch(p, "workspace/a.txt", NAME, name),
             code)
    exact = ("workspace/" + "d/" * 2042 + "fff")[:4096]
    case(g, "path-4096-bytes", "a 4096-byte path: within the limit, so its missing parents are what is refused",
         packet([W, f(exact, b"x")], archive=[W]), "member_parent_missing", exact)
    case(g, "root-is-file", "the workspace root is a file", packet([f("workspace", b"x")]),
         "member_parent_missing", "workspace")
    case(g, "root-is-symlink", "the workspace root is a symlink to /", packet([s("workspace", "x")]),
         "member_parent_missing", "workspace")
    case(g, "root-symlink-to-other-root", "the workspace root is a symlink to the harness root (found by the "
         "path-rules fuzz target: resolution from a root starts above the roots)",
         packet([d("harness"), s("workspace", "harness")]), "member_parent_missing", "workspace")
    refuse_built(g, "root-missing", "no workspace root", [], "member_missing", "workspace")
    refuse_built(g, "parent-missing", "a file whose parent directory is not a member",
                 [W, f("workspace/a/b", b"x")], "member_parent_missing", "workspace/a/b")
    case(g, "below-file", "a member below a regular file",
         packet([W, f("workspace/a", b"x"), f("workspace/a/b", b"y")]), "member_parent_missing", "workspace/a/b")
    accept("paths", "accept-deep-nesting", "120 nested directories (paths past 256 bytes use PAX)",
           [W] + [d("workspace/" + "/".join(["dd"] * i)) for i in range(1, 121)]
           + [f("workspace/" + "/".join(["dd"] * 120) + "/leaf.txt", b"deep\n")])
    refuse_built(g, "deep-path-too-long", "2044 nested directories, 4097 bytes deep",
                 [W, f("workspace/" + "/".join(["a"] * 2043) + "/bb", b"x")], "path_too_long")
    refuse_built(g, "member-listed-twice", "the same file twice, in the manifest and the archive",
                 [W, f("workspace/a", b"x"), f("workspace/a", b"x")], "member_duplicate", "workspace/a")
    refuse_built(g, "file-then-dir", "a file and a directory at the same path",
                 [W, f("workspace/a", b"x"), d("workspace/a")], "member_duplicate", "workspace/a")
    case(g, "dir-then-file", "a directory and a file at the same path",
         packet([W, d("workspace/x"), f("workspace/x")]), "member_duplicate", "workspace/x")
    case(g, "member-order-componentwise", "a-b listed before a/ (the format orders '/' lowest)",
         packet([W, f("workspace/a-b"), d("workspace/a"), f("workspace/a/c")]), "member_unsorted", "workspace/a")


def link_cases():
    g = "links"
    for cid, link, target, code, what in [
        ("symlink-absolute", "workspace/l", "/etc/passwd", "symlink_absolute", "a symlink to /etc/passwd"),
        ("symlink-escape-dotdot", "workspace/l", "../../../../etc", "symlink_escapes", "a symlink up and out"),
        ("symlink-escape-root", "workspace/l", "..", "symlink_escapes", "a symlink to the root's parent"),
        ("symlink-escape-temporary", "workspace/a/l", "../../workspace/a", "symlink_escapes",
         "a symlink that leaves the root and comes back"),
        ("symlink-escape-sibling", "workspace/l", "../workspace-evil/x", "symlink_escapes",
         "a symlink to a sibling sharing the root's prefix"),
        ("symlink-empty-target", "workspace/l", "", "symlink_target_invalid", "an empty target"),
        ("symlink-control-target", "workspace/l", "a\nb", "symlink_target_invalid", "a newline in the target"),
        ("symlink-target-too-long", "workspace/l", "a/" * 2048 + "b", "path_too_long", "a 4097-byte target"),
    ]:
        members = [W, d("workspace/a"), s(link, target)] if link.startswith("workspace/a/") else [W, s(link, target)]
        refuse_built(g, cid, what, members, code, link)
    hm = [d("harness"), d("harness/codex"), s("harness/codex/l", "../../workspace/secret"), W]
    case(g, "symlink-cross-root", "a harness symlink into the workspace", packet(hm), "symlink_escapes",
         "harness/codex/l")
    refuse_built(g, "symlink-through-symlink", "a target that passes through another symlink",
                 [W, s("workspace/l", "d"), s("workspace/m", "l/x")], "symlink_through_symlink", "workspace/m")
    case(g, "symlink-through-symlink-escape", "a chain whose lexical walk stays inside but whose links do not",
         packet([W, d("workspace/a"), d("workspace/a/b"), s("workspace/a/b/up", "../.."),
                 s("workspace/z", "a/b/up/../x")]), "symlink_through_symlink", "workspace/z")
    refuse_built(g, "write-through-symlink", "a symlink to '.' and a file beneath it",
                 [W, s("workspace/l", "."), f("workspace/l/x", b"x")], "member_below_symlink", "workspace/l/x")
    case(g, "symlink-then-dir", "a symlink, then a directory of the same name (tar-rs chmod-through-symlink)",
         packet([W, s("workspace/x", "a"), d("workspace/x")]), "member_duplicate", "workspace/x")
    case(g, "symlink-then-file", "a symlink, then a file of the same name",
         packet([W, s("workspace/x", "a"), f("workspace/x", b"pwned")]), "member_duplicate", "workspace/x")
    case(g, "symlink-escape-lexical", "a target whose '..' leaves the root after a directory",
         packet([W, d("workspace/d"), s("workspace/l", "d/../../x")], archive=[W, d("workspace/d")]),
         "symlink_escapes", "workspace/l")
    case(g, "symlink-nul-target", "a NUL in the target", packet([W, s("workspace/l", "a\0b")], archive=[W]),
         "symlink_target_invalid", "workspace/l")
    case(g, "symlink-target-mismatch", "the archive's target is not the manifest's",
         packet([W, s("workspace/l", "a")], archive=[W, s("workspace/l", "../../etc")]), "member_mismatch",
         "workspace/l")
    p = packet([W, f("workspace/x", b"")])
    case(g, "header-symlink-for-file", "the manifest lists a file, the header is a symlink to /etc/shadow",
         patch(patch(p, "workspace/x", TYPEFLAG, b"2"), "workspace/x", LINKNAME, b"/etc/shadow"),
         "member_mismatch", "workspace/x")
    for cid, tf, target in [("hardlink-absolute", b"1", b"/etc/passwd"),
                            ("hardlink-relative", b"1", b"workspace/a.txt")]:
        hp = packet([W, f("workspace/a.txt", b"x"), f("workspace/h", b"")])
        case(g, cid, "a hard link to %s" % target.decode(),
             patch(patch(hp, "workspace/h", TYPEFLAG, tf), "workspace/h", LINKNAME, target), "typeflag_forbidden")
    accept(g, "accept-symlink-chain", "a chain of 40 symlinks, each safe",
           [W, f("workspace/end", b"end\n")] + [s("workspace/l%02d" % i, "l%02d" % (i + 1) if i < 39 else "end")
                                                for i in range(40)])
    accept(g, "accept-symlink-dangling", "a dangling symlink (allowed)", [W, s("workspace/l", "missing/file")])
    accept(g, "accept-symlink-to-root", "a symlink in a subdirectory to the root itself",
           [W, d("workspace/a"), s("workspace/a/up", "..")])
    accept(g, "accept-symlink-dotted", "a target with '.', '..' and empty components that stays inside",
           [W, d("workspace/a"), d("workspace/a/b"), f("workspace/a/b/t", b"t"), s("workspace/a/l", "./b//../b/t")])


def special_cases():
    g = "special"
    p = packet([W, f("workspace/dev", b"")])
    for tf, what in [(b"3", "character device"), (b"4", "block device"), (b"6", "FIFO")]:
        q = patch(p, "workspace/dev", TYPEFLAG, tf)
        q = patch(q, "workspace/dev", DEVMAJOR, octal(8 if tf == b"4" else 1, 8))
        case(g, "special-%s" % what.split()[0].lower(), "a %s" % what, q, "typeflag_forbidden")


def metadata_cases():
    g = "metadata"
    p = packet([W, d("workspace/bin"), f("workspace/bin/tool", b"#!/bin/sh\n", exe=True)])
    for cid, path, mode, what in [
        ("mode-setuid", "workspace/bin/tool", 0o4755, "a setuid executable"),
        ("mode-setgid", "workspace/bin/tool", 0o2755, "a setgid executable"),
        ("mode-sticky-dir", "workspace/bin", 0o1777, "a sticky world-writable directory"),
        ("mode-world-writable", "workspace/bin/tool", 0o777, "a world-writable file"),
        ("mode-private", "workspace/bin/tool", 0o600, "a 0600 file"),
        ("mode-no-bits", "workspace/bin", 0o000, "a directory with no permissions"),
    ]:
        case(g, cid, what + " (header)", patch(p, path, MODE, octal(mode, 8)), "mode_not_canonical", path)
    m = [W, f("workspace/a", b"x")]
    case(g, "manifest-mode-world-writable", "the manifest lists a file with mode 0777",
         packet(m, manifest_bytes=canonical_json(manifest([W, dict(m[1], mode=0o777)]))),
         "mode_not_canonical", "workspace/a")
    case(g, "manifest-mode-setuid", "the manifest lists mode 4755",
         packet(m, manifest_bytes=canonical_json(manifest([W, dict(m[1], mode=0o4755)]))), "manifest_invalid")
    for cid, field, value, what in [
        ("owner-uid", UID, octal(1000, 8), "uid 1000"),
        ("owner-gid", GID, octal(0o4000, 8), "gid 2048"),
        ("owner-uname", UNAME, b"root", "uname root"),
        ("owner-gname", GNAME, b"wheel", "gname wheel"),
        ("mtime-set", MTIME, octal(1700000000, 12), "a real mtime"),
        ("devmajor-set", DEVMAJOR, octal(1, 8), "a device number on a file"),
    ]:
        case(g, cid, what, patch(p, "workspace/bin/tool", field, value), "header_not_canonical")
    r = rich()
    for cid, path, mode in [
        ("mode-file-1644", A, 0o1644), ("mode-file-0664", A, 0o664), ("mode-file-0744", A, 0o744),
        ("mode-file-type-bits", A, 0o100644), ("mode-dir-0700", "workspace/bin", 0o700),
        ("mode-dir-1755", "workspace/bin", 0o1755), ("mode-dir-2755", "workspace/bin", 0o2755),
        ("mode-dir-0775", "workspace/bin", 0o775), ("mode-symlink-0755", "workspace/link", 0o755),
        ("mode-symlink-4777", "workspace/link", 0o4777),
    ]:
        case(g, cid, "mode %o in the header of %s" % (mode, path), patch(r, path, MODE, octal(mode, 8)),
             "mode_not_canonical", path)
    for cid, mode, m, code, path in [
        ("manifest-mode-file-0600", "0600", f("workspace/x"), "manifest_invalid", "packet.json"),
        ("manifest-mode-three-digits", "755", f("workspace/x"), "manifest_invalid", "packet.json"),
        ("manifest-mode-dir-0644", "0644", d("workspace/x"), "mode_not_canonical", "workspace/x"),
        ("manifest-mode-symlink-0755", "0755", s("workspace/x", "y"), "mode_not_canonical", "workspace/x"),
        ("manifest-mode-dir-1755", "1755", d("workspace/x"), "manifest_invalid", "packet.json"),
    ]:
        listed = manifest([W, m])
        listed["members"][1]["mode"] = mode
        case(g, cid, "the manifest lists a %s with mode %s" % (m["type"], mode),
             packet([W, m], manifest_bytes=canonical_json(listed)), code, path)
    for field, value, what in [(MTIME, octal(1_700_000_000, 12), "mtime"), (UID, octal(1000, 8), "uid"),
                               (GID, octal(1000, 8), "gid"), (UNAME, b"user", "uname"),
                               (GNAME, b"staff", "gname")]:
        for path, kind in [("workspace", "dir"), ("workspace/link", "symlink"), ("packet.json", "manifest")]:
            case(g, "%s-on-%s" % (what, kind), "a %s in the header of %s" % (what, path),
                 patch(r, path, field, value), "header_not_canonical")
    case(g, "devminor-set", "a minor device number on a file", patch(r, A, DEVMINOR, octal(1, 8)),
         "header_not_canonical")
    lm = [W, f("workspace/a", b"x")]
    for key in ["SCHILY.xattr.security.capability", "LIBARCHIVE.xattr.user.x", "SCHILY.acl.access",
                "uid", "uname"]:
        case(g, "pax-%s" % key.lower().replace(".", "-"), "a PAX %s record" % key,
             packet(lm, archive=[W, pax_block(pax_record(key, b"\x01\x00\x00\x02")) + member_bytes(lm[1])]),
             "pax_invalid")


def limit_cases():
    g = "limits"
    p = packet([W, f("workspace/a", b"hello")])
    case(g, "limit-declared-size-8gib", "a header declaring 8 GiB where the manifest says 5 bytes",
         patch(p, "workspace/a", SIZE, octal(MEMBER_MAX, 12)), "member_mismatch", "workspace/a")

    def listing(sizes):
        """packet.json listing the workspace and files of these sizes."""
        return canonical_json(manifest([W] + [dict(f("workspace/f%d" % i), size=n, sha256="%064x" % (i + 1))
                                              for i, n in enumerate(sizes)]))

    case(g, "limit-manifest-file-8gib", "the manifest lists a file of 8 GiB, one byte more than a ustar "
         "header can declare", packet([W, f("workspace/a", b"")], manifest_bytes=canonical_json(
             manifest([W, dict(f("workspace/a"), size=8 * GIB, sha256="0" * 64)]))), "limit_size", "workspace/a")
    case(g, "limit-manifest-total", "the manifest lists three 6 GiB files (18 GiB in all)",
         packet([W], manifest_bytes=listing([6 * GIB] * 3)), "limit_size")
    case(g, "limit-manifest-headers", "two files of 8 GiB - 1 byte: their sizes are under 16 GiB, the packet "
         "with its headers is not", packet([W], manifest_bytes=listing([MEMBER_MAX] * 2)), "limit_size")
    case(g, "limit-manifest-declared", "packet.json declares 64 MiB + 1 bytes",
         bytes(header(b"packet.json", b"0", 0o644, (64 << 20) + 1)) + END, "limit_manifest", "packet.json")
    case(g, "limit-manifest-declared-8gib", "packet.json declares 8 GiB",
         bytes(header(b"packet.json", b"0", 0o644, MEMBER_MAX)) + END, "limit_manifest", "packet.json")
    many = [W] * 250_001  # the member count is checked before anything else
    case(g, "limit-members", "a manifest listing 250,001 members", packet(many, archive=[]), "limit_members")
    # Within /2's limits and past /1's: what follows the manifest is read.
    listed = canonical_json(manifest([W, dict(f("workspace/big"), size=3 * GIB, sha256="0" * 64)]))
    case(g, "limit-3gib-cut-after-manifest", "a 3 GiB file (past /1's 1 GiB limit, within /2's 16 GiB), the "
         "packet cut after its manifest", manifest_member(listed), "truncated")
    listed = canonical_json(manifest([W, dict(f("workspace/big"), size=MEMBER_MAX, sha256="0" * 64)]))
    case(g, "limit-file-8gib-less-one", "a file of 8 GiB - 1 byte, the most a header declares: its header and "
         "nothing more", manifest_member(listed) + member_bytes(W)
         + bytes(header(b"workspace/big", b"0", 0o644, MEMBER_MAX)), "truncated")
    case(g, "limit-members-in-header-only", "a valid manifest, then 100 unlisted members",
         packet([W], archive=[W] + [member_bytes(d("workspace/%05d" % i)) for i in range(100)]),
         "member_unexpected", "workspace/00000")


def v1_cases():
    """Packets of pillbox.session-packet/1, written before /2: a reader
    still accepts them, names them by the SHA-256 of the whole file and
    holds them to 1 GiB and to every byte rule."""
    g = "v1"

    def v1(cid, description, data, code=None, path=None, **kw):
        case(g, cid, description, data, code, path, version=1, **kw)

    r = packet(RICH, fmt=FORMAT_V1)
    v1("v1-accept", "a /1 packet given the SHA-256 of its whole file, its name", r,
       expected_digest="sha256:" + sha(r))
    v1("v1-accept-harness", "a /1 packet with a Codex harness section",
       packet([d("harness"), d("harness/codex"), d("harness/codex/sessions"),
               d("harness/codex/sessions/2026"), d("harness/codex/sessions/2026/11"),
               d("harness/codex/sessions/2026/11/30"),
               f("harness/codex/sessions/2026/11/30/rollout-2026-11-30T01-02-03-"
                 "0199a213-81c0-7800-8aa1-bbab2a035a53.jsonl", b"{}\n"), W],
              harness={"kind": "codex", "rollout": "harness/codex/sessions/2026/11/30/rollout-"
                       "2026-11-30T01-02-03-0199a213-81c0-7800-8aa1-bbab2a035a53.jsonl",
                       "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"}, fmt=FORMAT_V1))
    v1("v1-manifest-digest", "the same /1 packet given its packet.json's SHA-256 (a /2 name): a /1 packet is "
       "named by its whole file", r, "packet_digest_mismatch", expected_digest="sha256:" + sha(manifest_body(r)))
    v1("v1-other-digest", "a /1 packet given another packet's name", r, "packet_digest_mismatch",
       expected_digest=name_of(packet([W], fmt=FORMAT_V1), 1))
    size = GIB + 1
    listed = canonical_json(manifest([W, dict(f("workspace/big"), size=size)], fmt=FORMAT_V1))
    v1("v1-limit-file-just-over-1gib", "a /1 file of 1 GiB + 1 byte, its header and nothing more",
       manifest_member(listed) + member_bytes(W) + bytes(header(b"workspace/big", b"0", 0o644, size)),
       "limit_size", "workspace/big")
    v1("v1-limit-manifest-file-2gib", "a /1 manifest listing a 2 GiB file",
       packet([W, f("workspace/a", b"")], manifest_bytes=canonical_json(
           manifest([W, dict(f("workspace/a"), size=2 * GIB, sha256="0" * 64)], fmt=FORMAT_V1))),
       "limit_size", "workspace/a")
    big = [W] + [dict(f("workspace/f%d" % i), size=600 << 20, sha256="%064x" % (i + 1)) for i in range(2)]
    v1("v1-limit-manifest-total", "a /1 manifest listing two 600 MiB files (1.2 GiB in all)",
       packet([W], manifest_bytes=canonical_json(manifest(big, fmt=FORMAT_V1))), "limit_size")
    # The byte rules are /2's.
    at = header_offset(r, A)
    b = bytearray(r)
    b[at + 150] ^= 1
    v1("v1-checksum-member", "a /1 member header's checksum is wrong", bytes(b), "header_checksum")
    b = bytearray(r)
    b[at + BLOCK + 100] = 1
    v1("v1-padding-body-nonzero", "bytes hidden in a /1 body's padding", bytes(b), "padding_not_zero", A)
    b = bytearray(r)
    b[at + BLOCK] ^= 0x20
    v1("v1-member-sha-mismatch", "a /1 body of the right size with other bytes", bytes(b),
       "member_digest_mismatch", A)
    v1("v1-mode-setuid", "a setuid executable in a /1 header",
       patch(r, "workspace/bin/run", MODE, octal(0o4755, 8)), "mode_not_canonical", "workspace/bin/run")
    v1("v1-symlink-escape", "a /1 symlink up and out of the workspace",
       packet([W, s("workspace/l", "../../etc")], fmt=FORMAT_V1), "symlink_escapes", "workspace/l")
    v1("v1-trailing-byte", "one byte after a /1 packet's end marker", r + b"\n", "trailing_data")
    v1("v1-truncated-last-byte", "a /1 packet one byte short", r[:-1], "truncated")


def manifest_cases():
    g = "manifest"
    members = BASE
    good = manifest(members)
    body = canonical_json(good)

    def raw(cid, what, text, code, path="packet.json"):
        case(g, cid, what, packet(members, manifest_bytes=text), code, path)

    case(g, "manifest-not-first", "the workspace directory comes before packet.json",
         member_bytes(W) + manifest_member(body) + b"".join(member_bytes(m) for m in members[1:]) + END,
         "manifest_not_first")
    case(g, "manifest-is-directory", "packet.json is a directory",
         bytes(header(b"packet.json", b"5", 0o755, 0)) + END, "manifest_not_first")
    case(g, "manifest-absent", "members with no packet.json",
         b"".join(member_bytes(m) for m in members) + END, "manifest_not_first")
    case(g, "manifest-empty-archive", "just the end marker", END, "manifest_not_first")
    raw("manifest-duplicate-key", "the format key twice",
        b'{"format":"' + FORMAT_ID.encode() + b'",' + body[1:], "manifest_invalid")
    raw("manifest-duplicate-totals", "totals twice, the second one lying",
        body[:-1] + b',"totals":' + canonical_json(dict(totals(members), bytes=0)) + b"}", "manifest_invalid")
    raw("manifest-null-harness", "harness: null", canonical_json(dict(good, harness=None)), "manifest_invalid")
    raw("manifest-null-sha", "a member's sha256 is null",
        canonical_json(dict(good, members=[dict(good["members"][0])] + [
            dict(e, sha256=None) if e["type"] == "file" else e for e in good["members"][1:]])),
        "manifest_invalid")
    raw("manifest-unknown-key", "an unknown top-level key",
        canonical_json(dict(good, signature="trust-me")), "manifest_invalid")
    raw("manifest-unknown-member-key", "an unknown key in a member (uid)",
        canonical_json(dict(good, members=[dict(good["members"][0], uid=0)] + good["members"][1:])),
        "manifest_invalid")
    for cid, fmt, what in [
        ("manifest-format-3", "pillbox.session-packet/3", "a version after /2"),
        ("manifest-format-1-5", "pillbox.session-packet/1.5", "a version that does not exist"),
        ("manifest-format-unversioned", "pillbox.session-packet", "no version"),
        ("manifest-format-v2", "pillbox.session-packet/v2", "the version written v2"),
        ("manifest-format-case", "Pillbox.Session-Packet/2", "the id in other case"),
    ]:
        raw(cid, "format %s (%s)" % (fmt, what), canonical_json(dict(good, format=fmt)), "manifest_invalid")
    raw("manifest-float", "a size written as a float",
        body.replace(b'"size":700', b'"size":700.0'), "manifest_invalid")
    raw("manifest-negative", "a negative size", body.replace(b'"size":700', b'"size":-700'), "manifest_invalid")
    raw("manifest-bom", "a UTF-8 byte order mark", b"\xef\xbb\xbf" + body, "manifest_invalid")
    raw("manifest-not-utf8", "invalid UTF-8 in a string", body.replace(b"README", b"READ\xffE"), "manifest_invalid")
    raw("manifest-whitespace", "pretty-printed", json.dumps(good, sort_keys=True, indent=1).encode(),
        "manifest_not_canonical")
    raw("manifest-trailing-newline", "a trailing newline", body + b"\n", "manifest_not_canonical")
    raw("manifest-unsorted-keys", "keys in insertion order, not bytewise",
        json.dumps({"totals": good["totals"], "format": FORMAT_ID, "members": good["members"]},
                   separators=(",", ":")).encode(), "manifest_not_canonical")
    raw("manifest-escaped-slash", "a '/' written as '\\/'", body.replace(b"workspace/src", b"workspace\\/src", 1),
        "manifest_not_canonical")
    raw("manifest-unicode-escape", "an ASCII letter written as \\u0061",
        body.replace(b"README", b"R\\u0045ADME", 1), "manifest_not_canonical")
    raw("manifest-totals", "totals that do not add up",
        canonical_json(dict(good, totals=dict(good["totals"], bytes=1))), "manifest_totals")
    raw("manifest-unsorted-members", "members listed out of order",
        canonical_json(dict(good, members=[good["members"][0], good["members"][2], good["members"][3],
                                           good["members"][1]])), "member_unsorted", "workspace/README.md")
    raw("manifest-duplicate-member", "a member listed twice",
        canonical_json(dict(good, members=good["members"] + [good["members"][-1]],
                            totals=totals(members + [members[-1]]))), "member_duplicate",
        "workspace/src/main.rs")
    for cid, text, what in [
        ("manifest-empty", b"", "an empty packet.json"),
        ("manifest-open-brace", b"{", "just '{'"),
        ("manifest-array", b"[]", "an array"),
        ("manifest-null", b"null", "null"),
        ("manifest-cut-short", body[:-1], "the closing brace missing"),
        ("manifest-first-byte-bracket", b"[" + body[1:], "the opening brace replaced by '['"),
        ("manifest-first-byte-space", b" " + body[1:], "the opening brace replaced by a space"),
        ("manifest-no-format", body.replace(b'"format":"' + FORMAT_ID.encode() + b'",', b""), "no format"),
        ("manifest-size-string", body.replace(b'"size":700', b'"size":"700"'), "a size written as a string"),
        ("manifest-size-overflow", body.replace(b'"size":700', b'"size":18446744073709551616'),
         "a size of 2^64"),
        ("manifest-type-hardlink", body.replace(b'"type":"dir"', b'"type":"hardlink"'), "a member of type hardlink"),
        ("manifest-type-directory", body.replace(b'"type":"dir"', b'"type":"directory"'),
         "type 'directory' instead of 'dir'"),
        ("manifest-sha-not-hex", body.replace(b'"sha256":"', b'"sha256":"X', 1), "a sha256 with a non-hex digit"),
        ("manifest-sha-prefixed", body.replace(b'"sha256":"', b'"sha256":"sha256:', 1),
         "a sha256 written with the sha256: prefix"),
        ("manifest-duplicate-member-key", body.replace(b'"mode":"0755",', b'"mode":"0755","mode":"0755",', 1),
         "a member with its mode twice"),
        ("manifest-duplicate-totals-key", body.replace(b'"bytes":', b'"files":3,"bytes":', 1),
         "totals with files twice"),
        ("manifest-totals-members", canonical_json(dict(good, totals=dict(good["totals"], members=3))),
         "totals counting one member too few"),
    ]:
        code = "manifest_totals" if cid == "manifest-totals-members" else "manifest_invalid"
        raw(cid, what, text, code)
    for cid, text, what in [
        ("manifest-leading-space", b" " + body, "a leading space"),
        ("manifest-escaped-key", body.replace(b'"format"', b'"\\u0066ormat"', 1), "a key with an escaped letter"),
    ]:
        raw(cid, what, text, "manifest_not_canonical")
    # Nulls, missing and unknown fields, on a manifest with every kind of
    # member (RICH: entry 0 a directory, 1 a file, 5 a symlink).
    rg = manifest(RICH)

    def entry_with(i, **fields):
        es = [dict(e) for e in rg["members"]]
        for k, v in fields.items():
            if v is DROP:
                es[i].pop(k)
            else:
                es[i][k] = v
        return canonical_json(dict(rg, members=es))

    def rich_raw(cid, what, text, code):
        case(g, cid, what, packet(RICH, manifest_bytes=text), code, "packet.json")

    for cid, text, what, code in [
        ("manifest-null-exclusions", canonical_json(dict(rg, exclusions=None)), "exclusions: null", "manifest_invalid"),
        ("manifest-empty-exclusions", canonical_json(dict(rg, exclusions=[])), "exclusions: [] (omitted when empty)",
         "manifest_not_canonical"),
        ("manifest-exclusion-unknown-key", canonical_json(dict(rg, exclusions=[
            {"matched": 1, "pattern": "*.log", "rule": "user", "why": "x"}])), "an exclusion with an unknown key",
         "manifest_invalid"),
        ("manifest-harness-null-model", canonical_json(dict(rg, harness={
            "kind": "codex", "model": None, "rollout": "harness/codex/x", "thread_id": "x"})), "harness model: null",
         "manifest_invalid"),
        ("manifest-harness-unknown-kind", canonical_json(dict(rg, harness={
            "kind": "aider", "rollout": "harness/aider/x", "thread_id": "x"})), "a harness of an unknown kind",
         "manifest_invalid"),
        ("manifest-harness-null-provider", canonical_json(dict(rg, harness={
            "kind": "opencode", "provider": None, "rollout": "harness/opencode/x", "thread_id": "x"})),
         "harness provider: null", "manifest_invalid"),
        ("manifest-harness-null-version", canonical_json(dict(rg, harness={
            "kind": "opencode", "rollout": "harness/opencode/x", "thread_id": "x", "version": None})),
         "harness version: null", "manifest_invalid"),
        ("manifest-totals-unknown-key", canonical_json(dict(rg, totals=dict(rg["totals"], other=0))),
         "an unknown key in totals", "manifest_invalid"),
        ("manifest-totals-missing-key", canonical_json(dict(rg, totals={
            k: v for k, v in rg["totals"].items() if k != "symlinks"})), "totals without symlinks", "manifest_invalid"),
        ("manifest-null-totals", canonical_json(dict(rg, totals=None)), "totals: null", "manifest_invalid"),
        ("manifest-no-totals", canonical_json({k: v for k, v in rg.items() if k != "totals"}), "no totals",
         "manifest_invalid"),
        ("manifest-no-members", canonical_json({k: v for k, v in rg.items() if k != "members"}), "no members",
         "manifest_invalid"),
        ("manifest-file-null-target", entry_with(1, target=None), "a file with target: null", "manifest_invalid"),
        ("manifest-file-no-sha", entry_with(1, sha256=DROP), "a file without sha256", "manifest_invalid"),
        ("manifest-file-no-size", entry_with(1, size=DROP), "a file without size", "manifest_invalid"),
        ("manifest-dir-with-size", entry_with(0, size=0), "a directory with a size", "manifest_invalid"),
        ("manifest-dir-with-target", entry_with(0, target="x"), "a directory with a target", "manifest_invalid"),
        ("manifest-symlink-no-target", entry_with(5, target=DROP), "a symlink without target", "manifest_invalid"),
        ("manifest-symlink-with-sha", entry_with(5, sha256=sha(b"")), "a symlink with a sha256", "manifest_invalid"),
    ]:
        rich_raw(cid, what, text, code)
    for cid, items, what in [
        ("exclusions-matched-zero", [{"matched": 0, "pattern": "*.log", "rule": "user"}], "an exclusion that matched 0"),
        ("exclusions-empty-pattern", [{"matched": 1, "pattern": "", "rule": "user"}], "an empty exclusion pattern"),
        ("exclusions-empty-rule", [{"matched": 1, "pattern": "*.log", "rule": ""}], "an empty exclusion rule"),
        ("exclusions-duplicate", [{"matched": 1, "pattern": "*.log", "rule": "user"}] * 2, "the same exclusion twice"),
    ]:
        rich_raw(cid, what, canonical_json(manifest(RICH, exclusions=items)), "manifest_invalid")
    # The archive disagrees with an honest manifest.
    case(g, "member-missing", "the manifest lists a member the archive lacks",
         packet(members, archive=members[:-1]), "member_missing", "workspace/src/main.rs")
    case(g, "member-extra", "the archive holds a member the manifest does not list",
         packet(members, archive=members + [f("workspace/zz-extra", b"surprise")]), "member_unexpected",
         "workspace/zz-extra")
    case(g, "member-reordered", "the archive's members in another order than the manifest's",
         packet(members, archive=[members[0], members[2], members[3], members[1]]), "member_unsorted",
         "workspace/src")
    case(g, "member-repeated", "the same member twice in the archive",
         packet(members, archive=members[:2] + [members[1]] + members[2:]), "member_duplicate",
         "workspace/README.md")
    case(g, "member-replaced", "a member the manifest does not name in place of one it does",
         packet(members, archive=members[:1] + [f("workspace/README.mdx", b"# demo\n" * 100)] + members[2:]),
         "member_unexpected", "workspace/README.mdx")
    case(g, "member-missing-middle", "a member missing from the middle of the archive (the next one arrives in "
         "its place)", packet(RICH, archive=RICH[:2] + RICH[3:]), "member_unsorted", "workspace/bin/run")
    case(g, "member-extra-middle", "an unlisted member in the middle of the archive",
         packet(RICH, archive=RICH[:2] + [f("workspace/b.txt")] + RICH[2:]), "member_unexpected", "workspace/b.txt")
    case(g, "manifest-name-case", "the first member is packet.jsoN", patch(base(), "packet.json", NAME, b"packet.jsoN"),
         "manifest_not_first")
    case(g, "member-type-mismatch", "a directory where the manifest lists a file",
         packet(members, archive=members[:1] + [d("workspace/README.md")] + members[2:]), "member_mismatch",
         "workspace/README.md")
    case(g, "member-size-mismatch", "a body one byte longer than the manifest says",
         packet(members, archive=members[:1] + [f("workspace/README.md", b"# demo\n" * 100 + b"!")] + members[2:]),
         "member_mismatch", "workspace/README.md")
    case(g, "member-sha-mismatch", "a body of the right size with other bytes",
         packet(members, archive=members[:1] + [f("workspace/README.md", b"# pwnd\n" * 100)] + members[2:]),
         "member_digest_mismatch", "workspace/README.md")
    case(g, "member-empty-sha-mismatch", "an empty file whose manifest sha256 is not that of no bytes",
         packet([W, f("workspace/e")], manifest_bytes=canonical_json(
             manifest([W, dict(f("workspace/e"), sha256="ab" * 32)]))), "member_digest_mismatch", "workspace/e")
    case(g, "member-mode-mismatch", "an executable bit the manifest does not list",
         patch(base(), "workspace/README.md", MODE, octal(0o755, 8)), "member_mismatch", "workspace/README.md")
    case(g, "packet-digest-mismatch", "a valid packet given with another packet's expected digest",
         base(), "packet_digest_mismatch", expected_digest=name_of(packet([W])))
    # A /2 packet's name is its packet.json's SHA-256, checked before any
    # other member: not the whole file's, and it does not vouch for bodies.
    b = base()
    case("digest", "digest-whole-file", "a /2 packet given the SHA-256 of its whole file (a /1 name)", b,
         "packet_digest_mismatch", "packet.json", expected_digest="sha256:" + sha(b))
    altered = packet(members, archive=members[:1] + [f("workspace/README.md", b"# pwnd\n" * 100)] + members[2:])
    case("digest", "digest-body-altered", "a /2 packet given its name, one body altered: the name matches the "
         "manifest, the body does not match its sha256", altered, "member_digest_mismatch",
         "workspace/README.md", expected_digest=name_of(altered))
    # One sha256 names one body.
    same = b"the same bytes\n"
    for cid, sizes, what in [
        ("digest-size-conflict", (len(same), len(same) + 3), "the later one larger"),
        ("digest-size-conflict-earlier-larger", (len(same) + 3, len(same)), "the earlier one larger"),
    ]:
        listed = [W, dict(f("workspace/a", same), size=sizes[0]), dict(f("workspace/b", same), size=sizes[1])]
        archive = [W, f("workspace/a", same[:sizes[0]].ljust(sizes[0], b"!")),
                   f("workspace/b", same[:sizes[1]].ljust(sizes[1], b"!"))]
        case(g, cid, "two files with one sha256 and different sizes (%s)" % what,
             packet(listed, archive=archive), "digest_size_conflict", "workspace/b")
    # A consumer parses the expected digest before it reads a byte.
    for cid, digest, what in [
        ("digest-syntax-empty", "sha256:", "no hex digits"),
        ("digest-syntax-uppercase", "sha256:" + "A" * 64, "upper-case hex"),
        ("digest-syntax-short", "sha256:" + "0" * 63, "63 hex digits"),
        ("digest-syntax-long", "sha256:" + "0" * 65, "65 hex digits"),
        ("digest-syntax-prefix-case", "SHA256:" + "0" * 64, "the prefix in capitals"),
        ("digest-syntax-no-prefix", "0" * 64, "no sha256: prefix"),
    ]:
        case("digest", cid, "a valid packet given with an expected digest of " + what, base(), "digest_syntax",
             expected_digest=digest)
    # Credentials and harness.
    for cid, path in [("credential-codex-auth", "workspace/.codex/auth.json"),
                      ("credential-ssh-key", "workspace/.ssh/id_ed25519"),
                      ("credential-netrc", "workspace/.netrc")]:
        parts = path.split("/")
        ms = [W] + [d("/".join(parts[: i + 1])) for i in range(1, len(parts) - 1)] + [f(path, b"secret")]
        refuse_built(g, cid, "a credential file %s" % path, ms, "credential_in_packet", path)
    for cid, path in [("credential-vault-token", "workspace/.vault-token"),
                      ("credential-pgpass", "workspace/home/.pgpass"),
                      ("credential-netrc-upper-case", "workspace/.NETRC"),
                      ("credential-kube-kelvin-sign", "workspace/.\u212aube/config")]:
        parts = path.split("/")
        ms = [W] + [d("/".join(parts[: i + 1])) for i in range(1, len(parts) - 1)] + [f(path, b"secret")]
        refuse_built(g, cid, "a credential file %s (names match as case-insensitive file systems match them)" % path,
                     ms, "credential_in_packet", path)
    case(g, "credential-as-symlink", "a symlink named like a credential file",
         packet([W, d("workspace/.aws"), s("workspace/.aws/credentials", "../x")]), "credential_in_packet",
         "workspace/.aws/credentials")
    for cid, path in [("credential-git-credentials", "workspace/sub/.git-credentials"),
                      ("credential-aws-file", "workspace/.aws/credentials")]:
        parts = path.split("/")
        ms = [W] + [d("/".join(parts[: i + 1])) for i in range(1, len(parts) - 1)] + [f(path, b"secret")]
        case(g, cid, "a credential file %s" % path, packet(ms), "credential_in_packet", path)
    tid = "0199a213-81c0-7800-8aa1-bbab2a035a53"
    short_rollout = "harness/codex/sessions/rollout-%s.jsonl" % tid
    case(g, "credential-codex-home-auth", "Codex's login file under the harness root",
         packet([d("harness"), d("harness/codex"), f("harness/codex/auth.json", b"{}"), d("harness/codex/sessions"),
                 f(short_rollout, b"{}\n"), W], harness={"kind": "codex", "rollout": short_rollout, "thread_id": tid}),
         "credential_in_packet", "harness/codex/auth.json")
    rollout = "harness/codex/sessions/2026/11/30/rollout-2026-11-30T01-02-03-%s.jsonl" % tid
    hm = [d("harness"), d("harness/codex"), d("harness/codex/sessions"), d("harness/codex/sessions/2026"),
          d("harness/codex/sessions/2026/11"), d("harness/codex/sessions/2026/11/30"), f(rollout, b"{}\n"), W]
    refuse_built(g, "harness-without-descriptor", "harness members with no harness descriptor", hm,
                 "harness_invalid", "harness")
    refuse_built(g, "harness-rollout-missing", "a descriptor naming a rollout that is not a member",
                 [W], "harness_invalid", "packet.json",
                 harness={"kind": "codex", "rollout": rollout, "thread_id": tid})
    case(g, "harness-thread-uppercase", "a thread id in upper case",
         packet(hm, harness={"kind": "codex", "rollout": rollout, "thread_id": tid.upper()}), "harness_invalid",
         "packet.json")
    for cid, descriptor, what in [
        ("harness-thread-mismatch", {"kind": "codex", "rollout": rollout,
                                     "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a54"},
         "a thread id other than the rollout's"),
        ("harness-kind-mismatch", {"kind": "claude", "rollout": rollout, "thread_id": tid},
         "a Claude descriptor naming a Codex rollout"),
        ("harness-rollout-directory", {"kind": "codex", "rollout": "harness/codex/sessions", "thread_id": tid},
         "a rollout that is a directory"),
    ]:
        case(g, cid, what, packet(hm, harness=descriptor), "harness_invalid", "packet.json")
    sid = "ses_2314688f0001G4IopLkkKDjexN"
    export = "harness/opencode/%s.json" % sid
    om = [d("harness"), d("harness/opencode"), f(export, b'{"info":{},"messages":[]}\n'), W]
    for cid, descriptor, what in [
        ("harness-opencode-uuid-id", {"kind": "opencode", "rollout": export,
                                      "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"},
         "an OpenCode descriptor whose session id is a UUID"),
        ("harness-opencode-id-charset", {"kind": "opencode", "rollout": export, "thread_id": "ses_a-b"},
         "an OpenCode session id with a character other than a letter or digit"),
        ("harness-opencode-empty-version", {"kind": "opencode", "rollout": export, "thread_id": sid,
                                            "version": ""}, "an empty exporter version"),
    ]:
        case(g, cid, what, packet(om, harness=descriptor), "harness_invalid", "packet.json")
    case(g, "harness-codex-opencode-id", "a Codex descriptor whose thread id is an OpenCode session id",
         packet(in_order([d("harness"), d("harness/codex"), f("harness/codex/%s.jsonl" % sid, b"{}\n"), W]),
                harness={"kind": "codex", "rollout": "harness/codex/%s.jsonl" % sid, "thread_id": sid}),
         "harness_invalid", "packet.json")
    case(g, "harness-member-of-other-kind", "a Claude member in a packet whose descriptor is Codex",
         packet(in_order(hm + [d("harness/claude"), f("harness/claude/x.jsonl", b"{}\n")]),
                harness={"kind": "codex", "rollout": rollout, "thread_id": tid}), "harness_invalid",
         "harness/claude")
    case(g, "exclusions-unsorted", "exclusions out of order",
         packet([W], exclusions=[{"matched": 1, "pattern": "z", "rule": "user"},
                                 {"matched": 1, "pattern": "a", "rule": "user"}]), "manifest_invalid")


# ------------------------------------------------------------------ secrets
#
# Credentials in the formats their issuers document, made up here from a
# seeded generator (none is a live credential), and the findings a reader
# must report for them: rule and line, never the value.

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
URL_SAFE = ALNUM + "_-"
B64 = ALNUM + "+/"
BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def chars(seed, n, alphabet):
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


def checksummed(prefix, seed):
    """GitHub's token format (npm's too): 30 characters and their CRC32 in 6
    base62 digits."""
    body = chars(seed, 30, ALNUM)
    crc, digits = zlib.crc32(body.encode()), ""
    for _ in range(6):
        crc, r = divmod(crc, 62)
        digits = BASE62[r] + digits
    return prefix + body + digits


def pem(kind, head, body_len, seed):
    body = head + chars(seed, body_len - len(head), B64)
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN %s-----\n%s\n-----END %s-----\n" % (kind, "\n".join(lines), kind)


def secret(path, line, rule):
    return {"line": line, "path": path, "rule": rule}


def git_finding(path, line, setting, why):
    return {"line": line, "path": path, "setting": setting, "why": why}


FSMONITOR_WHY = "runs this program at every git status and at most other commands"
FILTER_WHY = "runs this program on files at checkout, add and status"
HOOK_WHY = "git runs this executable hook at the operation it is named for"


def secret_cases():
    """Accepted packets holding secrets, active git settings and hooks: the
    format carries them, every reader reports them (docs/session-packet.md
    §7.4)."""
    g = "findings"
    gh = checksummed("ghp_", 101)
    settings = '{\n  "github": {"token": "%s"},\n  "slack": "xoxb-2718281828-3141592653-%s"\n}\n' % (
        gh, chars(102, 24, ALNUM))
    accept(g, "finding-tokens-in-settings", "a GitHub token (checksummed) and a Slack bot token in a settings file",
           [W, d("workspace/config"), f("workspace/config/settings.json", settings.encode())],
           findings={"secrets": [secret("workspace/config/settings.json", 2, "github-token"),
                                 secret("workspace/config/settings.json", 3, "slack-token")]})
    deploy = "#!/bin/sh\nexport AWS_ACCESS_KEY_ID=AKIA%s\nexport AWS_SECRET_ACCESS_KEY=%s\n" % (
        chars(103, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"), chars(104, 40, B64))
    accept(g, "finding-aws-key-pair", "an AWS access key id with its secret in a deploy script",
           [W, f("workspace/deploy.sh", deploy.encode(), exe=True)],
           findings={"secrets": [secret("workspace/deploy.sh", 2, "aws-access-key")]})
    accept(g, "finding-ssh-key-by-content", "an OpenSSH private key under a name no credential rule knows",
           [W, f("workspace/deploy_key",
                 pem("OPENSSH PRIVATE KEY", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", 400, 105).encode())],
           findings={"secrets": [secret("workspace/deploy_key", 1, "private-key")]})
    sa = ('{\n  "type": "service_account",\n  "private_key": "%s"\n}\n'
          % pem("PRIVATE KEY", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", 1624, 106).replace("\n", "\\n"))
    accept(g, "finding-gcp-service-account", "a Google Cloud service account key file",
           [W, f("workspace/sa.json", sa.encode())],
           findings={"secrets": [secret("workspace/sa.json", 3, "gcp-service-account")]})
    ghs = checksummed("ghs_", 107)
    config = ("[core]\n\trepositoryformatversion = 0\n[remote \"origin\"]\n"
              "\turl = https://x-access-token:%s@github.com/acme/app.git\n"
              "[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic %s\n"
              % (ghs, chars(108, 60, B64)))
    accept(g, "finding-git-config-credentials", "a token in a remote URL and an extraheader, as CI checkouts write them",
           [W, d("workspace/.git"), f("workspace/.git/config", config.encode())],
           findings={"secrets": [secret("workspace/.git/config", 4, "git-url-credentials"),
                                 secret("workspace/.git/config", 4, "github-token"),
                                 secret("workspace/.git/config", 6, "git-extraheader-credentials")]})
    tokens = ("OPENAI_API_KEY=sk-proj-%sT3BlbkFJ%s\nANTHROPIC_API_KEY=sk-ant-api03-%sAA\n"
              "STRIPE_KEY=sk_live_%s\nHF_TOKEN=hf_%s\nMAPS_KEY=AIza%s\nNPM_TOKEN=%s\nGITLAB=glpat-%s\n"
              % (chars(109, 74, URL_SAFE), chars(110, 74, URL_SAFE), chars(111, 93, URL_SAFE), chars(112, 24, ALNUM),
                 chars(113, 34, ALNUM[:52]), chars(114, 35, URL_SAFE), checksummed("npm_", 115),
                 chars(116, 20, URL_SAFE)))
    accept(g, "finding-provider-keys", "OpenAI, Anthropic, Stripe, Hugging Face, Google, npm and GitLab keys",
           [W, f("workspace/settings.conf", tokens.encode())],
           findings={"secrets": [secret("workspace/settings.conf", 1, "openai-api-key"),
                                 secret("workspace/settings.conf", 2, "anthropic-api-key"),
                                 secret("workspace/settings.conf", 3, "stripe-key"),
                                 secret("workspace/settings.conf", 4, "huggingface-token"),
                                 secret("workspace/settings.conf", 5, "google-api-key"),
                                 secret("workspace/settings.conf", 6, "npm-token"),
                                 secret("workspace/settings.conf", 7, "gitlab-token")]})
    # A body that spans blocks: the token sits across the boundary of the
    # reader's chunks in the consumers that feed 511- and 512-byte chunks.
    far = ("x" * 500 + "\n") * 3 + "TOKEN=" + checksummed("gho_", 117) + "\n"
    accept(g, "finding-token-across-blocks", "a token 1.5 KiB into a file, across 512-byte block boundaries",
           [W, f("workspace/far.txt", far.encode())],
           findings={"secrets": [secret("workspace/far.txt", 4, "github-token")]})
    accept(g, "finding-reported-names", "files that reported credential rules name (.env, .yarnrc.yml); "
           "a template (.env.example) is not one",
           [W, f("workspace/.env", b"DEBUG=1\n"), f("workspace/.env.example", b"API_KEY=\n"),
            f("workspace/.yarnrc.yml", b"nodeLinker: pnp\n")],
           findings={"secrets": [secret("workspace/.env", None, "env-file"),
                                 secret("workspace/.yarnrc.yml", None, "yarnrc")]})
    active = ("[core]\n\tbare = false\n\tfsmonitor = .git/fsmonitor-watchman\n"
              "[filter \"lfs\"]\n\tsmudge = git-lfs smudge -- %f\n\trequired = true\n")
    accept(g, "finding-git-active-config", "a repository configuration that makes git run programs",
           [W, d("workspace/.git"), f("workspace/.git/config", active.encode()), d("workspace/.git/hooks"),
            f("workspace/.git/hooks/post-checkout", b"#!/bin/sh\necho run\n", exe=True),
            f("workspace/.git/hooks/pre-commit", b"#!/bin/sh\n"),
            f("workspace/.git/hooks/pre-push.sample", b"#!/bin/sh\n", exe=True)],
           findings={"git": [git_finding("workspace/.git/config", 3, "core.fsmonitor", FSMONITOR_WHY),
                             git_finding("workspace/.git/config", 5, "filter.lfs.smudge", FILTER_WHY),
                             git_finding("workspace/.git/hooks/post-checkout", None, "hook", HOOK_WHY)]})
    tid = "0199a213-81c0-7800-8aa1-bbab2a035a53"
    rollout = "harness/codex/sessions/2026/11/30/rollout-2026-11-30T01-02-03-%s.jsonl" % tid
    log = '{"type":"session_meta"}\n{"type":"function_call_output","output":"GH_TOKEN=%s"}\n' % checksummed("ghp_", 118)
    accept(g, "finding-secret-in-session-log", "a token the agent printed, in the session log",
           [d("harness"), d("harness/codex"), d("harness/codex/sessions"), d("harness/codex/sessions/2026"),
            d("harness/codex/sessions/2026/11"), d("harness/codex/sessions/2026/11/30"), f(rollout, log.encode()), W],
           harness={"kind": "codex", "rollout": rollout, "thread_id": tid},
           findings={"secrets": [secret(rollout, 2, "github-token")]})
    near = ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA...\n-----END RSA PRIVATE KEY-----\n"
            "token = ghp_abcdefghijklmnopqrstuvwxyzABCD012345\nstripe.api_key = 'sk_test_123'\n"
            "see https://user:secret@example.com/repo.git\n")
    accept(g, "finding-none-in-documentation-examples", "documentation's example keys, elided key blocks and "
           "checksum-less look-alikes: nothing to report",
           [W, f("workspace/README.md", near.encode())])


def cross_platform_cases():
    g = "cross-platform"
    for cid, a, b, what in [
        ("collision-case", "workspace/README", "workspace/readme", "README and readme"),
        ("collision-kelvin", "workspace/k", "workspace/\u212a", "k and the Kelvin sign"),
        ("collision-nfc-nfd", "workspace/caf\u00e9", "workspace/cafe\u0301", "NFC and NFD spellings of caf\u00e9"),
        ("collision-hfs-ignorable", "workspace/ab", "workspace/a\u200db", "a zero-width joiner HFS+ ignores"),
        ("collision-bom", "workspace/x", "workspace/\ufeffx", "a byte order mark HFS+ ignores"),
        ("collision-git", "workspace/.git", "workspace/.GIT", ".git and .GIT"),
        ("collision-git-ignorable", "workspace/.git", "workspace/.gi\u200ct", ".git and .gi<ZWNJ>t"),
        ("collision-greek-sigma", "workspace/\u03a3", "workspace/\u03c3", "capital and small sigma"),
    ]:
        ms = in_order([W, f(a, b"one"), f(b, b"two")])
        refuse_built(g, cid, "%s collide on APFS" % what, ms, "path_collision")
    case(g, "collision-dir-and-file", "a directory Dir and a file dir",
         packet([W, d("workspace/Dir"), f("workspace/Dir/a", b"a"), f("workspace/dir", b"b")]), "path_collision")
    case(g, "collision-symlink-alias", "a symlink L and a directory l with a file: on APFS the file lands "
         "through the symlink", packet([W, s("workspace/L", ".."), d("workspace/l"), f("workspace/l/x", b"x")]),
         "symlink_escapes")
    case(g, "collision-symlink-alias-inside", "a symlink L to a subdirectory and a directory l with a file",
         packet([W, s("workspace/L", "t"), d("workspace/l"), f("workspace/l/x", b"x"), d("workspace/t")]),
         "path_collision")
    for cid, names, what in [
        ("accept-windows-reserved", ["CON", "aux.c", "nul.txt", "COM1", "LPT9.log"], "Windows reserved names"),
        ("accept-trailing-dot-space", ["a.", "b ", "c. .", " d"], "trailing dots and spaces"),
        ("accept-windows-punctuation", ["a:b", "c\\d", "e*f?g", "h<i>j|k\"l"], "':', '\\' and other characters"
                                                                              " Windows forbids"),
        ("accept-git-lookalikes", [".GIT", ".git ", "git~1", ".gitmodules", ".git."], ".git look-alikes"),
        ("accept-unicode-distinct", ["\u0130", "i", "\uff21", "\u00df", "ss", "\u0131"],
         "names that differ under default lowercase and NFD"),
        ("accept-nfd-only", ["cafe\u0301", "\u1100\u1161"], "NFD names with no NFC twin"),
        ("accept-backslash-dotdot", ["..\\..\\evil", "..\\x"], "backslash '..' sequences (ordinary bytes on POSIX)"),
    ]:
        ms = in_order([W] + [f("workspace/" + n, n.encode() + b"\n") for n in names])
        case(g, cid, "accepted: " + what, packet(ms))


def generate():
    CASES.clear()
    tar_cases()
    path_cases()
    link_cases()
    special_cases()
    metadata_cases()
    limit_cases()
    v1_cases()
    manifest_cases()
    cross_platform_cases()
    secret_cases()
    accept("accept", "accept-minimal", "the smallest packet: an empty workspace", [W])
    accept("accept", "accept-base", "a small workspace", BASE)
    accept("accept", "accept-long-paths", "paths split into prefix/name and carried by PAX, a long link target",
           [W, d("workspace/" + "p" * 120), f("workspace/" + "p" * 120 + "/" + "q" * 90, b"prefix split\n"),
            f("workspace/" + "p" * 120 + "/" + "r" * 150, b"pax path\n"),
            s("workspace/" + "p" * 120 + "/s", "../" + "p" * 120 + "/" + "r" * 150)])
    accept("accept", "accept-block-sizes", "bodies of 0, 1, 511, 512, 513 and 4096 bytes",
           [W] + [f("workspace/b%04d" % n, bytes((i * 7 + n) % 256 for i in range(n))) for n in
                  (0, 1, 511, 512, 513, 4096)])
    accept("accept", "accept-staging-lookalike", "top-level names like the unpacker's staging folder",
           [W, d("workspace/.pillbox-unpack-000000"), f("workspace/.pillbox-unpack-000000/x", b"x\n"),
            f("workspace/.pillbox-unpack-zzzzzz", b"file\n")])
    accept("accept", "accept-harness", "a Codex harness section",
           [d("harness"), d("harness/codex"), d("harness/codex/sessions"), d("harness/codex/sessions/2026"),
            d("harness/codex/sessions/2026/11"), d("harness/codex/sessions/2026/11/30"),
            f("harness/codex/sessions/2026/11/30/rollout-2026-11-30T01-02-03-"
              "0199a213-81c0-7800-8aa1-bbab2a035a53.jsonl", b'{"type":"session_meta"}\n'),
            W, f("workspace/a.txt", b"a\n")],
           harness={"kind": "codex", "model": "gpt-5.1-codex",
                    "rollout": "harness/codex/sessions/2026/11/30/rollout-2026-11-30T01-02-03-"
                               "0199a213-81c0-7800-8aa1-bbab2a035a53.jsonl",
                    "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"})
    accept("accept", "accept-harness-opencode", "an OpenCode export with its provider and exporter version",
           [d("harness"), d("harness/opencode"),
            f("harness/opencode/ses_2314688f0001G4IopLkkKDjexN.json", b'{"info":{},"messages":[]}\n'),
            W, f("workspace/a.txt", b"a\n")],
           harness={"kind": "opencode", "model": "claude-sonnet-4-5", "provider": "anthropic",
                    "rollout": "harness/opencode/ses_2314688f0001G4IopLkkKDjexN.json",
                    "thread_id": "ses_2314688f0001G4IopLkkKDjexN", "version": "1.18.33"})
    return CASES


def render(cases):
    """The files to write: {relative path: bytes}."""
    files = {}
    table = []
    rust = ["// Generated by tests/adversarial/generate.py: do not edit.",
            "// The packet bytes of every case in cases.json, in the same order.",
            "pub const PACKETS: &[&[u8]] = &["]
    for c in cases:
        data = c["bytes"]
        name = c["id"] + ".packet"
        stored = data
        if len(data) > GZIP_OVER:
            name += ".gz"
            buf = io.BytesIO()
            with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
                gz.write(data)
            stored = buf.getvalue()
        files["packets/" + name] = stored
        row = {k: c[k] for k in ("id", "group", "description", "expect")}
        row["file"] = "packets/" + name
        row["size"] = len(data)
        row["sha256"] = sha(data)
        row["digest"] = c["digest"]
        if "expected_digest" in c:
            row["expected_digest"] = c["expected_digest"]
        if "build" in c:
            row["build"] = c["build"]
        table.append(row)
        rust.append('    include_bytes!("packets/%s"),' % name)
    rust.append("];")
    files["cases.json"] = (json.dumps({"cases": table}, indent=1, ensure_ascii=False) + "\n").encode()
    files["corpus.rs"] = ("\n".join(rust) + "\n").encode()
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the checked-in files instead of writing")
    args = ap.parse_args()
    cases = generate()
    files = render(cases)
    if args.check:
        bad = []
        for rel, data in files.items():
            path = os.path.join(HERE, rel)
            if not os.path.exists(path):
                bad.append(rel)
                continue
            have = open(path, "rb").read()
            if rel.endswith(".gz"):
                # Compressed bytes depend on the zlib build: compare contents.
                have, data = gzip.decompress(have), gzip.decompress(data)
            if have != data:
                bad.append(rel)
        listed = set(files)
        for name in os.listdir(os.path.join(HERE, "packets")):
            if "packets/" + name not in listed:
                bad.append("packets/" + name + " (not generated)")
        if bad:
            print("the corpus differs from what generate.py produces:", *bad, sep="\n  ", file=sys.stderr)
            sys.exit(1)
        print("corpus up to date: %d cases" % len(cases))
        return
    os.makedirs(os.path.join(HERE, "packets"), exist_ok=True)
    for name in os.listdir(os.path.join(HERE, "packets")):
        if "packets/" + name not in files:
            os.remove(os.path.join(HERE, "packets", name))
    for rel, data in files.items():
        with open(os.path.join(HERE, rel), "wb") as out:
            out.write(data)
    groups = {}
    for c in cases:
        groups[c["group"]] = groups.get(c["group"], 0) + 1
    print("%d cases: %s" % (len(cases), ", ".join("%s %d" % kv for kv in groups.items())))


if __name__ == "__main__":
    main()
