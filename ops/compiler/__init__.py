"""``dmesh.compile``: trace a function on spec-only stand-ins, agree the plan, replay it.

The modules, one job each: :mod:`.signature` (the cache key of a call),
:mod:`.trace` (stand-ins and the recording hooks), :mod:`.agreement` (one
collective comparing the ranks' plans), :mod:`.replay` (the plan as one
function over blocks) and :mod:`.api` (the cached wrapper).
"""

from dmesh.ops.compiler.api import Compiled, compile
from dmesh.ops.compiler.errors import PlanMismatchError, ReplayError

__all__ = ["Compiled", "PlanMismatchError", "ReplayError", "compile"]
