"""Every code block in README.md and docs/ runs here, so the docs cannot rot.

Blocks of one page run in page order in one fresh working directory, with streams in a
private directory (``RTLOOP_SHM_DIR``) and the repository's ``rtloop`` on ``PATH``:

* ``python`` blocks run as scripts, ``bash`` blocks with ``bash -euo pipefail``;
* ``rust`` blocks are compiled and run as a program against the rtloop-stream crate;
* ``text`` blocks (diagrams, output, usage synopses) are not code and are not run; a fence
  without a language is refused, so every block says what it is.

An HTML comment on the line before a fence changes how its block is tested (directives
separated by ``;``), never whether it is tested, except for ``skip`` which needs a reason
from the short list in ``SKIP_REASONS``:

``file NAME``       write the block to NAME (a model, a module) instead of running it
``then CMD``        afterwards run the shell command CMD (e.g. ``rtloop run --check m.yaml``);
                    it comes last and takes the rest of the comment
``fixture NAME``    start a fixture first: ``eeg`` (a 384-channel int16 stream "eeg" with a
                    writer), ``fieldtrip`` (``rtloop serve`` on 127.0.0.1:1972 holding data)
``background``      a command that runs until stopped: it must still be running, without an
                    error, after 3 s; then it is stopped
``options``         a list of commands that wait for streams or Ctrl-C: each ``rtloop ...``
                    line's subcommand and every ``--option`` must exist in its ``--help``
``alone``           its own empty stream directory (an alternative to an earlier block, e.g.
                    the same stream made from Rust instead of Python)
``skip REASON``     not run, for a reason in ``SKIP_REASONS``
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUN_LANGS = {"python", "bash", "rust"}
INERT_LANGS = {"text", "yaml", "matlab"}

#: the only reasons a block may be left unrun
SKIP_REASONS = {
    "set-up": "installing rtloop itself: CI runs the set-up commands before the suite",
    "matlab": "no MATLAB on the test machines; FieldTrip's MATLAB client speaks the protocol "
    "FieldTrip.py speaks in tests/test_fieldtrip_peer.py",
    "fragment": "part of a larger block shown in full elsewhere on the page",
    "long": "runs for minutes; its --quick form runs in the suite (named in the comment)",
}

MARKER = re.compile(r"^<!--\s*doc-test:\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    code: str
    directives: Dict[str, List[str]] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks_of(page: Path) -> List[Block]:
    out: List[Block] = []
    lines = page.read_text().splitlines()
    k = 0
    while k < len(lines):
        line = lines[k]
        if line.startswith("```"):
            lang = line[3:].strip().split(",")[0].split(" ")[0]
            start = k
            k += 1
            body = []
            while k < len(lines) and not lines[k].startswith("```"):
                body.append(lines[k])
                k += 1
            directives: Dict[str, List[str]] = {}
            if start > 0:
                m = MARKER.match(lines[start - 1])
                if m:
                    text = m.group(1)
                    # `then` takes the rest of the comment (a shell command may hold `;`)
                    head, sep, command = text.partition("then ")
                    if sep and (not head.strip() or head.rstrip().endswith(";")):
                        directives["then"] = [command.strip()]
                        text = head
                    for part in text.split(";"):
                        part = part.strip()
                        if part:
                            key, _, arg = part.partition(" ")
                            directives.setdefault(key, []).append(arg.strip())
            out.append(Block(page, start + 1, lang, "\n".join(body) + "\n", directives))
        k += 1
    return out


#: the README's first block: the set-up commands, which CI runs itself (the page's first lines
#: hold exactly these two commands, so they carry no marker)
SETUP = ["bash scripts/bootstrap.sh", "bash scripts/test-all.sh"]


def is_setup(b: Block) -> bool:
    commands = [line.split("#", 1)[0].strip() for line in b.code.splitlines() if line.strip()]
    return b.page.name == "README.md" and b.page.parent == REPO and commands == SETUP


def all_blocks() -> List[Block]:
    return [b for p in PAGES for b in blocks_of(p)]


def rtloop_exe() -> str:
    beside = Path(sys.executable).parent / "rtloop"
    exe = os.environ.get("RTLOOP_BIN") or (str(beside) if beside.exists() else shutil.which("rtloop"))
    if exe is None:
        pytest.fail("the rtloop command is not on PATH: install the package (bash scripts/python-dev.sh)")
    return exe


def test_every_block_says_what_it_is_and_how_it_is_tested() -> None:
    known = {"file", "then", "fixture", "background", "options", "skip", "alone"}
    problems = []
    for b in all_blocks():
        if not b.lang:
            problems.append(f"{b.where}: a fence without a language (use text for output and diagrams)")
        elif b.lang not in RUN_LANGS | INERT_LANGS:
            problems.append(f"{b.where}: language {b.lang!r}; allowed: {sorted(RUN_LANGS | INERT_LANGS)}")
        for key in b.directives:
            if key not in known:
                problems.append(f"{b.where}: unknown doc-test directive {key!r}; allowed: {sorted(known)}")
        for reason in b.directives.get("skip", []):
            if reason.split(" ")[0] not in SKIP_REASONS:
                problems.append(f"{b.where}: skip reason {reason!r}; allowed: {sorted(SKIP_REASONS)}")
        if b.lang == "yaml" and "file" not in b.directives and "skip" not in b.directives:
            problems.append(f"{b.where}: a yaml block must be a model file (file NAME; then rtloop run --check) or a fragment")
    assert not problems, "\n".join(problems)
    # the suite really covers something on every page that has code
    assert sum(b.lang in RUN_LANGS and "skip" not in b.directives for b in all_blocks()) >= 15


LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+.*)?$")
HTML_ID = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def prose_lines(page: Path) -> Iterator[tuple]:
    """(line number, text) of the page outside fenced code blocks."""
    fenced = False
    for n, line in enumerate(page.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


def anchors_of(page: Path) -> set:
    """The #anchors GitHub makes for a page: each heading's text lower-cased, without
    markup and punctuation, spaces as hyphens (a repeated one gets -1, -2, ...); and
    explicit <a id/name="...">."""
    seen: Dict[str, int] = {}
    out = set()
    for _, line in prose_lines(page):
        out.update(HTML_ID.findall(line))
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))  # a link: its text
        text = re.sub(r"<[^>]+>", "", text).lower()
        slug = "".join(c for c in text if c.isalnum() or c in " -_").replace(" ", "-")
        k = seen.get(slug, 0)
        seen[slug] = k + 1
        out.add(slug if k == 0 else f"{slug}-{k}")
    return out


def test_every_link_and_anchor_resolves() -> None:
    """Every relative link of README.md and docs/ (inline or reference-style, outside code)
    names a file or directory of the repository, and its #anchor a heading of that page (as
    GitHub makes anchors). Web addresses are not fetched."""
    problems = []
    cache: Dict[Path, set] = {}
    checked = {"files": 0, "anchors": 0}
    for page in PAGES:
        for n, line in prose_lines(page):
            line = re.sub(r"`[^`]*`", "", line)  # code spans hold examples, not links
            targets = LINK.findall(line) + REF_DEF.findall(line)
            for target in targets:
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                path, _, anchor = target.partition("#")
                where = f"{page.relative_to(REPO)}:{n}: {target}"
                dest = (page.parent / path).resolve() if path else page
                if not dest.is_relative_to(REPO):
                    problems.append(f"{where}: points outside the repository")
                    continue
                if not dest.exists():
                    problems.append(f"{where}: no such file")
                    continue
                checked["files"] += 1
                if anchor and dest.suffix == ".md":
                    checked["anchors"] += 1
                    if dest not in cache:
                        cache[dest] = anchors_of(dest)
                    if anchor not in cache[dest]:
                        problems.append(f"{where}: {dest.relative_to(REPO)} has no heading with anchor #{anchor}")
    assert not problems, "\n".join(problems)
    # the pages do link to each other and to headings: the check saw them
    assert checked["files"] >= 50 and checked["anchors"] >= 10, checked


class Workspace:
    """One page's working directory, private stream directory and fixtures."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "work"
        self.dir.mkdir()
        self.shm = root / "shm"
        self.shm.mkdir()
        exe_dir = str(Path(rtloop_exe()).parent)
        self.env = {
            **os.environ,
            "RTLOOP_SHM_DIR": str(self.shm),
            "PATH": f"{exe_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "REPO": str(REPO),
            "RTLOOP_PROGRESS_SECONDS": "0",
        }
        self.procs: List[subprocess.Popen[str]] = []
        self.fixtures: set = set()

    def spawn(self, args: List[str]) -> subprocess.Popen[str]:
        p = subprocess.Popen(args, cwd=self.dir, env=self.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.procs.append(p)
        return p

    def run(self, args: List[str], where: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(args, cwd=self.dir, env=self.env, capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, f"{where}: {shlex.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        return r

    def fixture(self, name: str, where: str) -> None:
        if name in self.fixtures:
            return
        if name == "eeg":
            # a 384-channel int16 stream "eeg" at 30 kHz written in 1 ms chunks until stopped
            code = """
                import time, numpy as np, rtloop
                s = rtloop.Stream.create("eeg", n_channels=384, dtype="int16", sfreq=30000.0,
                                         capacity=60000, content_type="EEG")
                w = s.writer()
                chunk = (np.arange(30 * 384, dtype=np.int16) % 1000).reshape(30, 384)
                print("ready", flush=True)
                t = time.monotonic()
                while True:
                    w.push_chunk(chunk)
                    t += 0.001
                    time.sleep(max(0.0, t - time.monotonic()))
            """
            p = self.spawn([sys.executable, "-c", textwrap.dedent(code)])
        elif name == "fieldtrip":
            p = self.spawn([rtloop_exe(), "serve", "--bind", "127.0.0.1:1972"])
            assert p.stderr is not None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    import socket

                    socket.create_connection(("127.0.0.1", 1972), timeout=0.5).close()
                    break
                except OSError:
                    assert p.poll() is None, f"{where}: rtloop serve ended: {p.communicate()}"
                    time.sleep(0.05)
            # something to read: 4 channels, 1000 samples, one event
            fill = """
                import numpy as np
                from rtloop.fieldtrip import Client, Event
                with Client.open("localhost:1972") as c:
                    c.put_header(4, 1000.0, "float32", labels=["Fz", "Cz", "Pz", "Oz"])
                    c.put_data(np.zeros((1000, 4), np.float32))
                    c.put_events(Event("trigger", "go", sample=10))
                print("ready", flush=True)
            """
            p = self.spawn([sys.executable, "-c", textwrap.dedent(fill)])
            p.wait(60)
            assert p.returncode == 0, f"{where}: filling the FieldTrip buffer failed: {p.communicate()}"
        else:
            pytest.fail(f"{where}: unknown fixture {name!r}; allowed: eeg, fieldtrip")
        if name == "eeg":
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "ready", f"{where}: the eeg fixture did not start: {p.communicate()}"
        self.fixtures.add(name)

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(10)
            p.communicate()


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace(tmp_path)
    try:
        yield ws
    finally:
        ws.close()


def command_of(block: Block, path: Path) -> List[str]:
    if block.lang == "python":
        return [sys.executable, str(path)]
    return ["bash", "-euo", "pipefail", str(path)]


def check_options(ws: Workspace, block: Block) -> None:
    """Each `rtloop ...` line: its subcommand path and every --option exist in its --help."""
    for raw in block.code.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line.startswith("rtloop "):
            continue
        words = shlex.split(line)[1:]
        # global options may come first; the subcommand path is the leading bare words
        globals_ = [w for w in words if w in ("--json", "-v", "--verbose")]
        rest = [w for w in words if w not in globals_]
        path: List[str] = []
        help_text = ws.run([rtloop_exe(), "--help"], block.where).stdout
        for w in rest:
            if w.startswith("-"):
                break
            sub = ws.run([rtloop_exe(), *path, w, "--help"], block.where) if re.search(
                rf"^\s+{re.escape(w)}\b", help_text, re.M) else None
            if sub is None:
                break
            path.append(w)
            help_text = sub.stdout
        assert path, f"{block.where}: {line!r}: no such rtloop command"
        for w in rest:
            if w.startswith("--"):
                opt = w.split("=", 1)[0]
                assert re.search(rf"(^|\s){re.escape(opt)}\b", help_text), (
                    f"{block.where}: {line!r}: `rtloop {' '.join(path)}` has no option {opt}"
                )


RUST_MAIN = """use rtloop_stream::{{DType, Stream, StreamConfig}};

fn main() -> Result<(), Box<dyn std::error::Error>> {{
{body}
    Ok(())
}}
"""


def run_rust(ws: Workspace, block: Block) -> None:
    """Build the block as a program using rtloop-stream (sharing the workspace's target
    directory, so nothing is compiled twice) and run it."""
    crate = ws.dir / f"doc_block_{block.line}"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text(textwrap.dedent(f"""
        [package]
        name = "doc_block_{block.line}"
        version = "0.0.0"
        edition = "2021"
        publish = false

        [dependencies]
        rtloop-stream = {{ path = "{REPO / 'crates' / 'rtloop-stream'}" }}

        [workspace]
    """))
    (crate / "src" / "main.rs").write_text(RUST_MAIN.format(body=textwrap.indent(block.code, "    ")))
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    env = {**ws.env, "CARGO_TARGET_DIR": os.environ.get("CARGO_TARGET_DIR", str(REPO / "target"))}
    r = subprocess.run([cargo, "run", "-q", "--manifest-path", str(crate / "Cargo.toml")],
                       cwd=ws.dir, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{block.where}: the Rust block did not build or run:\n{r.stderr[-4000:]}"


PAGES_WITH_CODE = [
    p.relative_to(REPO).as_posix()
    for p in PAGES
    if any(b.lang in RUN_LANGS or "file" in b.directives for b in blocks_of(p))
]


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("page", PAGES_WITH_CODE)
def test_the_code_blocks_of_a_page_run(page: str, workspace: Workspace) -> None:
    blocks = blocks_of(REPO / page)
    ran = 0
    for k, b in enumerate(blocks):
        d = b.directives
        if "skip" in d or is_setup(b) or b.lang not in RUN_LANGS and "file" not in d:
            continue
        if "alone" in d:
            workspace.env["RTLOOP_SHM_DIR"] = str(Path(workspace.shm.parent / f"shm-{k}"))
            Path(workspace.env["RTLOOP_SHM_DIR"]).mkdir()
        for name in d.get("fixture", []):
            workspace.fixture(name, b.where)
        if "file" in d:
            (workspace.dir / d["file"][0]).write_text(b.code)
        elif "options" in d:
            check_options(workspace, b)
        elif b.lang == "rust":
            run_rust(workspace, b)
        else:
            script = workspace.dir / f"block_{k}.{'py' if b.lang == 'python' else 'sh'}"
            script.write_text(b.code)
            if "background" in d:
                p = workspace.spawn(command_of(b, script))
                time.sleep(3)
                assert p.poll() is None, f"{b.where}: ended early ({p.returncode}): {p.communicate()}"
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(20)
            else:
                workspace.run(command_of(b, script), b.where)
        for cmd in d.get("then", []):
            workspace.run(["bash", "-euo", "pipefail", "-c", cmd], b.where)
        workspace.env["RTLOOP_SHM_DIR"] = str(workspace.shm)
        ran += 1
    assert ran > 0, f"{page}: no block ran"
