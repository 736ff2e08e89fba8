"""``session.workflows``: a session's workflows (step graphs), one of them active.

session.workflows.define("plan", "draft -> review\\nreview -> send")
session.workflows.set_status("draft", "done")
session.workflows()                     # all of them, in the order they were defined
"""

from __future__ import annotations

from collections.abc import Callable

from .._core.slots import validate_slot_id
from .._core.workflow import Workflow, check_workflow_name, no_workflow
from .._errors import ConfigError, DamagedRecord
from .._store import Store


class Workflows:
    """The workflows of one session; calling it lists them. Methods that change a step take
    ``workflow=`` (None: the active one)."""

    def __init__(self, store: Store, session_id: str) -> None:
        self.store = store
        self.session_id = session_id

    def __call__(self) -> list[Workflow]:
        """The session's workflows in the order they were defined (``.active`` marks one)."""
        return self.store.workflows(self.session_id)

    def __repr__(self) -> str:
        return f"<Workflows of {self.session_id!r}: call it to list them>"

    def get(self, name: str | None = None) -> Workflow:
        """The workflow ``name``, or the active one (an error says how to choose one)."""
        if name is None:
            return self._active()
        checked = check_workflow_name(name)
        found = {w.name: w for w in self()}
        if checked not in found:
            raise no_workflow(checked, list(found))
        return found[checked]

    def define(self, name: str, edges: str) -> Workflow:
        """Define the workflow ``name`` from an edge list (one ``a -> b [label]`` per line), or
        update it (steps that still exist keep their status), and make it the active one; the
        same edges again change nothing."""
        check_workflow_name(name)

        def define(found: Workflow | None) -> Workflow:
            if found is None:
                return Workflow.define(name, edges)
            return found if found.body == edges else found.redefine(edges)

        made = self.store.update_workflow(self.session_id, name, define, activate=True)
        assert made is not None
        return made

    def active(self) -> Workflow | None:
        """The workflow whose block requests carry, or None."""
        return self.store.active_workflow(self.session_id)

    def use(self, name: str | None) -> Workflow | None:
        """Make ``name`` the active workflow (None: none is, and requests carry no block)."""
        return self.store.use_workflow(self.session_id, None if name is None else check_workflow_name(name))

    def set_status(self, node: str, status: str, *, workflow: str | None = None) -> Workflow:
        """Set a step's status: pending, in_progress, done or blocked."""
        return self._change(workflow, lambda w: w.with_status(node, status))

    def set_current(self, node: str, *, workflow: str | None = None) -> Workflow:
        """Make ``node`` the step being worked on."""
        return self._change(workflow, lambda w: w.with_current(node))

    def attach_step(self, node: str, slot: str | None, *, workflow: str | None = None) -> Workflow:
        """Record the slot where a step is explored (None: none)."""
        if slot is not None:
            slot = self.store.slot(
                self.session_id, validate_slot_id(slot)
            ).id  # an unknown slot is refused, with a suggestion
        return self._change(workflow, lambda w: w.with_slot(node, slot))

    def delete(self, name: str | None = None) -> Workflow | None:
        """Delete a workflow (the active one by default); returns it as it was (None when it
        could not be read: a damaged workflow is deleted all the same)."""
        try:
            found: Workflow | None = self.get(name)
        except DamagedRecord as exc:  # the active one, damaged
            name, found = exc.name, None
        except ConfigError:
            damaged = [d for d in self.store.damaged_workflows(self.session_id) if d.name == name]
            if not damaged:
                raise
            found = None
        target = found.name if found is not None else name
        assert target is not None
        self.store.update_workflow(self.session_id, target, lambda _: None)
        return found

    def _active(self) -> Workflow:
        found = self.active()
        if found is None:
            known = [w.name for w in self()]
            hint = (
                f"choose one with %workflow use NAME ({', '.join(known)})"
                if known
                else "define one with %%workflow NAME"
            )
            raise ConfigError(f"no workflow is active in this session; {hint}")
        return found

    def _change(self, name: str | None, change: Callable[[Workflow], Workflow]) -> Workflow:
        target = self.get(name).name

        def apply(found: Workflow | None) -> Workflow:
            if found is None:  # deleted meanwhile
                raise no_workflow(target, [w.name for w in self()])
            return change(found)

        changed = self.store.update_workflow(self.session_id, target, apply)
        assert changed is not None
        return changed
