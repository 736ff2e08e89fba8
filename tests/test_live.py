"""Live across kernels: two kernels (two processes) on one session, in a SQLite file and in a
PostgreSQL schema. A change made in one reaches the other's widgets and sidebar without a cell
running there (``PRAGMA data_version`` asked four times a second; LISTEN/NOTIFY), and its
``%slot list``. The tests wait for each update rather than time it: a busy machine brings it
late, never wrong."""

from __future__ import annotations

import os
import queue
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager, start_new_kernel

pytestmark = pytest.mark.slow


@pytest.fixture
def kernels(store_target: str) -> Iterator[tuple[BlockingKernelClient, BlockingKernelClient]]:
    env = {**os.environ, "SLOTMAGIC_DB": store_target, "SLOTMAGIC_SESSION": "shared", "SLOTMAGIC_MODEL": "echo"}
    started: list[tuple[KernelManager, BlockingKernelClient]] = []
    try:
        for _ in range(2):
            started.append(start_new_kernel(kernel_name="python3", env=env))
        yield started[0][1], started[1][1]
    finally:
        for manager, client in started:
            client.stop_channels()
            manager.shutdown_kernel(now=True)


def run(client: BlockingKernelClient, code: str) -> tuple[str, list[dict[str, Any]]]:
    """Run a cell; its stdout, and every iopub message it sent."""
    msg_id = client.execute(code)
    out, seen = "", []
    while True:
        msg = client.get_iopub_msg(timeout=60)
        seen.append(msg)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
            out += msg["content"]["text"]
        if msg["msg_type"] == "error":
            raise AssertionError("\n".join(msg["content"]["traceback"]))
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return out, seen


def comm_data(client: BlockingKernelClient, comm_id: str, until: float) -> Iterator[dict[str, Any]]:
    """What the kernel sends on one comm (without a cell running there), until the deadline."""
    while (left := until - time.monotonic()) > 0:
        try:
            msg = client.get_iopub_msg(timeout=left)
        except queue.Empty:
            return
        if msg["msg_type"] == "comm_msg" and msg["content"].get("comm_id") == comm_id:
            yield msg["content"]["data"]


class TreeState:
    """The tree widget's state as its view holds it: the whole tree (``nodes``) as last sent,
    and the slots that changed since (``changed``), which the view shows in their place."""

    def __init__(self, comm_id: str, seen: list[dict[str, Any]]) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.changed: dict[str, Any] = {}
        for m in seen:  # the comm's opening state, then the updates sent in the same cell
            if m["msg_type"] in ("comm_open", "comm_msg") and m["content"].get("comm_id") == comm_id:
                self.apply(m["content"]["data"].get("state", {}))

    def apply(self, state: dict[str, Any]) -> bool:
        if "nodes" not in state and "changed" not in state:
            return False
        self.nodes, self.changed = state.get("nodes", self.nodes), state.get("changed", self.changed)
        return True

    def updates(self, client: BlockingKernelClient, comm_id: str, until: float) -> Iterator[list[dict[str, Any]]]:
        """The nodes shown after each update the kernel sends."""
        for data in comm_data(client, comm_id, until):
            if self.apply(data.get("state", {})):
                yield [self.changed.get(n["id"], n) for n in self.nodes]


def sidebar_states(client: BlockingKernelClient, comm_id: str, until: float) -> Iterator[dict[str, Any]]:
    """The states the kernel pushes to the sidebar's comm."""
    return (data for data in comm_data(client, comm_id, until) if data.get("type") == "state")


def test_a_turn_in_one_kernel_reaches_the_others_tree_and_list(
    kernels: tuple[BlockingKernelClient, BlockingKernelClient],
) -> None:
    writer, watcher = kernels
    run(writer, "%load_ext slotmagic")
    _, seen = run(watcher, "%load_ext slotmagic\n%slot tree")
    (comm_id,) = [
        m["content"]["comm_id"]
        for m in seen
        if m["msg_type"] == "comm_open" and "nodes" in m["content"]["data"].get("state", {})
    ]
    tree = TreeState(comm_id, seen)
    # a cell's tree is as of its cell; "follow live" (here from Python) makes it follow
    run(watcher, "from slotmagic.widgets import live_widgets\nlive_widgets().widgets()[-1].follow()")

    run(writer, "%%turn\nhello from the other kernel")
    deadline = time.monotonic() + 30  # an update, however late a busy machine brings it
    nodes = next(
        (n for n in tree.updates(watcher, comm_id, deadline) if n and n[0]["messages"] == 2),
        None,
    )
    assert nodes is not None, "the watcher's tree did not follow the other kernel's turn"
    assert nodes[0]["last_user"] == "hello from the other kernel"

    run(writer, "%slot derive elsewhere")
    deadline = time.monotonic() + 30
    names = next(
        ({n["id"] for n in nodes} for nodes in tree.updates(watcher, comm_id, deadline) if len(nodes) == 2),
        None,
    )
    assert names == {"default", "elsewhere"}, "a derive in the other kernel did not reach the tree"

    listing, _ = run(watcher, "%slot list")
    assert "elsewhere" in listing
    default = next(line for line in listing.splitlines() if " default " in f" {line} ")
    assert default.split()[-2] == "2"  # messages

    run(writer, "%slot switch default\n%slot delete elsewhere")
    deadline = time.monotonic() + 30
    left = next((n for n in tree.updates(watcher, comm_id, deadline) if len(n) == 1), None)
    assert left is not None and left[0]["id"] == "default", "a switch and delete did not reach the tree"


def test_the_sidebar_follows_another_kernels_turn(kernels: tuple[BlockingKernelClient, BlockingKernelClient]) -> None:
    writer, watcher = kernels
    run(writer, "%load_ext slotmagic")
    run(watcher, "%load_ext slotmagic")
    comm_id = uuid.uuid4().hex  # what the Slots panel does: open a comm to the kernel's target
    opening = watcher.session.msg("comm_open", {"comm_id": comm_id, "target_name": "slotmagic.sidebar", "data": {}})
    watcher.shell_channel.send(opening)
    first = next(sidebar_states(watcher, comm_id, time.monotonic() + 30), None)
    assert first is not None and first["slots"][0]["messages"] == 0

    run(writer, "%%turn\nseen in the panel")
    deadline = time.monotonic() + 30
    state = next((s for s in sidebar_states(watcher, comm_id, deadline) if s["slots"][0]["messages"] == 2), None)
    assert state is not None, "the watcher's sidebar did not follow the other kernel's turn"
    assert state["slots"][0]["last_user"] == "seen in the panel"
