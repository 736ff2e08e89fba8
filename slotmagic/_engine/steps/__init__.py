"""The steps of the view pipeline: what a step is, and the steps that live in a module of their own.

A step is a function over a :class:`~slotmagic._engine.view.view.ViewBuild`, made a :class:`Step`
by :func:`step`, which names the inputs it reads (fields of
:class:`~slotmagic._engine.view.inputs.ViewInputs`). The inputs are the key a preview is kept under,
so a step that read something else would leave previews stale: ``tests/test_view_inputs.py``
runs every step and checks it reads only what it declares. Adding a step is one module here
and one line in ``pipeline.STEPS`` (see docs/development.md, "How to add a view step").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..view.inputs import INPUTS
from ..view.view import ViewBuild

Run = Callable[[ViewBuild], None]


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the view pipeline: its ``name``, the inputs it ``reads``, what it does."""

    name: str
    reads: frozenset[str]
    run: Run

    def __call__(self, build: ViewBuild) -> None:
        self.run(build)


def step(*reads: str) -> Callable[[Run], Step]:
    """``@step("config", "source")`` over a function makes it a step that reads those inputs;
    a name that is not an input is refused when the module is imported."""
    unknown = sorted(set(reads) - INPUTS)
    if unknown:
        raise TypeError(f"a view step reads only fields of ViewInputs ({', '.join(sorted(INPUTS))}), not {unknown}")

    def make(run: Run) -> Step:
        return Step(run.__name__, frozenset(reads), run)

    return make
