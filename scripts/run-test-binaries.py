#!/usr/bin/env python3
"""Build cargo's test binaries, then run them a few at a time.

`cargo test` runs one test binary after another, and most of rtloop's wait on processes,
sockets and timers: the two cores sit half idle. This builds every binary of the given cargo
test invocations (`--no-run`), then runs them `--jobs` at a time, each in its package's
directory as cargo runs it, longest-known first. A binary's output is printed when it fails
(whole) or passes (its summary line). cargo-nextest does the same and more, but building it
takes five minutes of a fresh machine's CI; this is the part rtloop needs.

    scripts/run-test-binaries.py [--jobs N] [--lint] -- 'CARGO TEST ARGS' ['CARGO TEST ARGS' ...]

Each quoted argument is one `cargo test` invocation (split like a shell would); a binary two
invocations share runs once. `--lint` builds the workspace's crates with clippy's lints on,
every warning an error (scripts/clippy-rustc.sh); the binaries then run without it. Exits 1 when a binary fails or an invocation builds nothing.
"""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

# the compiler wrapper of --lint
LINT_WRAPPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clippy-rustc.sh")

# binaries whose tests run longest (seconds measured on the CI machine): they start first so
# the run does not end with one long binary on its own
LONGEST_FIRST = ["cli_serve", "cli_lab", "cli_bench_runtime", "cli_run", "cli_bench_peers"]


def build(cargo_args, env):
    """Build one invocation's test binaries; return (package dir, executable, label)."""
    cmd = ["cargo", "test", *cargo_args, "--no-run", "--message-format=json-render-diagnostics"]
    print("==> " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"building the tests failed: {' '.join(cmd)}")
    found = []
    for line in proc.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg["profile"]["test"] and "bench" not in msg["target"]["kind"]:
            continue
        pkg_dir = os.path.dirname(msg["manifest_path"])
        label = f"{os.path.basename(pkg_dir)}/{msg['target']['name']} ({msg['target']['kind'][0]})"
        found.append((pkg_dir, msg["executable"], label))
    if not found:
        sys.exit(f"no test binaries from: {' '.join(cmd)}")
    return found


def run(job):
    pkg_dir, exe, label = job
    t0 = time.monotonic()
    # each binary's streams in a directory of its own ($RTLOOP_SHM_DIR, removed after it):
    # two binaries at once must not see each other's streams (one's sweep of ended streams
    # took a half-made file another was replacing), as they never did one after another
    shm = tempfile.mkdtemp(prefix="rtloop-tests-", dir="/dev/shm")
    try:
        with tempfile.TemporaryFile(mode="w+") as out:
            # cargo runs a test binary in its package's directory with CARGO_MANIFEST_DIR set
            env = dict(os.environ, CARGO_MANIFEST_DIR=pkg_dir, RTLOOP_SHM_DIR=shm)
            rc = subprocess.run([exe], cwd=pkg_dir, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
            out.seek(0)
            text = out.read()
    finally:
        shutil.rmtree(shm, ignore_errors=True)
    return label, rc, time.monotonic() - t0, text


def summary(text):
    lines = [l for l in text.splitlines() if l.startswith("test result:")]
    return lines[-1] if lines else "(no libtest summary: a program of its own)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2, help="binaries running at once (default 2)")
    ap.add_argument("--lint", action="store_true", help="lint the workspace's crates with clippy while building them")
    ap.add_argument("invocations", nargs="+", help="cargo test arguments, one string each")
    a = ap.parse_args()
    if a.jobs < 1:
        sys.exit(f"--jobs must be at least 1, not {a.jobs}")
    env = dict(os.environ)
    if a.lint:
        env["RUSTC_WORKSPACE_WRAPPER"] = LINT_WRAPPER
    jobs, seen = [], set()
    for inv in a.invocations:
        for job in build(shlex.split(inv), env):
            if job[1] not in seen:
                seen.add(job[1])
                jobs.append(job)

    def rank(job):
        name = job[2].split("/", 1)[1].split(" ", 1)[0]
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    jobs.sort(key=rank)
    print(f"==> running {len(jobs)} test binaries, {a.jobs} at a time", file=sys.stderr, flush=True)
    failed = []
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for done in as_completed([pool.submit(run, job) for job in jobs]):
            label, rc, secs, text = done.result()
            if rc == 0:
                print(f"PASS {secs:6.1f}s {label}: {summary(text)}", flush=True)
            else:
                failed.append(label)
                print(f"FAIL {secs:6.1f}s {label} (exit {rc}); its output:\n{text}", flush=True)
    print(f"==> {len(jobs) - len(failed)} of {len(jobs)} test binaries passed in "
          f"{time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
