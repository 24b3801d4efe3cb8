#!/usr/bin/env python3
"""Deterministic benchmark workspaces with incompressible content.

Every file's bytes come from a PRNG seeded by the workspace name and the
file's path, so a workspace is the same on every machine and every run.

    genws.py large DIR        ~1 GB in 2,000 files (4 x 100 MiB, 540 x 1 MiB, 1,456 x 4 KiB), nested
    genws.py small DIR        100,000 files of 0-8 KiB (mean ~2 KiB) in ~5,000 dirs, a few symlinks
    genws.py members-N DIR    a packet of N members, root included (files of 1 KiB, 20 per directory)
    genws.py bytes-N DIR      N bytes in files of 1 MiB (the last one shorter)
    genws.py tiny DIR         a handful of files, for smoke runs
"""
import hashlib
import os
import random
import sys

MIB = 1 << 20


def content(name, path, size):
    seed = int.from_bytes(hashlib.sha256(f"{name}:{path}".encode()).digest()[:8], "little")
    return random.Random(seed).randbytes(size)


def write(root, name, rel, size, exec_bit=False):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        # Large files in 8 MiB pieces: bounded memory.
        left, part = size, 0
        while left > 0:
            n = min(left, 8 * MIB)
            f.write(content(name, f"{rel}#{part}", n))
            left -= n
            part += 1
    if exec_bit:
        os.chmod(p, 0o755)


def large(root):
    for i in range(4):
        write(root, "large", f"data/blobs/blob{i}.bin", 100 * MIB)
    for i in range(540):
        write(root, "large", f"data/chunks/c{i // 60:02d}/chunk{i:04d}.bin", MIB)
    for i in range(1456):
        write(root, "large", f"src/m{i // 100:02d}/s{(i // 10) % 10}/file{i:05d}.dat", 4096, exec_bit=(i % 17 == 0))


def small(root):
    rng = random.Random(7)
    dirs = [f"node_modules/pkg{d // 50:03d}/lib{d % 50:02d}" for d in range(5000)]
    for i in range(100_000):
        d = dirs[i % len(dirs)]
        size = min(int(rng.expovariate(1 / 2048)), 8192)
        write(root, "small", f"{d}/f{i:06d}.js", size, exec_bit=(i % 97 == 0))
    os.makedirs(os.path.join(root, "node_modules/.bin"), exist_ok=True)
    for i in range(20):
        os.symlink(f"../pkg{i:03d}/lib00/f{i:06d}.js", os.path.join(root, f"node_modules/.bin/tool{i}"))


def members(root, n):
    # Every member of the packet counts: directories too, and the
    # workspace root itself (so members-250000 is the format's limit).
    made, d = 1, 0
    while made < n:
        made += 1  # the directory
        for j in range(20):
            if made >= n:
                break
            write(root, f"members-{n}", f"d{d:06d}/f{j:02d}.txt", 1024)
            made += 1
        d += 1


def bytes_ws(root, n):
    i, left = 0, n
    while left > 0:
        size = min(left, MIB)
        write(root, f"bytes-{n}", f"b{i // 100:03d}/part{i:05d}.bin", size)
        left -= size
        i += 1


def tiny(root):
    write(root, "tiny", "README.md", 100)
    write(root, "tiny", "src/main.rs", 3000)
    write(root, "tiny", "bin/run", 64, exec_bit=True)
    write(root, "tiny", "data/blob.bin", 300_000)
    os.symlink("bin/run", os.path.join(root, "run"))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    kind, root = sys.argv[1], sys.argv[2]
    if os.path.exists(root) and os.listdir(root):
        sys.exit(f"{root} exists and is not empty")
    os.makedirs(root, exist_ok=True)
    if kind == "large":
        large(root)
    elif kind == "small":
        small(root)
    elif kind == "tiny":
        tiny(root)
    elif kind.startswith("members-"):
        members(root, int(kind.split("-", 1)[1]))
    elif kind.startswith("bytes-"):
        bytes_ws(root, int(kind.split("-", 1)[1]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
