"""No module imports a private module (``_name``) of a package it is not part of.

What another layer needs is public API of its layer (STYLE.md): ``dmesh``
and ``ops`` use ``dmesh.collectives`` through its public modules, never
``dmesh.collectives._common`` and the like. The check reads the sources (the
AST of every module of the three packages and of ``scripts/``), so a new
private import across packages fails here, in one process, before review.
Tests are not checked: they may test a package's internals directly.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.pure

ROOT = Path(__file__).resolve().parents[2]
# Where each package's sources live in the repository (collectives/ and ops/
# install as dmesh.collectives and dmesh.ops).
PACKAGES = {"dmesh": ROOT / "dmesh", "dmesh.collectives": ROOT / "collectives",
            "dmesh.ops": ROOT / "ops"}  # fmt: skip


def _modules() -> Iterator[tuple[str, Path]]:
    """(dotted name, path) of every module of the packages, and of each script."""
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            if package == "dmesh" and path.relative_to(folder).parts[0] in ("collectives", "ops"):
                continue  # the symbolic links: walked under their own names
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ".".join((package, *parts)), path
    for path in sorted((ROOT / "scripts").rglob("*.py")):
        yield f"scripts.{path.stem}", path


def _imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every module or name ``tree`` imports, relative ones resolved."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([base] if base else []))
            yield node.lineno, base
            for alias in node.names:  # `from pkg import _private` imports a module too
                yield node.lineno, f"{base}.{alias.name}"


def _is_module(name: str) -> bool:
    """Whether ``name`` is a module or package of ours (not a function imported by name)."""
    package = max((p for p in PACKAGES if name == p or name.startswith(p + ".")), key=len,
                  default=None)  # fmt: skip
    if package is None:
        return False
    path = PACKAGES[package].joinpath(*name[len(package) + 1 :].split(".") if name != package
                                      else ())  # fmt: skip
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _private_owner(name: str) -> str | None:
    """The package whose private module ``name`` is (``a.b._c.d`` -> ``a.b``), or None."""
    parts = name.split(".")
    for k, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:k]) if k else None
    return None


def test_no_private_module_is_imported_across_packages() -> None:
    found = []
    for module, path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for line, name in _imported(tree, module, path.name == "__init__.py"):
            owner = _private_owner(name)
            if owner is None or not owner.startswith("dmesh") or not _is_module(name):
                continue
            if module == owner or module.startswith(owner + "."):
                continue  # a package's own private modules
            found.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not found, (
        "private modules imported from outside their package (make what is needed public "
        "API of that package):\n" + "\n".join(found)
    )


def test_the_check_sees_a_private_import() -> None:
    # The check itself: both import forms are found, a package's own are allowed.
    source = "from dmesh.collectives._common import as_array\nfrom dmesh.collectives import _eager"
    names = [n for _, n in _imported(ast.parse(source), "dmesh.convert", False)]
    private = [n for n in names if _private_owner(n) and _is_module(n)]
    assert private == ["dmesh.collectives._common", "dmesh.collectives._eager"], private
    assert _private_owner("dmesh.collectives.gathers") is None
    assert _private_owner("dmesh._hooks") == "dmesh"  # dmesh.ops is inside dmesh: allowed
