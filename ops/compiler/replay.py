"""Replay: run a recorded plan straight on the blocks.

A ``Plan`` is the nodes of a trace turned into one generated Python
function over blocks (``v3 = f3(v0, v1)``, ``v4 = r4(f4, [v3], k4)``): no
parsing, no propagation, no cache lookup and no DArray between ops. Operands
whose recorded decision moves them are redistributed
(``DArray.with_layout``) where the node needs them; the outputs are wrapped
once, with the recorded specs.

The first run after tracing is *checked* (``Plan.run_checked``): it walks
the nodes one by one and compares each block's dtype with the traced one,
the ranks vote on the outcome, and a difference raises
``dmesh.ops.compiler.errors.ReplayError`` on every rank.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from dmesh.collectives.agreement import raise_if_any_failed
from dmesh.core.layout import Layout
from dmesh.core.spec import DArraySpec
from dmesh.darray import DArray
from dmesh.ops.compiler.errors import ReplayError
from dmesh.ops.compiler.trace import Trace

__all__ = ["Plan"]


def _move(block: Any, spec: DArraySpec, target: Layout) -> Any:
    """``block`` (of an array of ``spec``) in ``target``'s layout (collective)."""
    return DArray(block, spec).with_layout(target).local


def _as_block(result: Any) -> Any:
    """A 0-d result as an array, as the pipeline's wrap makes it (NumPy gives scalars)."""
    if type(result) is not np.ndarray and (
        isinstance(result, np.generic) or not hasattr(result, "shape")
    ):
        return np.asarray(result)
    return result


class Plan:
    """The replayable form of a trace: inputs, nodes, outputs and the generated function."""

    def __init__(self, trace: Trace, arguments: int, outputs: list[int]) -> None:
        # Every slot's spec (constants' slots hold none and are never moved nor wrapped).
        self.specs = cast(list[DArraySpec], list(trace.specs))
        self.constants = dict(trace.constants)
        self.nodes = list(trace.nodes)
        self.arguments = arguments
        self.outputs = outputs
        self.function = self._generate()

    def _generate(self) -> Callable[..., tuple[Any, ...]]:
        """One Python function from the argument blocks to the output blocks."""
        space: dict[str, Any] = {"_move": _move, "_as_block": _as_block}
        for slot, value in self.constants.items():
            space[f"v{slot}"] = value
        lines = [f"def plan({', '.join(f'v{i}' for i in range(self.arguments))}):"]
        for k, node in enumerate(self.nodes):
            names = []
            for j, (slot, target) in enumerate(zip(node.slots, node.moves)):
                if target is None:
                    names.append(f"v{slot}")
                else:
                    space[f"s{k}_{j}"] = self.specs[slot]
                    space[f"t{k}_{j}"] = target
                    lines.append(f"    m{k}_{j} = _move(v{slot}, s{k}_{j}, t{k}_{j})")
                    names.append(f"m{k}_{j}")
            space[f"f{k}"] = node.func
            run = node.step.run
            if run is None:
                call = f"f{k}({', '.join(names)})"
            else:
                space[f"r{k}"] = run
                space[f"c{k}"] = node.step.call
                call = f"r{k}(f{k}, [{', '.join(names)}], c{k})"
            if node.spec.ndim == 0:
                call = f"_as_block({call})"
            lines.append(f"    v{node.out} = {call}")
        lines.append(f"    return ({''.join(f'v{s}, ' for s in self.outputs)})")
        exec("\n".join(lines), space)
        function: Callable[..., tuple[Any, ...]] = space["plan"]
        return function

    def run(self, blocks: list[Any]) -> tuple[Any, ...]:
        """The output blocks for the argument ``blocks`` (collective where operands move)."""
        return self.function(*blocks)

    def run_checked(self, blocks: list[Any], comm: Any) -> tuple[Any, ...]:
        """``run`` node by node, checking each block's dtype; the ranks vote (collective)."""
        values: dict[int, Any] = dict(enumerate(blocks))
        values.update(self.constants)
        error: Exception | None = None
        for node in self.nodes:
            operands = [
                values[s] if t is None else _move(values[s], self.specs[s], t)
                for s, t in zip(node.slots, node.moves)
            ]
            run = node.step.run
            result = _as_block(
                node.func(*operands) if run is None else run(node.func, operands, node.step.call)
            )
            if error is None and result.dtype != node.spec.dtype:
                error = ReplayError(
                    f"compiled {node.label}: the block has dtype {result.dtype}, tracing "
                    f"predicted {node.spec.dtype}; use the function uncompiled"
                )
            values[node.out] = result
        raise_if_any_failed(comm, error, "compile", kinds=(ReplayError,))
        return tuple(values[s] for s in self.outputs)

    def wrap(self, blocks: tuple[Any, ...]) -> list[DArray]:
        """The output DArrays of ``blocks`` with the recorded specs."""
        return [DArray(b, self.specs[s]) for b, s in zip(blocks, self.outputs)]
