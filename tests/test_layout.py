"""The tests mirror the source layout (tests/README.md): each test file is where its module is.

A unit test of ``X/Y/z.py`` lives in ``tests/X/Y/`` (``test_z.py``, or ``test_z_<aspect>.py``);
suites that exercise many modules at once live in the cross-cutting folders named below,
and helpers, data and problem files in the folders that hold no tests of their own.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

# Folders of the repository that tests/ mirrors: a test folder names one of their packages.
MIRRORED = ("kernelopt", "gates", "activities", "workflows", "scripts")
# Suites across many modules, by what they exercise (each one is described in tests/README.md).
CROSS_CUTTING = ("e2e", "durability", "security", "deploy", "problems")
# Helpers, data and recorded histories: no test files here.
NO_TESTS = ("support", "fixtures", "histories")
# Modules beside test files in a mirrored folder (helpers belong in tests/support).
ALLOWED_BESIDE_TESTS = ("__init__.py", "conftest.py")


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def test_every_top_level_folder_is_mirrored_cross_cutting_or_support() -> None:
    known = set(MIRRORED) | set(CROSS_CUTTING) | set(NO_TESTS)
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders <= known, f"unplaced folders under tests/: {sorted(folders - known)}"


def test_every_test_file_sits_where_its_module_is() -> None:
    misplaced = []
    for path in _test_files():
        rel = path.relative_to(TESTS)
        top = rel.parts[0]
        if len(rel.parts) == 1:  # tests/test_<m>.py: a top-level module (worker.py), or this file
            module = path.stem.removeprefix("test_").split("_")[0]
            if path.name != "test_layout.py" and not (ROOT / f"{module}.py").is_file():
                misplaced.append(f"{rel}: no top-level module {module}.py")
        elif top in MIRRORED:
            source = ROOT / rel.parent
            if not (source / "__init__.py").is_file():
                misplaced.append(f"{rel}: {rel.parent}/ is not a package of the repository")
        elif top not in CROSS_CUTTING:
            misplaced.append(f"{rel}: {top}/ holds no tests (see tests/README.md)")
    assert not misplaced, "\n".join(misplaced)


def test_mirrored_folders_hold_only_tests() -> None:
    """Helpers shared by tests go to tests/support, data to tests/fixtures or tests/problems."""
    extra = [
        str(path.relative_to(TESTS))
        for top in MIRRORED
        if (TESTS / top).is_dir()
        for path in sorted((TESTS / top).rglob("*"))
        if path.is_file()
        and "__pycache__" not in path.parts
        and not path.name.startswith("test_")
        and path.name not in ALLOWED_BESIDE_TESTS
    ]
    assert not extra, f"not tests, in a mirrored folder: {extra}"


def test_test_folders_are_packages() -> None:
    """``__init__.py`` everywhere, so test files of one basename in two folders do not clash."""
    missing = sorted(
        {
            str(folder.relative_to(TESTS))
            for path in _test_files()
            for folder in path.relative_to(TESTS).parents
            if str(folder) != "." and not (TESTS / folder / "__init__.py").is_file()
        }
    )
    assert not missing, f"test folders without __init__.py: {missing}"


def test_readme_names_every_cross_cutting_folder() -> None:
    readme = (TESTS / "README.md").read_text(encoding="utf-8")
    missing = [
        f"tests/{name}/" for name in CROSS_CUTTING + NO_TESTS if f"tests/{name}/" not in readme
    ]
    assert not missing, f"tests/README.md does not describe {missing}"
