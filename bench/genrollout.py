#!/usr/bin/env python3
"""A deterministic Codex-like rollout (JSONL session log) of about N MiB.

    genrollout.py FILE MIB [SOURCES_DIR]

Each turn has what a Codex rollout records: a user message, a turn_context
(the same settings every turn), a reasoning item with base64
`encrypted_content` (incompressible), shell function calls whose outputs
are excerpts of real text files under SOURCES_DIR (default: this
repository), an assistant message and a token_count event. Used to measure
how part compression does on session logs (docs/transfer.md, "Compression").
"""
import base64
import json
import os
import random
import sys

THREAD = "0199a213-81c0-7800-8aa1-bbab2a035a53"


def texts(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in (".git", "target", "node_modules"))
        for name in sorted(filenames):
            if name.endswith((".rs", ".md", ".toml", ".py", ".js", ".mjs", ".json", ".yaml", ".sh")):
                path = os.path.join(dirpath, name)
                try:
                    with open(path, encoding="utf-8") as f:
                        out.append((os.path.relpath(path, root), f.read()))
                except (UnicodeDecodeError, OSError):
                    pass
    return out


def main():
    path, mib = sys.argv[1], int(sys.argv[2])
    root = sys.argv[3] if len(sys.argv) > 3 else os.path.join(os.path.dirname(__file__), "..")
    corpus = texts(root)
    rng = random.Random(20261201)
    target = mib << 20
    t = 0

    def stamp():
        nonlocal t
        t += rng.randint(5, 900)
        s, ms = divmod(t, 1000)
        m, s = divmod(s, 60)
        h, m = divmod(m, 60)
        return f"2026-11-30T{h % 24:02d}:{m:02d}:{s:02d}.{ms:03d}Z"

    with open(path, "w", encoding="utf-8") as f:
        def line(kind, payload):
            f.write(json.dumps({"timestamp": stamp(), "type": kind, "payload": payload}, separators=(",", ":")) + "\n")

        line("session_meta", {"id": THREAD, "session_id": THREAD, "cwd": "/home/dev/project",
                              "originator": "codex_cli_rs", "cli_version": "0.171.0", "model_provider": "openai"})
        turn = 0
        while f.tell() < target:
            turn += 1
            line("response_item", {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": f"Turn {turn}: please fix the failing test in {rng.choice(corpus)[0]}"}]})
            line("turn_context", {"cwd": "/home/dev/project", "approval_policy": "on-request",
                                  "sandbox_policy": {"mode": "workspace-write", "network_access": False},
                                  "model": "gpt-5-codex", "effort": "medium", "summary": "auto"})
            for _ in range(rng.randint(2, 6)):
                if rng.random() < 0.3:
                    secret = rng.randbytes(rng.randint(200, 900))
                    line("response_item", {"type": "reasoning", "summary": [
                        {"type": "summary_text", "text": "**Inspecting the module**\n\nLooking at how the reader is driven."}],
                        "content": None, "encrypted_content": base64.b64encode(secret).decode()})
                name, text = rng.choice(corpus)
                lines = text.splitlines()
                start = rng.randint(0, max(0, len(lines) - 1))
                excerpt = "\n".join(lines[start:start + rng.randint(20, 250)])
                call = f"call_{rng.getrandbits(96):024x}"
                line("response_item", {"type": "function_call", "name": "shell", "call_id": call,
                                       "arguments": json.dumps({"command": ["bash", "-lc", f"sed -n '{start},{start + 250}p' {name}"],
                                                                "workdir": "/home/dev/project", "timeout_ms": 120000})})
                line("response_item", {"type": "function_call_output", "call_id": call,
                                       "output": json.dumps({"output": excerpt, "metadata": {"exit_code": 0, "duration_seconds": round(rng.random(), 1)}})})
            line("response_item", {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": f"I changed {rng.choice(corpus)[0]} so that the test passes; the cause was an off-by-one in the offset."}]})
            line("event_msg", {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 1000 * turn, "cached_input_tokens": 900 * turn,
                                                                                     "output_tokens": 50 * turn, "reasoning_output_tokens": 30 * turn, "total_tokens": 1050 * turn}}})


if __name__ == "__main__":
    main()
