"""Every name of the Array API standard (2024.12) is in ``dmesh.array_api`` with the
standard's signature (issue 15, item 4): the reference is ``array_api_strict`` at the
2024.12 revision (names of later revisions that it also exports are left out). Parameter
names, kinds (positional-only, keyword-only) and defaults must match; annotations may
differ."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest

import dmesh.array_api as dx

xs = pytest.importorskip("array_api_strict")

# array_api_strict's own helpers, and names of later revisions than 2024.12.
_NOT_STANDARD = {
    "ArrayAPIStrictFlags", "Device", "get_array_api_strict_flags", "reset_array_api_strict_flags",
    "set_array_api_strict_flags", "__version__", "isin", "broadcast_shapes",
}  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _revision() -> Iterator[None]:
    xs.set_array_api_strict_flags(api_version="2024.12")
    yield
    xs.reset_array_api_strict_flags()


def _names(module: Any) -> list[str]:
    return sorted(set(module.__all__) - _NOT_STANDARD)


def _shape(func: Any) -> list[tuple[str, Any]]:
    return [(p.name, p.kind) for p in inspect.signature(func).parameters.values()]


def _defaults_agree(mine: Any, reference: Any) -> bool:
    """Equal defaults; array_api_strict's ``Undef`` sentinel stands for None, and a
    parameter it gives no default (``expand_dims``'s ``axis``, 0 in the 2024.12 text)
    may have one here."""
    for ours, theirs in zip(inspect.signature(mine).parameters.values(),
                            inspect.signature(reference).parameters.values()):  # fmt: skip
        want = None if type(theirs.default).__name__ == "Undef" else theirs.default
        if theirs.default is not inspect.Parameter.empty and ours.default != want:
            return False
    return True


def _cases() -> list[tuple[str, str]]:
    return [("", n) for n in _names(xs)] + [
        (ext, n) for ext in ("linalg", "fft") for n in _names(getattr(xs, ext))
    ]


@pytest.mark.parametrize(("extension", "name"), _cases(), ids=lambda v: v or "main")
def test_name_and_signature(extension: str, name: str) -> None:
    ours = getattr(dx, extension) if extension else dx
    theirs = getattr(xs, extension) if extension else xs
    assert hasattr(ours, name), f"dmesh.array_api{'.' + extension if extension else ''}.{name}"
    mine, reference = getattr(ours, name), getattr(theirs, name)
    if inspect.isfunction(reference):
        message = f"{name}{inspect.signature(mine)} != {inspect.signature(reference)}"
        assert _shape(mine) == _shape(reference), message
        assert _defaults_agree(mine, reference), message
    elif isinstance(reference, (int, float)) and not isinstance(reference, bool):
        assert mine == reference or (mine != mine and reference != reference)
