from pathlib import Path

import pytest

from kernelopt.contracts import ArtifactRef
from kernelopt.store import ArtifactError, open_store


def test_put_get_roundtrip_is_content_addressed(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    a = store.put_text("kernel source", name="k.py")
    b = store.put_text("kernel source")
    assert a.sha256 == b.sha256
    assert store.get_text(a) == "kernel source"
    assert a.size == len("kernel source")
    # no temp files left behind by the atomic write
    assert not list(tmp_path.rglob(".tmp-*"))


def test_corrupted_artifact_is_refused(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    ref = store.put_bytes(b"\x00" * 64)
    blob = tmp_path / ref.sha256[:2] / ref.sha256
    blob.write_bytes(b"\x01" * 64)
    with pytest.raises(ArtifactError, match="corrupt"):
        store.get_bytes(ref)


def test_missing_artifact_is_a_clear_error(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    ghost = ArtifactRef(sha256="ab" * 32, size=1)
    with pytest.raises(ArtifactError, match="not in"):
        store.get_bytes(ghost)


def test_models_roundtrip_through_json(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    ref = store.put_text("x")
    again = store.put_json(ref)
    assert store.get_model(again, ArtifactRef) == ref


def test_artifacts_are_owner_only_unless_a_shared_group_is_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Candidate code and other users must not read kernels and weights (docs/security.md);
    workers of one group on a shared volume opt in with KERNELOPT_SHARED_GROUP."""
    store = open_store(tmp_path / "private")
    ref = store.put_bytes(b"kernel", name="k.py")
    assert (tmp_path / "private" / ref.sha256[:2] / ref.sha256).stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv("KERNELOPT_SHARED_GROUP", "1")
    shared = open_store(tmp_path / "shared")
    ref = shared.put_bytes(b"shared kernel", name="k.py")
    assert (tmp_path / "shared" / ref.sha256[:2] / ref.sha256).stat().st_mode & 0o777 == 0o640
