"""Every public module, class, function, method and property has a docstring."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

PACKAGES = ("dmesh",)  # dmesh.collectives and dmesh.ops are walked as subpackages


def _public_modules() -> list[ModuleType]:
    modules = []
    for package in PACKAGES:
        root = importlib.import_module(package)
        modules.append(root)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if not any(part.startswith("_") for part in info.name.split(".")[1:]):
                modules.append(importlib.import_module(info.name))
    return modules


def _undocumented(module: ModuleType) -> list[str]:
    missing = [] if module.__doc__ else [module.__name__]
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    for name in names:
        obj = getattr(module, name, None)
        if getattr(obj, "__module__", None) != module.__name__:
            continue  # documented where it is defined
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if not inspect.getdoc(obj):
            missing.append(f"{module.__name__}.{name}")
        if inspect.isclass(obj):
            for attr, value in vars(obj).items():
                member = value.fget if isinstance(value, property) else value
                if attr.startswith("_") or not callable(member):
                    continue
                if not inspect.getdoc(getattr(obj, attr, None)) and not member.__doc__:
                    missing.append(f"{module.__name__}.{name}.{attr}")
    return missing


@pytest.mark.parametrize("module", _public_modules(), ids=lambda m: m.__name__)
def test_public_names_have_docstrings(module: ModuleType) -> None:
    """Pure introspection, the same on every rank: no collective verdict needed."""
    assert _undocumented(module) == []
