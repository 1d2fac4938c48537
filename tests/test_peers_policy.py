"""The rule for optional peers: skipped locally, a failure naming the package in CI."""

from __future__ import annotations

import pytest

from _peers import need


def test_a_missing_peer_fails_when_peers_are_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RTLOOP_REQUIRE_PEERS", "1")
    with pytest.raises(pytest.fail.Exception, match="no_such_peer_xyz.*'some-package'.*python-dev.sh"):
        need("no_such_peer_xyz", "some-package")


def test_a_missing_peer_skips_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RTLOOP_REQUIRE_PEERS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="some-package"):
        need("no_such_peer_xyz", "some-package")


def test_a_present_peer_is_imported() -> None:
    assert need("json", "stdlib").dumps([1]) == "[1]"
