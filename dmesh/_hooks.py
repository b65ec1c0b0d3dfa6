"""The one upward link: how DArray reaches the op dispatcher without importing ``ops``.

``ops`` fills these in when it is imported (``dmesh/__init__.py`` imports it
last), so ``dmesh`` never imports ``ops`` at module level and the layers stay
``ops -> dmesh -> collectives``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# (ufunc, method, inputs, kwargs) -> result; installed by ops.dispatch.
dispatch_ufunc: Callable[[Any, str, tuple[Any, ...], dict[str, Any]], Any] | None = None
# (func, types, args, kwargs) -> result; installed by ops.dispatch.
dispatch_function: Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any] | None = None
# (ufunc, inputs, index of the temporary operand whose block may hold the
# result) -> result; installed by ops.dispatch (see dmesh._elision).
dispatch_donated: Callable[[Any, tuple[Any, ...], int], Any] | None = None
