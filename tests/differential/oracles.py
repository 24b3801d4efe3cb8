#!/usr/bin/env python3
"""Independent readers of a tar file, for differential tests.

    python3 tests/differential/oracles.py PACKET OUTDIR

Lists PACKET with GNU tar (`tar -tv`) and with Python's tarfile, and
extracts it with both: GNU tar into OUTDIR/gnu, tarfile with the 'data'
extraction filter (Python 3.11.4+) into OUTDIR/python. Prints one JSON
object: {"gnu": [member...], "python": [member...]} where a member is
{"path", "type" (file|dir|symlink|other), "mode" (permission bits, octal
string), "size", "target", "sha256" (files; tarfile only: GNU tar's
contents are compared through its extraction)}. A reader that fails
reports {"error": "..."} in place of its list.

Python 3.11 standard library and GNU tar only.
"""

import hashlib
import json
import re
import os
import subprocess
import sys
import tarfile


LINE = re.compile(r"^(\S+) (\S+) +(\d+) (\S+) (\S+) (.*)$", re.S)


def gnu(packet, out):
    os.makedirs(out)
    listing = subprocess.run(
        ["tar", "--quoting-style=literal", "--numeric-owner", "-tvf", packet],
        capture_output=True, text=True, encoding="utf-8", errors="surrogateescape")
    if listing.returncode != 0:
        return {"error": listing.stderr.strip()}
    members = []
    for line in listing.stdout.split("\n"):
        if not line:
            continue
        # "<perms> <uid>/<gid> <padded size> <date> <time> <path>[ -> <target>]"
        perms, _owner, size, _date, _time, rest = LINE.match(line).groups()
        kind = {"-": "file", "d": "dir", "l": "symlink"}.get(perms[0], "other")
        target = None
        if kind == "symlink":
            rest, target = rest.split(" -> ", 1)
        members.append({"path": rest.rstrip("/") if kind == "dir" else rest, "type": kind,
                        "mode": "%04o" % mode_bits(perms), "size": int(size), "target": target})
    extract = subprocess.run(["tar", "-xf", packet, "-C", out, "--no-same-owner"],
                             capture_output=True, text=True)
    if extract.returncode != 0:
        return {"error": extract.stderr.strip()}
    return members


def mode_bits(perms):
    bits = 0
    for i, ch in enumerate(perms[1:10]):
        if ch != "-":
            bits |= 1 << (8 - i)
    return bits


def python(packet, out):
    members = []
    try:
        with tarfile.open(packet, "r:") as t:
            for m in t.getmembers():
                kind = "file" if m.isreg() else "dir" if m.isdir() else "symlink" if m.issym() else "other"
                entry = {"path": m.name.rstrip("/"), "type": kind, "mode": "%04o" % (m.mode & 0o7777),
                         "size": m.size, "target": m.linkname if m.issym() else None}
                if m.isreg():
                    entry["sha256"] = hashlib.sha256(t.extractfile(m).read()).hexdigest()
                members.append(entry)
            t.extractall(out, filter="data")
    except Exception as e:  # any refusal is reported, not raised
        return {"error": "%s: %s" % (type(e).__name__, e)}
    return members


def main():
    packet, out = sys.argv[1], sys.argv[2]
    result = {"gnu": gnu(packet, os.path.join(out, "gnu")),
              "python": python(packet, os.path.join(out, "python"))}
    json.dump(result, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
