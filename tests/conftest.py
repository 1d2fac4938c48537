"""Shared fixtures: unique stream names (removed afterwards) and real child processes."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

# Each pytest-xdist worker keeps its streams in a directory of its own (RTLOOP_SHM_DIR, which
# its child processes inherit). A stream's life is shared by its directory: any `create` there
# reclaims every dead stream (docs/getting-started.md, "A stream's life"), so a test watching
# a dead writer would otherwise see the other worker's tests take its stream away.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER:
    _base = Path(os.environ.get("RTLOOP_SHM_DIR", "/dev/shm"))
    _own = _base / f"rtloop-tests-{_WORKER}-{os.getpid()}"
    _own.mkdir(mode=0o700)
    os.environ["RTLOOP_SHM_DIR"] = str(_own)

import rtloop  # noqa: E402  (after RTLOOP_SHM_DIR is set)
from rtloop import _rtloop  # noqa: E402


def run_lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The file the `alone` lock is taken on, in the base directory pytest-xdist's workers
    share (or this run's, without workers)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if _WORKER else base) / "alone.lock"


@pytest.fixture(autouse=True)
def _not_beside_an_alone_test(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every test holds the run's lock shared; a test marked `alone` takes it for itself where it
    needs to (`alone_on_the_machine`). The closed-loop examples are real-time: their replay and
    model run at SCHED_FIFO, and another test's real-time processes beside them (a model, the
    runtime benchmark's timer) brought the kernel's real-time throttling down on all of them,
    ~30 ms at a time (spike precision 0.39 and 0.67 in two suite runs)."""
    if request.node.get_closest_marker("alone"):
        yield
        return
    with open(run_lock(tmp_path_factory), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)
        yield


@pytest.fixture
def alone_on_the_machine(tmp_path_factory: pytest.TempPathFactory) -> Callable[[], "contextlib.AbstractContextManager[None]"]:
    """For a test marked `alone`: a context in which no other test of the run is running."""

    @contextlib.contextmanager
    def alone() -> Iterator[None]:
        with open(run_lock(tmp_path_factory), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    return alone


@pytest.fixture
def stream_name() -> Iterator[str]:
    """A stream name no other test (or concurrent test run) uses; the stream is removed
    afterwards if the test left it."""
    name = f"pytest-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    yield name
    if name in rtloop.Stream.list():
        rtloop.Stream.remove(name)


@pytest.fixture
def make_name() -> Iterator[Callable[[], str]]:
    """A factory of unique stream names, all removed afterwards."""
    made: List[str] = []

    def make() -> str:
        name = f"pytest-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        made.append(name)
        return name

    yield make
    existing = set(rtloop.Stream.list())
    for name in made:
        if name in existing:
            rtloop.Stream.remove(name)


class Child:
    """A Python child process running a script; talks over its stdin/stdout by lines."""

    def __init__(self, code: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def expect(self, word: str) -> str:
        """Read lines until one starts with `word` (the test's timeout is the watchdog)."""
        assert self.proc.stdout is not None
        seen = []
        for line in self.proc.stdout:
            if line.startswith(word):
                return line.strip()
            seen.append(line)
        err = self.proc.stderr.read() if self.proc.stderr else ""
        raise AssertionError(
            f"child ended without printing {word!r}; stdout: {''.join(seen)!r}; stderr: {err}"
        )

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = 60.0) -> tuple[int, str, str]:
        """Close stdin, wait for the exit (watchdog `timeout`), return (code, out, err)."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise AssertionError(f"child did not finish; stdout {out!r}; stderr {err!r}")
        return self.proc.returncode, out, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture
def child() -> Iterator[Callable[..., Child]]:
    """Start Python child processes (`child(code, *args)`); all are killed afterwards."""
    children: List[Child] = []

    def start(code: str, *args: str) -> Child:
        c = Child(code, *args)
        children.append(c)
        return c

    yield start
    for c in children:
        c.kill()


@pytest.fixture
def shm_file() -> Iterator[Callable[[str, bytes], Path]]:
    """Place a file as /dev/shm/rtloop-<name> (removed afterwards)."""
    paths: List[Path] = []

    def place(name: str, content: bytes) -> Path:
        path = Path(_rtloop.stream_path(name))
        path.write_bytes(content)
        paths.append(path)
        return path

    yield place
    for p in paths:
        p.unlink(missing_ok=True)


def terminate(proc: "subprocess.Popen[str]") -> str:
    """End a server process as Ctrl-C would (SIGTERM; SIGKILL after 10 s); return its stderr."""
    import signal

    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err or ""


class FieldTripServer:
    """`rtloop serve` in its own process on a free TCP port and a UNIX socket."""

    def __init__(self, tmp: Path, name: str, *args: str) -> None:
        beside = Path(sys.executable).parent / "rtloop"
        exe = str(beside) if beside.exists() else "rtloop"
        self.stream = name
        self.unix = str(tmp / "ft.sock")
        self.proc = subprocess.Popen(
            [exe, "serve", "--bind", "127.0.0.1:0", "--unix", self.unix, "--stream", name, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("listening "):
            err = self.stop()
            raise AssertionError(f"rtloop serve did not start: {line!r}; it said: {err}")
        fields = dict(w.split("=", 1) for w in line.split()[1:])
        host, port = fields["tcp"].rsplit(":", 1)
        self.host, self.port = host, int(port)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self) -> str:
        """SIGTERM, wait, return what it logged."""
        return terminate(self.proc)


@pytest.fixture
def ft_server(tmp_path: Path, make_name: Callable[[], str]) -> Iterator[FieldTripServer]:
    """A running `rtloop serve` (stopped afterwards; its stream removed)."""
    s = FieldTripServer(tmp_path, make_name())
    yield s
    s.stop()


# ---- the suite leaves no ended stream behind ----
#
# An ended stream's memory comes back without anyone naming it (docs/getting-started.md, "A
# stream's life"). Measured here on the real shared-memory directory: every stream file the
# session made that is still there at its end, and that has ended (closed, dead or damaged)
# without being made to be kept, fails the run with its name and state.

_SHM = Path(os.environ.get("RTLOOP_SHM_DIR", "/dev/shm"))


def _stream_files() -> set:
    return {p.name for p in _SHM.glob("rtloop-*")}


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config._rtloop_streams_before = _stream_files()  # type: ignore[attr-defined]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = getattr(session.config, "_rtloop_streams_before", None)
    if before is None:
        return
    try:
        _report_ended_streams(session, before)
    finally:
        if _WORKER:
            shutil.rmtree(_own, ignore_errors=True)


def _report_ended_streams(session: pytest.Session, before: set) -> None:
    new = _stream_files() - before
    if not new:
        return
    listed, _ = _rtloop.Stream.survey(False)
    left = []
    for name, state, detail, s in listed:
        if f"rtloop-{name}" not in new:
            continue
        kept = s is not None and s.keep
        if state in ("closed", "dead", "damaged") and not kept:
            left.append(f"{name}: {detail}")
    if left:
        sys.stderr.write(
            "\nended streams the test session left in "
            f"{_SHM} (their memory should have come back):\n  " + "\n  ".join(left) + "\n"
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
