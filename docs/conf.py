"""Sphinx configuration for dmesh's documentation (``make docs``).

The pages are Markdown (MyST) and reStructuredText; the API reference is
generated from the docstrings with autodoc (NumPy-style sections through
napoleon). ``make docs`` builds with warnings as errors and nitpicky
cross-references: a reference to a dmesh name that is not documented fails
the build. Names of other projects (NumPy, mpi4py, CuPy, the standard
library) are not checked: resolving them would need intersphinx inventories
from the internet, which CI does not have.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

# Document the checkout being built (its dmesh/ folder), whatever is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

project = "dmesh"
author = "the dmesh authors"
copyright = "the dmesh authors"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path: list[str] = []

# GitHub-style anchors on Markdown headings, so that docs/*.md#section links
# work the same on the hosting site and in the HTML build.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# Defaults as written in the source: ``comm=MPI.COMM_WORLD``, not the object's repr
# (``<mpi4py.MPI.Intracomm object at 0x...>``, which breaks the signature parser).
autodoc_preserve_defaults = True
autodoc_default_options = {"members": True, "show-inheritance": False}
napoleon_google_docstring = False
napoleon_numpy_docstring = True
# Parameter and return types stay text: they are written for readers
# ("int | tuple[int, ...]", {"cpu", "cuda"}), not as cross-reference targets.
napoleon_use_param = False
napoleon_use_rtype = False

# Names outside dmesh are not checked (no intersphinx inventories offline).
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|np|mpi4py|MPI|cupy|typing|typing_extensions|collections|types)(\..*)?"),
    (r"py:.*", r"(int|float|complex|bool|str|bytes|object|tuple|list|dict|set|frozenset)"),
    (r"py:.*", r"(None|Any|Callable|Iterable|Iterator|Sequence|Mapping|Hashable|Self)"),
    (r"py:.*", r"(ArrayLike|DTypeLike|NDArray|ndarray|Path|PathLike|os\..*|pathlib\..*)"),
    (r"py:.*", r"(Exception|ValueError|TypeError|NotImplementedError|RuntimeError|OSError)"),
    (r"py:.*", r"(contextlib|functools|dataclasses|enum|abc|builtins|threading)\..*"),
    # Internal types that appear only in the signatures of constructors users
    # never call (DeviceMesh is made by init_mesh, AsyncArray by async_op=True)
    # or of debug-tool callbacks.
    (r"py:class", r"dmesh\.(communicators\.MeshFamily|collectives\.async_array\.Pending)"),
    (r"py:class", r"dmesh\.darray\.Redistribution"),
    # What tracing.direct(record=False) hands back to tracing.record_direct.
    (r"py:class", r"dmesh\.collectives\._calls\.Call"),
    (r"py:.*", r"dmesh\.ops\.compiler\.api\.R"),  # the compiled function's result type
    # The Array API namespace's result types (named tuples, finfo/iinfo objects):
    # the standard documents them; the namespace page lists the groups only.
    (r"py:class", r"dmesh\.array_api\.\w+\.\w+(Result|_object)"),
]
# Docstrings to fix at their source (then drop these): the sentence after the
# Raises sections of save_checkpoint and load_checkpoint reads as an exception
# name; tracing.direct names the module flag ``hooked``, which has no docs entry.
nitpick_ignore: list[tuple[str, str]] = []


def _documented(env: BuildEnvironment) -> dict[int, str]:
    """id of each documented Python object -> the name it is documented under."""
    found: dict[int, str] = {}
    for name, *_ in env.get_domain("py").get_objects():
        obj = _lookup(name)
        if obj is not None:
            found.setdefault(id(obj), name)
    return found


def _lookup(dotted: str) -> Any:
    """The object a dotted name points at, or None."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                obj = getattr(obj, attribute)
        except AttributeError:
            return None
        return obj
    return None


def _unique_short_name(env: BuildEnvironment, target: str) -> str | None:
    """The one documented name ending in ``.target`` (``UnsupportedError``), or None."""
    suffix = "." + target
    names = (name for name, *_ in env.get_domain("py").get_objects())
    matches = {name for name in names if name.endswith(suffix)}
    objects = {id(_lookup(name)) for name in matches}
    return min(matches) if matches and len(objects) == 1 else None


def _resolve_alias(
    app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.Element
) -> nodes.Element | None:
    """Resolve ``dmesh.mesh.DeviceMesh`` to where it is documented, ``dmesh.DeviceMesh``.

    Type hints name objects by their defining module; the reference documents
    them where users import them. The same object is the same target. A bare
    name (``UnsupportedError`` in a Raises section) resolves when exactly one
    documented object has it.
    """
    target = node.get("reftarget", "").lstrip("~")
    if node.get("refdomain") != "py":
        return None
    if "." not in target:  # a bare name in a docstring: the one documented object so named
        name = _unique_short_name(env, target)
    elif target.startswith("dmesh."):
        obj = _lookup(target)
        name = None if obj is None else _documented(env).get(id(obj))
    else:
        return None
    if name is None or name == target:
        return None
    py = env.get_domain("py")
    return py.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], name, node, contnode)


def _prose_first_line(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    """Undo napoleon's reading of a property's first line as ``type: description``.

    dmesh's property docstrings are prose ("The global description: mesh,
    layout, dtype") and their types come from the annotations; napoleon turns
    the words before the first colon into a ``:type:`` field. Runs after
    napoleon: a multi-word "type" goes back in front of its description.
    """
    if what not in ("property", "attribute", "data"):
        return
    for i, line in enumerate(lines):
        words = line[len(":type: ") :] if line.startswith(":type: ") else ""
        if " " in words and not re.search(r"[\[|]", words):
            del lines[i]
            first = next((j for j, text in enumerate(lines) if text.strip()), None)
            if first is None:
                lines.append(words)
            else:
                lines[first] = f"{words}: {lines[first]}"
            return


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the alias resolver and the property-docstring fix (after napoleon's 500)."""
    app.connect("missing-reference", _resolve_alias)
    app.connect("autodoc-process-docstring", _prose_first_line, priority=600)
    return {"parallel_read_safe": True}
