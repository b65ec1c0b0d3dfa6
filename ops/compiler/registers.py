"""The names of a generated plan (``dmesh.ops.compiler.replay``): freed, then few.

A plan is one generated Python function, a line per op (``v5 = f3(v3, v4)``).
Each block's name is deleted right after its last use, so the blocks of results
no later op reads are freed as eagerly (the allocator hands them to the next
results) instead of living to the plan's end, and the names are renamed onto as
few locals as are alive at once.
"""

from __future__ import annotations

import re

__all__ = ["released"]

_NAME = re.compile(r"\b(?:v\d+|m\d+|h_m\d+)\b")


def released(lines: list[str]) -> list[str]:
    """``lines`` (a generated plan's, its signature first) with each block's name deleted
    right after its last use, so that the blocks of results no later op reads are freed
    as they are eagerly (the allocator hands them to the next results), not held to the
    plan's end; a block a started collective reads lives until its wait. The names are
    then renamed onto as few locals as are alive at once (:func:`_registers`)."""
    uses: list[set[str]] = []
    defs: list[set[str]] = []
    for line in lines:
        code = line.split("  #", 1)[0]
        left, _, right = code.partition(" = ") if " = " in code else ("", "", code)
        uses.append(set(_NAME.findall(right)))
        defs.append(set(_NAME.findall(left)))
    # Locals only: the arguments and what the plan assigns (constants are globals).
    local = set(_NAME.findall(lines[0])).union(*defs)
    sending = {h: uses[i] for i in range(len(lines)) for h in defs[i] if h.startswith("h_")}
    live: set[str] = set()
    dead_after: dict[int, list[str]] = {}
    for i in range(len(lines) - 1, 0, -1):  # (line 0: the signature)
        used = set(uses[i])
        for h in used & sending.keys():  # its wait: what the start sends is still in use
            used |= sending[h]
        gone = sorted(((used | defs[i]) & local) - live)
        if gone and not lines[i].lstrip().startswith("return"):
            dead_after[i] = gone
        live = (live - defs[i]) | used
    return _registers(lines, defs, dead_after)


def _registers(
    lines: list[str], defs: list[set[str]], dead_after: dict[int, list[str]]
) -> list[str]:
    """``lines`` with their blocks' names renamed onto registers ``v0, v1...``: a register
    freed after a name's last use is taken by the next name defined. A plan of a long
    trace then has a frame of a few locals, not one per op (CPython 3.11 and later give
    a frame too big for the thread's data-stack chunk a chunk of its own, and then every
    Python call it makes, a closure per indexing node, maps and unmaps another one)."""
    registers: dict[str, str] = {}
    free: list[str] = []
    count = [0]

    def take(name: str) -> None:
        if name.startswith("h_"):  # a started collective's handle keeps its name
            return
        if free:
            registers[name] = free.pop()
        else:
            registers[name] = f"v{count[0]}"
            count[0] += 1

    def renamed(text: str) -> str:
        return _NAME.sub(lambda m: registers.get(m.group(0), m.group(0)), text)

    for name in _NAME.findall(lines[0]):
        take(name)
    out = [renamed(lines[0])]
    for i in range(1, len(lines)):
        code, sep, comment = lines[i].partition("  #")
        left, eq, right = code.partition(" = ") if " = " in code else ("", "", code)
        right = renamed(right)  # (read before this line's names take registers)
        dying = dead_after.get(i, [])
        freed = [registers.pop(n) for n in dying if n not in defs[i] and n in registers]
        free.extend(freed)
        for name in sorted(defs[i]):
            if name not in registers:
                take(name)
        left = renamed(left)
        out.append(left + eq + right + sep + comment)
        unused = [registers.pop(n) for n in dying if n in defs[i] and n in registers]
        free.extend(unused)
        gone = [r for r in freed if r in free] + unused
        if gone:
            out.append(f"    del {', '.join(sorted(gone))}")
    return out
