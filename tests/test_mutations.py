"""The mutation check's list stays true to the code (``tools/mutations.py``): each snippet is
found once in the package, wherever its module lives, and each test a mutation names exists;
and, slowly, the check run end to end catches a few mutants without touching the checkout."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from tools.mutations import MUTATIONS, ROOT, Mutation, occurrences, pytest_args, run

BY_ID = {m.id: m for m in MUTATIONS}


def test_ids_are_unique_and_every_mutation_changes_something() -> None:
    assert len(MUTATIONS) >= 48
    assert [i for i, n in Counter(m.id for m in MUTATIONS).items() if n > 1] == []
    assert [m.id for m in MUTATIONS if m.snippet == m.replacement or not m.snippet or not m.tests] == []


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.id for m in MUTATIONS])
def test_the_snippet_occurs_once_in_the_package(mutation: Mutation) -> None:
    found = occurrences(mutation)
    assert [n for _, n in found] == [1], [(str(p.relative_to(ROOT)), n) for p, n in found]


def _collected(args: list[str]) -> set[str]:
    command = [sys.executable, "-m", "pytest", *args, "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {line for line in done.stdout.splitlines() if "::" in line}


def test_every_named_test_exists() -> None:
    """One collection for every test named without ``-k`` (a node id that names nothing fails
    it), then one for each ``-k`` selection, which must select something."""
    plain = sorted({t for m in MUTATIONS if m.k is None for t in m.tests})
    found = _collected(plain)
    for name in plain:
        assert any(item == name or item.startswith((name + "[", name + "::")) for item in found), name
    for mutation in MUTATIONS:
        if mutation.k is not None:
            assert _collected(pytest_args(mutation)), mutation.id


@pytest.mark.slow
def test_the_check_catches_mutants_in_a_copy_and_leaves_the_checkout_as_it_was() -> None:
    chosen = [BY_ID["trigger-at-room"], BY_ID["page-cap"]]  # two files, each restored
    before = {path: path.read_text(encoding="utf-8") for m in chosen for path, _ in occurrences(m)}
    assert run(chosen, echo=False) == {m.id: "caught" for m in chosen}
    assert {path: path.read_text(encoding="utf-8") for path in before} == before
    # a mutant the tests cannot see is reported missed
    same = chosen[0]
    blind = Mutation("blind", "a change that changes nothing", same.snippet, same.snippet + " or False", same.tests)
    assert run([blind], echo=False) == {"blind": "missed"}
