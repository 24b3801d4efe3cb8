#!/usr/bin/env python3
"""The benchmark suite: pack, unpack and verify against GNU tar, Python's
tarfile, the tar crate and raw SHA-256, measured in one run on one machine.

Every figure that is compared is a ratio against a baseline measured in the
same run, with the runs of the commands being compared interleaved (A B C A
B C ...) so that a noisy neighbour hurts every command alike. Absolute
times are shown, never used as targets.

    bench/run.py [--smoke] [--reps N] [--data DIR] [--out docs/benchmarks.md]
                 [--skip-scaling] [--skip-wasm-node] [--skip-browser] [--skip-worker]
                 [--only-edge]

Besides the native commands, the suite measures packet-core compiled to
wasm where it runs outside the CLI:
- the wasm reader under node against the same sha2 crate in wasm hashing
  the same bytes (bench/wasm_reader.mjs; --skip-wasm-node);
- the inspector page verifying a 100 MB packet in headless Chromium
  (inspector/tests/measure.mjs; --skip-browser);
- the local Worker verifying a ~1 GiB packet uploaded in parts
  (scripts/worker-1gib.sh; --skip-worker).
--only-edge runs only these three and writes docs/ only when --out is given.

--smoke: a tiny workspace, one repetition, no targets, no files written to
docs/ (CI runs it so the suite cannot rot); of the wasm parts, only the
wasm reader under node, on an 8 MB packet.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
PILLBOX = os.path.join(TARGET, "release", "pillbox")
BASELINES = os.path.join(TARGET, "release", "bench-baselines")
# packet-inspector-wasm (wasm32-unknown-unknown, release) bound with
# `wasm-bindgen --target nodejs`, and its fixture generator (bench/run.sh
# builds both).
WASM_NODE_PKG = os.path.join(TARGET, "bench-wasm-node")
FIXTURES = os.path.join(TARGET, "release", "examples", "fixtures")
GNU_TAR_CREATE = ["tar", "--sort=name", "--mtime=@0", "--owner=0", "--group=0", "--numeric-owner"]
# GNU tar run by root also restores owners (a chown per member) and exact
# modes; pillbox does neither. Compare with `tar -xf` as any other user
# runs it: owner = the caller, modes filtered by the umask, mtimes restored.
GNU_TAR_EXTRACT = ["tar", "--no-same-owner", "--no-same-permissions"] if os.geteuid() == 0 else ["tar"]

PY_TAR_PACK = r"""
import os, sys, tarfile
src, out = sys.argv[1], sys.argv[2]
def norm(ti):
    ti.mtime = 0; ti.uid = ti.gid = 0; ti.uname = ti.gname = ""
    return ti
with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as t:
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        rel = os.path.relpath(dirpath, src)
        names = sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))])
        if rel != ".":
            t.add(dirpath, arcname=rel, recursive=False, filter=norm)
        for n in names:
            p = os.path.join(dirpath, n)
            t.add(p, arcname=os.path.normpath(os.path.join(rel, n)), recursive=False, filter=norm)
"""
PY_TAR_UNPACK = r"""
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    t.extractall(sys.argv[2], filter="data")
"""


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run(cmd, cwd=None):
    """Runs one command; returns (wall seconds, CPU seconds user+sys of it and its children)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            raise SystemExit(f"benchmark command failed ({p.returncode}): {' '.join(cmd)}\n{err.read().decode(errors='replace')}")
    return dt, usage.ru_utime + usage.ru_stime


def peak_rss_mib(cmd):
    """Peak RSS of one run, from GNU time's %M (KiB)."""
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise SystemExit(f"benchmark command failed: {' '.join(cmd)}\n{p.stderr.decode(errors='replace')}")
    return int(p.stderr.decode().strip().splitlines()[-1]) / 1024


def on_tmpfs(path):
    """Whether `path` lives on a tmpfs (the longest mount point that holds it)."""
    path, best, fstype = os.path.realpath(path), "", ""
    try:
        with open("/proc/mounts") as f:
            for line in f:
                _, mnt, fs = line.split()[:3]
                mnt = mnt.replace("\\040", " ")
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    best, fstype = mnt, fs
    except OSError:
        return False
    return fstype == "tmpfs"


class Scratch:
    """Fresh output paths (never reused) on the benchmark file system, the
    same one that holds the inputs. On a tmpfs they are removed after each
    run, outside the timed region; on a disk file system only at the end of
    a series, because creating files right after a mass delete is slow there
    (it would penalise whichever command runs next)."""

    def __init__(self, base):
        self.base = base
        self.n = 0
        self.tmpfs = on_tmpfs(base)

    def after_run(self):
        if self.tmpfs:
            self.clear()

    def path(self, name):
        self.n += 1
        return os.path.join(self.base, f"{self.n:05d}-{name}")

    def clear(self):
        for e in os.listdir(self.base):
            p = os.path.join(self.base, e)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.unlink(p)


def interleaved(commands, inputs, reps, scratch, warmup=True):
    """commands: {name: factory()} where factory returns the command line
    (making any fresh output directory it needs, untimed). Reads `inputs`
    and runs every command once right before the series, to warm the page
    cache, then `reps` rounds in interleaved order (A B C A B C ...).
    Returns {name: [(wall seconds, CPU seconds)...]}."""
    for path in inputs:
        warm(path)
    times = {k: [] for k in commands}
    rounds = reps + (1 if warmup else 0)
    for r in range(rounds):
        for name, factory in commands.items():
            cmd = factory()
            dt = run(cmd)
            if r > 0 or not warmup:
                times[name].append(dt)
            scratch.after_run()
    scratch.clear()
    return times


def warm(path):
    """Reads every file under `path` (or `path` itself) once."""
    files = [path] if os.path.isfile(path) else [
        os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
    for f in files:
        if os.path.islink(f):
            continue
        with open(f, "rb") as fh:
            while fh.read(1 << 20):
                pass


def summary(ts):
    walls = [w for w, _ in ts]
    cpus = [c for _, c in ts]
    return {"min": min(walls), "median": statistics.median(walls), "n": len(ts),
            "cpu_min": min(cpus), "cpu_median": statistics.median(cpus)}


def pillbox_digest(packet):
    out = subprocess.run([PILLBOX, "checkpoint", "verify", packet, "--quiet"], capture_output=True, check=True)
    return json.loads(out.stdout)["digest"]


def bench_workspace(label, ws, reps, scratch, data):
    """Pack, unpack and verify one workspace with every tool."""
    res = {"label": label}
    packet = os.path.join(data, f"{label}.packet")
    if os.path.exists(packet):
        os.unlink(packet)
    run([PILLBOX, "checkpoint", "pack", ws, "-o", packet, "--quiet"])
    digest = pillbox_digest(packet)
    gnu_tar = os.path.join(data, f"{label}.tar")
    run(GNU_TAR_CREATE + ["-cf", gnu_tar, "-C", ws, "."])
    size = os.path.getsize(packet)
    res["packet_bytes"] = size
    res["files"] = sum(len(f) for _, _, f in os.walk(ws))

    def script_cmd():
        out = scratch.path("script.tar")
        sh = (
            f"{' '.join(GNU_TAR_CREATE)} -cf - -C '{ws}' . | tee '{out}' | sha256sum > '{out}.sha256' && "
            f"cd '{ws}' && find . -type f -exec sha256sum {{}} + > '{out}.manifest'"
        )
        return ["sh", "-c", sh]

    pack = {
        "pillbox pack": lambda: [PILLBOX, "checkpoint", "pack", ws, "-o", scratch.path("p.packet"), "--quiet"],
        "GNU tar -c": lambda: GNU_TAR_CREATE + ["-cf", scratch.path("t.tar"), "-C", ws, "."],
        "tar + sha256sum + manifest script": script_cmd,
        "tar crate Builder": lambda: [BASELINES, "tar-pack", ws, scratch.path("r.tar")],
        "Python tarfile": lambda: [sys.executable, "-c", PY_TAR_PACK, ws, scratch.path("py.tar")],
    }
    log(f"  pack ({label})")
    res["pack"] = {k: summary(v) for k, v in interleaved(pack, [ws], reps, scratch).items()}

    unpack = {
        "pillbox unpack": lambda: [PILLBOX, "checkpoint", "unpack", packet, "--digest", digest,
                                   "--into", scratch.path("pu"), "--quiet"],
        "GNU tar -x": lambda: (lambda d: (os.makedirs(d), GNU_TAR_EXTRACT + ["-xf", gnu_tar, "-C", d])[1])(scratch.path("tu")),
        "tar crate unpack": lambda: [BASELINES, "tar-unpack", gnu_tar, scratch.path("ru")],
        "Python tarfile (filter='data')": lambda: [sys.executable, "-c", PY_TAR_UNPACK, gnu_tar, scratch.path("yu")],
    }
    log(f"  unpack ({label})")
    res["unpack"] = {k: summary(v) for k, v in interleaved(unpack, [packet, gnu_tar], reps, scratch).items()}

    verify = {
        "pillbox verify": lambda: [PILLBOX, "checkpoint", "verify", packet, "--digest", digest, "--quiet"],
        "raw SHA-256 (one pass)": lambda: [BASELINES, "sha256", packet],
        "SHA-256 from memory (one pass, no reads)": lambda: [BASELINES, "sha256-mem", packet],
        "copy (one pass: read and write, no hashing)": lambda: [BASELINES, "copy", packet, scratch.path("copy")],
        "sha256sum": lambda: ["sha256sum", packet],
    }
    log(f"  verify ({label})")
    res["verify"] = {k: summary(v) for k, v in interleaved(verify, [packet], reps, scratch).items()}

    log(f"  peak RSS ({label})")
    res["rss_mib"] = {
        "pack": peak_rss_mib([PILLBOX, "checkpoint", "pack", ws, "-o", scratch.path("rss.packet"), "--quiet"]),
        "unpack": peak_rss_mib([PILLBOX, "checkpoint", "unpack", packet, "--digest", digest,
                                "--into", scratch.path("rssu"), "--quiet"]),
        "verify": peak_rss_mib([PILLBOX, "checkpoint", "verify", packet, "--digest", digest, "--quiet"]),
        "GNU tar -c": peak_rss_mib(GNU_TAR_CREATE + ["-cf", scratch.path("rss.tar"), "-C", ws, "."]),
    }
    scratch.clear()
    return res


def ratio(res, op, a, b, stat="min"):
    return res[op][a][stat] / res[op][b][stat]


def pack_floor(res):
    """Seconds a packer needs at least, if it reads each file once (a file
    read twice could change between its digest and its copy) and keeps to
    the memory target (so it cannot hold the data until the end). The
    packet digest covers packet.json first, which lists every member
    digest, so it can only start once every byte has been read, hashed and
    written: a copy of the packet's bytes (no per-file work counted) plus a
    SHA-256 pass, spread over every core. Then comes the packet digest on
    one core: a SHA-256 pass from memory (reading the packet back can run
    on another core). CPU times of the copy, all measured in the same run."""
    copy = res["verify"]["copy (one pass: read and write, no hashing)"]["cpu_min"]
    hash_only = res["verify"]["SHA-256 from memory (one pass, no reads)"]["min"]
    return (copy + hash_only) / (os.cpu_count() or 1) + hash_only


def unpack_floor(res):
    """Seconds a verified unpacker needs at least: reading the packet and
    writing every byte (a copy, no per-file work counted) plus both SHA-256
    passes from memory (member digests and the whole-packet digest), spread
    over every core. Measured in the same run."""
    copy = res["verify"]["copy (one pass: read and write, no hashing)"]["cpu_min"]
    hash_only = res["verify"]["SHA-256 from memory (one pass, no reads)"]["min"]
    return (copy + 2 * hash_only) / (os.cpu_count() or 1)


def targets(res):
    """(description, measured ratio, bound, ok) for one workspace's results."""
    out = []
    label = res["label"]
    if label == "large":
        r = ratio(res, "pack", "pillbox pack", "GNU tar -c")
        out.append(("pack large ≤ 1.5× GNU tar -c", r, 1.5, r <= 1.5))
        # The floor for any packer of this format on this machine (see
        # pack_floor): above 1.5, the target above cannot be met here.
        floor = pack_floor(res) / res["pack"]["GNU tar -c"]["min"]
        out.append((f"physical floor of pack large on {os.cpu_count()} cores, in GNU tar -c times "
                    "(a copy of the packet's bytes plus the member digests spread over every core, then the "
                    "packet digest on one core; above 1.5 the target above cannot be met)",
                    floor, 1.5, floor <= 1.5))
        r = ratio(res, "pack", "tar + sha256sum + manifest script", "pillbox pack")
        out.append(("pack large ≥ 4× faster than the tar+sha256sum script", r, 4.0, r >= 4.0))
        r = ratio(res, "unpack", "pillbox unpack", "GNU tar -x")
        out.append(("verified unpack large ≤ 2× GNU tar -x", r, 2.0, r <= 2.0))
        # How close unpack is to the limit: what tar -x does plus two hashes,
        # with every core busy all the time.
        floor = unpack_floor(res) / res["unpack"]["GNU tar -x"]["min"]
        out.append((f"physical floor of verified unpack large on {os.cpu_count()} cores, in GNU tar -x "
                    "times (a copy of the packet's bytes plus two SHA-256 passes from memory, spread over every core)",
                    floor, 2.0, floor <= 2.0))
        # Two-hash limit: both SHA-256 passes at the native rate, on two
        # cores in parallel, take as long as one raw pass.
        r = res["verify"]["raw SHA-256 (one pass)"]["min"] / res["verify"]["pillbox verify"]["min"]
        out.append(("verify ≥ 50% of the two-hash limit", r, 0.5, r >= 0.5))
    if label == "small":
        r = ratio(res, "pack", "pillbox pack", "GNU tar -c")
        out.append(("pack small ≤ 1.5× GNU tar -c", r, 1.5, r <= 1.5))
        r = ratio(res, "unpack", "pillbox unpack", "GNU tar -x")
        out.append(("verified unpack small ≤ 1.3× GNU tar -x", r, 1.3, r <= 1.3))
        for other in ("tar crate unpack", "Python tarfile (filter='data')"):
            r = ratio(res, "unpack", other, "pillbox unpack")
            out.append((f"unpack small faster than {other}", r, 1.0, r > 1.0))
    for op, v in res["rss_mib"].items():
        if op in ("pack", "unpack", "verify"):
            out.append((f"peak RSS of {op} ({label}) < 64 MiB", v, 64, v < 64))
    return out


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.system()} {platform.release()}, {os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM"


def fmt_s(x):
    return f"{x:.3f} s" if x >= 0.1 else f"{x * 1000:.1f} ms"


def table(res, op, base):
    rows = [f"| {op} ({res['label']}) | min | median | ratio to {base} (min) | CPU user+sys (min) |",
            "|---|---|---|---|---|"]
    b = res[op][base]["min"]
    for name, s in res[op].items():
        rows.append(f"| {name} | {fmt_s(s['min'])} | {fmt_s(s['median'])} | {s['min'] / b:.2f}× | {fmt_s(s['cpu_min'])} |")
    return "\n".join(rows)


def svg_plot(series, path, title):
    """A log-log plot of time against workspace size for each tool."""
    import math
    w, h, pad = 760, 420, 60
    pts = [(x, y) for s in series.values() for x, y in s]
    if not pts:
        return
    xs = [math.log10(x) for x, _ in pts]
    ys = [math.log10(y) for _, y in pts]
    x0, x1 = min(xs), max(xs) + 1e-9
    y0, y1 = min(ys) - 0.1, max(ys) + 0.1
    sx = lambda x: pad + (math.log10(x) - x0) / (x1 - x0) * (w - 2 * pad)
    sy = lambda y: h - pad - (math.log10(y) - y0) / (y1 - y0) * (h - 2 * pad)
    colors = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
           f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>']
    for e in range(int(math.floor(y0)), int(math.ceil(y1)) + 1):
        if y0 <= e <= y1:
            y = sy(10 ** e)
            out.append(f'<line x1="{pad}" y1="{y:.1f}" x2="{w - pad}" y2="{y:.1f}" stroke="#ddd"/>')
            out.append(f'<text x="{pad - 6}" y="{y + 4:.1f}" text-anchor="end">{10 ** e:g}</text>')
    for i, (name, s) in enumerate(series.items()):
        c = colors[i % len(colors)]
        s = sorted(s)
        d = " ".join(f"{'M' if j == 0 else 'L'}{sx(x):.1f},{sy(y):.1f}" for j, (x, y) in enumerate(s))
        out.append(f'<path d="{d}" fill="none" stroke="{c}" stroke-width="2"/>')
        for x, y in s:
            out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{c}"/>')
        out.append(f'<text x="{w - pad - 200}" y="{pad + 16 * i}" fill="{c}">{name}</text>')
    for x, _ in sorted(set((x, 0) for x, _ in pts)):
        out.append(f'<text x="{sx(x):.1f}" y="{h - pad + 16}" text-anchor="middle" font-size="10">{x:g}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out))


def generate(kind, data):
    ws = os.path.join(data, "ws-" + kind)
    if not os.path.isdir(ws):
        log(f"generating workspace {kind}")
        subprocess.run([sys.executable, os.path.join(HERE, "genws.py"), kind, ws], check=True)
    return ws


# ---------------------------------------------------------------------------
# packet-core compiled to wasm: under node, in the browser, in the Worker.

def run_json(cmd, env=None):
    """Runs a measurement script; its stdout ends with one JSON object
    (stderr passes through, for progress)."""
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, env=env)
    out = p.stdout.decode(errors="replace")
    if p.returncode != 0:
        raise SystemExit(f"benchmark command failed ({p.returncode}): {' '.join(cmd)}\n{out}")
    return json.loads(out[out.index("{"):])


def inspector_packet(data, mb):
    """big-MB.packet from the inspector's fixture generator: about MB
    megabytes of incompressible files in 4 MB members."""
    d = os.path.join(data, "inspector-packets")
    path = os.path.join(d, f"big-{mb}.packet")
    if not os.path.exists(path):
        log(f"generating big-{mb}.packet")
        subprocess.run([FIXTURES, d, "--big", str(mb)], check=True, stdout=subprocess.DEVNULL)
    return path


WASM_CONFIGS = {
    "sha256": "raw SHA-256: `PacketHasher` (the sha2 crate in the same module)",
    "reader": "reader, member + whole-packet digests (`new Verifier`)",
    "reader, hashed elsewhere": "reader, member digests only (`Verifier.withExternalDigest`: the packet hashed elsewhere)",
}


def bench_wasm_node(packet, reps):
    log(f"  wasm reader under node ({os.path.basename(packet)})")
    warm(packet)
    res = run_json(["node", os.path.join(HERE, "wasm_reader.mjs"), WASM_NODE_PKG, packet, str(reps)])
    raw = next(c for c in res["configs"] if c["name"] == "sha256")
    for c in res["configs"]:
        # Share of the software SHA-256 limit for the configuration's work:
        # its SHA-256 passes at the raw wasm rate, against its time.
        c["limit_ratio"] = c["passes"] * raw["min_s"] / c["min_s"]
    res["raw_mb_per_s"] = raw["mb_per_s"]
    return res


def wasm_node_section(res):
    lines = [f"## Wasm reader under node: {os.path.basename(res['packet'])}, {res['size'] / 1e6:.1f} MB, "
             f"{res['members']} members", "",
             "packet-inspector-wasm (packet-core and sha2 built for wasm32-unknown-unknown, release, as",
             f"`inspector/build.sh` builds it) bound with `wasm-bindgen --target nodejs`, run under node {res['node']} by",
             "`bench/wasm_reader.mjs`. The packet is read into memory first and pushed in "
             f"{res['chunk_bytes'] >> 20} MiB chunks, as the Worker",
             "feeds its reader. The raw SHA-256 is the same sha2 crate in the same module over the same chunks: the",
             "software SHA-256 limit of a configuration is its number of full SHA-256 passes times the raw time, and",
             "its share of that limit is the limit over its time (min). All configurations run in one process,",
             f"interleaved, {res['reps']} round(s) after one warm-up.", "",
             "| configuration | SHA-256 passes | min | median | MB/s (min) | share of the software SHA-256 limit |",
             "|---|---|---|---|---|---|"]
    for c in res["configs"]:
        label = WASM_CONFIGS.get(c["name"], c["name"])
        if c["name"] == "reader" and res.get("named_by_manifest"):
            label = "reader, member + packet.json digests (`new Verifier`: a /2 packet, named by its manifest)"
        lines.append(f"| {label} | {c['passes']} | {fmt_s(c['min_s'])} | "
                     f"{fmt_s(c['median_s'])} | {c['mb_per_s']:.0f} | {c['limit_ratio']:.2f} |")
    return lines + [""]


def wasm_node_targets(res):
    out = []
    for c in res["configs"]:
        if c["name"] == "sha256":
            continue
        if c["name"] == "reader":
            what = "member + packet.json digests" if res.get("named_by_manifest") else "member + packet digests"
        else:
            what = "member digests only, the packet hashed elsewhere"
        r = c["limit_ratio"]
        out.append((f"reader in wasm (node) ≥ 80% of the software SHA-256 limit for its work "
                    f"({what}: {c['passes']} pass{'es' if c['passes'] > 1 else ''})", r, 0.8, r >= 0.8))
    return out


def bench_browser(packet, runs):
    log(f"  inspector in headless Chromium ({os.path.basename(packet)}, {runs} runs)")
    warm(packet)
    return run_json(["node", os.path.join(ROOT, "inspector", "tests", "measure.mjs"), packet, "--json"],
                    env={**os.environ, "RUNS": str(runs)})


def browser_section(res, raw_mb_per_s):
    ref = f" | ratio to raw wasm SHA-256 ({raw_mb_per_s:.0f} MB/s)" if raw_mb_per_s else ""
    lines = [f"## Inspector in headless Chromium: {os.path.basename(res['packet'])}, {res['size'] / 1e6:.1f} MB", "",
             "`node inspector/tests/measure.mjs PACKET --json`: `inspector/dist` served on 127.0.0.1, Debian's Chromium",
             "(headless, playwright-core), a fresh page per run, the packet chosen with the file input. Load times are",
             "from navigation start; verification is from opening the file to the verdict: `File.stream()` in 4 MiB",
             "chunks through the `Verifier` on the page's Web Worker, the whole-packet digest on a nested digest worker.",
             "The reference is the raw wasm SHA-256 rate (one pass, one core) from the node section of this run: with",
             "the two passes on two threads, 1.00 is that limit.", "",
             "| run | DOM interactive | load event | wasm worker ready | verification | MB/s" + ref + " |",
             "|---|---|---|---|---|---" + ("|---" if ref else "") + "|"]
    for i, (load, t, rate) in enumerate(zip(res["loads_ms"], res["verify_s"], res["mb_per_s"]), 1):
        cell = f" | {rate / raw_mb_per_s:.2f}" if ref else ""
        lines.append(f"| {i} | {load['interactive']:.0f} ms | {load['loaded']:.0f} ms | {load['ready']:.0f} ms | "
                     f"{fmt_s(t)} | {rate:.0f}{cell} |")
    m = res["median"]
    cell = f" | {m['mb_per_s'] / raw_mb_per_s:.2f}" if ref else ""
    lines.append(f"| median | {m['interactive_ms']:.0f} ms | {m['loaded_ms']:.0f} ms | {m['ready_ms']:.0f} ms | "
                 f"{fmt_s(statistics.median(res['verify_s']))} | {m['mb_per_s']:.0f}{cell} |")
    return lines + [""]


def bench_worker(data):
    """scripts/worker-1gib.sh with the packet and wrangler's local state in
    the benchmark data directory; the state is removed afterwards."""
    log("  the Worker verifying a ~1 GiB packet (wrangler dev --local)")
    tmp = os.path.join(data, "worker-tmp")
    os.makedirs(tmp, exist_ok=True)
    env = {**os.environ, "TMPDIR": tmp, "PILLBOX_1GIB_PACKET": os.path.join(data, "pillbox-1gib.packet")}
    try:
        return run_json(["bash", os.path.join(ROOT, "scripts", "worker-1gib.sh"), "platform"], env=env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def worker_section(res):
    mib = res["wasm_memory_bytes"] / 2**20
    return [f"## Worker: a {res['size'] / 2**30:.2f} GiB packet uploaded in parts", "",
            "`bash scripts/worker-1gib.sh` (scripts/worker-1gib.mjs): the Worker under `wrangler dev --local` (workerd, local",
            f"R2 and D1), {res['parts']} parts of {res['part_size'] >> 20} MiB, then `POST /v1/uploads/{{id}}/complete` assembles the parts,",
            "streams them through packet-core into the packet's key and indexes it. The whole-packet digest is",
            f"hashed by `{res['hasher']}` (`PACKET_HASHER`). workerd's RSS is the whole process, which also runs the",
            "local R2 and D1 simulators; the wasm linear memory (`Pillbox-Wasm-Memory-Bytes`) is the Worker's own and,",
            "since linear memory never shrinks, its peak.", "",
            "| | |", "|---|---|",
            f"| packet | {res['size']:,} bytes, {res['members']} members |",
            f"| uploading the parts | {res['upload_parts_s']:.1f} s |",
            f"| `complete` wall time | {res['verify_wall_s']:.1f} s ({res['verify_mb_per_s']:.0f} MB/s) |",
            f"| workerd CPU during `complete` | {res['verify_workerd_cpu_s']:.1f} s |",
            f"| **wasm linear memory after verifying** | **{res['wasm_memory_bytes']:,} bytes ({mib:.1f} MiB)** |",
            f"| workerd peak RSS during `complete` | {res['workerd_rss_peak_verify_mib']:.0f} MiB |",
            f"| workerd RSS idle / peak while the parts arrive / high-water mark | {res['workerd_rss_idle_mib']:.0f} / "
            f"{res['workerd_rss_peak_parts_mib']:.0f} / {res['workerd_vmhwm_mib']:.0f} MiB |", ""]


def worker_targets(res):
    mb = res["wasm_memory_bytes"] / 1e6
    return [(f"the Worker verifies a {res['size'] / 2**30:.2f} GiB packet within its 128 MB isolate "
             f"(wasm linear memory, MB; workerd's whole-process RSS peaked at {res['workerd_rss_peak_verify_mib']:.0f} MiB)",
             mb, 128, mb < 128)]


def bench_edge(args, data, smoke):
    """The wasm parts the arguments ask for: (markdown lines, targets, results)."""
    lines, tgts, results = [], [], {}
    reps = 1 if smoke else args.reps
    if not args.skip_wasm_node:
        for p in (FIXTURES, os.path.join(WASM_NODE_PKG, "packet_inspector_wasm.js")):
            if not os.path.exists(p):
                raise SystemExit(f"{p} is missing: build with bench/run.sh")
        results["wasm_node"] = bench_wasm_node(inspector_packet(data, 8 if smoke else 100), reps)
        lines += wasm_node_section(results["wasm_node"])
        if not smoke:
            tgts += wasm_node_targets(results["wasm_node"])
    if smoke:
        return lines, tgts, results
    if not args.skip_browser:
        if not os.path.exists(os.path.join(ROOT, "inspector", "dist", "index.html")):
            raise SystemExit("inspector/dist is missing: build with bash inspector/build.sh")
        results["browser"] = bench_browser(inspector_packet(data, 100), max(1, min(args.reps, 3)))
        raw = results.get("wasm_node", {}).get("raw_mb_per_s")
        lines += browser_section(results["browser"], raw)
    if not args.skip_worker:
        results["worker"] = bench_worker(data)
        lines += worker_section(results["worker"])
        tgts += worker_targets(results["worker"])
    return lines, tgts, results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--data", default=None, help="benchmark data directory (default: a temporary one)")
    ap.add_argument("--out", default=None, help="default docs/benchmarks.md (none with --only-edge)")
    ap.add_argument("--skip-scaling", action="store_true")
    ap.add_argument("--skip-wasm-node", action="store_true", help="skip the wasm reader under node")
    ap.add_argument("--skip-browser", action="store_true", help="skip the inspector in headless Chromium")
    ap.add_argument("--skip-worker", action="store_true", help="skip the Worker verifying a 1 GiB packet")
    ap.add_argument("--only-edge", action="store_true",
                    help="only the wasm parts (node, browser, Worker); writes --out only if given")
    args = ap.parse_args()
    if args.out is None and not args.only_edge:
        args.out = os.path.join(ROOT, "docs", "benchmarks.md")
    for b in () if args.only_edge else (PILLBOX, BASELINES):
        if not os.path.exists(b):
            raise SystemExit(f"{b} is missing: build with cargo build --release -p pillbox -p bench-baselines")
    load_before = os.getloadavg()
    data = args.data or tempfile.mkdtemp(prefix="pillbox-bench-")
    os.makedirs(data, exist_ok=True)
    scratch_dir = os.path.join(data, "scratch")
    os.makedirs(scratch_dir, exist_ok=True)
    scratch = Scratch(scratch_dir)

    if args.smoke:
        n = 0
        if not args.only_edge:
            ws = generate("tiny", data)
            res = bench_workspace("tiny", ws, 1, scratch, data)
            for op in ("pack", "unpack", "verify"):
                print(table(res, op, list(res[op])[1]))
            n = len(res['pack']) + len(res['unpack']) + len(res['verify'])
        edge_lines, _, edge = bench_edge(args, data, smoke=True)
        print("\n".join(edge_lines))
        n += sum(len(r["configs"]) for r in edge.values())
        print(f"smoke: {n} commands ran")
        return

    results = []
    for kind in () if args.only_edge else ("large", "small"):
        results.append(bench_workspace(kind, generate(kind, data), args.reps, scratch, data))
        shutil.rmtree(os.path.join(data, "ws-" + kind))

    edge_lines, edge_targets, edge = bench_edge(args, data, smoke=False)

    scaling = {"pillbox pack": [], "GNU tar -c": [], "pillbox unpack": [], "GNU tar -x": []}
    scaling_rows = []
    if not args.skip_scaling and not args.only_edge:
        for kind in ["members-1000", "members-10000", "members-50000", "members-250000",
                     "bytes-1000000", "bytes-10000000", "bytes-100000000", "bytes-1000000000"]:
            ws = generate(kind, data)
            r = bench_workspace(kind, ws, max(1, args.reps // 2), scratch, data)
            shutil.rmtree(ws)
            n = int(kind.split("-")[1])
            scaling_rows.append(r)
            series_key = "members" if kind.startswith("members") else "bytes"
            for tool, op, name in (("pillbox pack", "pack", "pillbox pack"), ("GNU tar -c", "pack", "GNU tar -c"),
                                   ("pillbox unpack", "unpack", "pillbox unpack"), ("GNU tar -x", "unpack", "GNU tar -x")):
                scaling[tool].append((series_key, n, r[op][name]["min"]))

    lines = ["# Benchmarks", "",
             "Generated by `bash bench/run.sh` (bench/run.py). Every ratio compares commands measured in the same run,",
             "interleaved, after one warm-up run each; `min` and `median` over the repetitions. Absolute times depend on",
             "the machine and its neighbours; ratios are the figures that count. CPU is user+sys time of the command",
             "and its children (the script's pipeline included).", "",
             f"Data and every output live on {'a tmpfs' if scratch.tmpfs else 'a disk file system'}; each run writes",
             "a fresh file or directory. GNU tar: `" + " ".join(GNU_TAR_CREATE) + " -cf OUT -C WS .` and `"
             + " ".join(GNU_TAR_EXTRACT) + " -xf ARCHIVE -C NEWDIR`"
             + (" (what `tar -xf` does for a user other than root)." if os.geteuid() == 0 else "."),
             "The tar + sha256sum + manifest script: `tar -cf - | tee OUT | sha256sum` then `find -type f -exec sha256sum`.",
             "Raw SHA-256: one pass over the packet with the sha2 crate (1 MiB reads, one core), the verify target's reference;",
             "from memory: as many bytes hashed from one 1 MiB buffer, the hashing alone. Copy: the packet's bytes read and written once through a 1 MiB buffer. The pack and unpack floors in the targets are made of these.", "",
             f"Machine: {machine()}. Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
             f"Load average (1 min) at the start: {load_before[0]:.2f}, at the end: {os.getloadavg()[0]:.2f}. Pack, verify",
             "and unpack use every core (pack: a worker per core plus the layout; unpack: reading and member digests, the "
             "packet digest, writing): with a core taken by another process their wall time approaches their CPU time.", ""]
    all_targets = []
    for res in results:
        lines += [f"## {res['label']}: {res['files']} files, packet {res['packet_bytes'] / 1e6:.1f} MB", ""]
        lines += [table(res, "pack", "GNU tar -c"), "", table(res, "unpack", "GNU tar -x"), "",
                  table(res, "verify", "raw SHA-256 (one pass)"), ""]
        lines += ["| peak RSS | MiB |", "|---|---|"] + [f"| {k} | {v:.1f} |" for k, v in res["rss_mib"].items()] + [""]
        all_targets += targets(res)
    lines += edge_lines
    all_targets += edge_targets
    if scaling_rows:
        worst = max(((v, f"{op} ({r['label']})") for r in scaling_rows
                     for op, v in r["rss_mib"].items() if op in ("pack", "unpack", "verify")))
        all_targets.append((f"largest peak RSS over the scaling series < 64 MiB: {worst[1]}", worst[0], 64,
                            worst[0] < 64))
    lines += ["## Targets", "", "| target | measured | bound | met |", "|---|---|---|---|"]
    for desc, val, bound, ok in all_targets:
        lines.append(f"| {desc} | {val:.2f} | {bound:g} | {'yes' if ok else '**no**'} |")
    if scaling_rows:
        lines += ["", "## Scaling", "", "![members](benchmarks-scaling-members.svg)", "", "![bytes](benchmarks-scaling-bytes.svg)", "",
                  "| workspace | packet MB | pillbox pack | GNU tar -c | pillbox unpack | GNU tar -x | pillbox verify "
                  "| peak RSS pack / unpack / verify (MiB) |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in scaling_rows:
            rss = r["rss_mib"]
            lines.append(f"| {r['label']} | {r['packet_bytes'] / 1e6:.1f} | {fmt_s(r['pack']['pillbox pack']['min'])} | "
                         f"{fmt_s(r['pack']['GNU tar -c']['min'])} | {fmt_s(r['unpack']['pillbox unpack']['min'])} | "
                         f"{fmt_s(r['unpack']['GNU tar -x']['min'])} | {fmt_s(r['verify']['pillbox verify']['min'])} "
                         f"| {rss['pack']:.1f} / {rss['unpack']:.1f} / {rss['verify']:.1f} |")
        lines += ["", f"Largest peak RSS over the scaling series: {worst[0]:.1f} MiB, {worst[1]}."]
        for key, unit in (("members", "members"), ("bytes", "bytes")):
            plot = {}
            for tool, pts in scaling.items():
                for k, n, t in pts:
                    if k == key:
                        plot.setdefault(tool, []).append((n, t))
            svg_plot(plot, os.path.join(os.path.dirname(args.out), f"benchmarks-scaling-{key}.svg"),
                     f"time (s) against workspace {unit}, log-log")
    if args.out:
        # The "Transfer" section is bench/transfer.mjs's: kept as it is.
        transfer = ""
        if os.path.exists(args.out):
            with open(args.out) as f:
                old = f.read()
            at = old.find("\n## Transfer\n")
            if at >= 0:
                end = old.find("\n## ", at + 1)
                transfer = old[at:] if end < 0 else old[at:end + 1]
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n" + transfer)
    with open(os.path.join(data, "results.json"), "w") as f:
        json.dump({"results": results, "scaling": scaling_rows, "edge": edge}, f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
