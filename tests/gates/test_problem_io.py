"""The data path's helpers: mapped loads and digests give what the slow forms gave."""

from __future__ import annotations

from pathlib import Path

import torch

from gates.problem_io import (
    digest_dir,
    digest_files,
    flatten_output,
    load_values,
    output_structure,
    save_values,
)
from kernelopt.store import file_digest


def test_a_mapped_load_holds_the_saved_values_after_the_file_is_gone(tmp_path: Path) -> None:
    values = [torch.randn(64, 33), torch.arange(5), 2.5]
    path = tmp_path / "set.pt"
    save_values(path, values)
    mapped = load_values(path, mmap=True)
    path.unlink()
    assert torch.equal(mapped[0], values[0]) and torch.equal(mapped[1], values[1])
    assert mapped[2] == 2.5


def test_values_are_saved_without_checksums_and_load_all_the_same(tmp_path: Path) -> None:
    """The saves skip the zip records' CRC32 (a pass over GBs per reference), and leave
    the process's own setting as it was: another ``torch.save`` here still writes them."""
    import zipfile

    values = [torch.randn(300, 7), torch.arange(4, dtype=torch.int64)]
    plain, ours = tmp_path / "plain.pt", tmp_path / "ours.pt"
    torch.save(values, plain)
    save_values(ours, values)
    torch.save(values, tmp_path / "after.pt")
    crcs = {p.name: {i.CRC for i in zipfile.ZipFile(p).infolist()} for p in tmp_path.iterdir()}
    assert crcs["ours.pt"] == {0} and 0 not in crcs["plain.pt"] and 0 not in crcs["after.pt"]
    for mmap in (False, True):
        loaded = load_values(ours, mmap=mmap)
        assert all(torch.equal(a, b) for a, b in zip(loaded, values, strict=True))


def test_files_are_hashed_side_by_side_to_the_digests_one_by_one(tmp_path: Path) -> None:
    paths = []
    for i in range(11):  # more files than hashing threads
        path = tmp_path / f"f{i:02d}.pt"
        path.write_bytes(bytes([i]) * (1000 + 37 * i))
        paths.append(path)
    assert digest_files(paths) == [file_digest(p) for p in paths]
    assert digest_files([]) == []
    (tmp_path / "ignored.txt").write_text("not a set")
    assert digest_dir(tmp_path) == {p.name: file_digest(p) for p in paths}


def test_the_structure_keeps_the_dict_keys_the_flat_leaves_lose() -> None:
    a, b = torch.zeros(2), torch.ones(3)

    def ids(out: object) -> list[int]:
        return [id(leaf) for leaf in flatten_output(out)]

    right, swapped = {"sum": a, "max": b}, {"max": a, "sum": b}
    assert ids(right) == ids(swapped) == [id(a), id(b)]  # the leaves alone agree ...
    assert output_structure(right) != output_structure(swapped)  # ... the keys do not
    assert output_structure(right) == "{'sum':*,'max':*}"
    assert output_structure([a, b]) == output_structure((a, b)) == "(*,*)"
    assert output_structure({"x": (a, None)}) == "{'x':(*,None)}"
    assert output_structure((a, {"k": b})) != output_structure((a, b))
