"""The notebook as context in a real kernel (ipykernel, the inline matplotlib backend): every
reference form, every attachment kind (pandas, polars, a figure, a PIL image, a cell's image
output), ``--code`` as the kernel's ``set_next_input`` payload, and a turn with attachments
replayed after a restart (no model call) and sent again whole when its cell is edited."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import KernelManager

from conftest import ROOT

pytestmark = pytest.mark.slow

SETUP = [
    "%load_ext slotmagic\n%matplotlib inline",
    "import pandas as pd, polars as pl, matplotlib.pyplot as plt\nfrom PIL import Image\n"
    "df = pd.DataFrame({'rent': [900] * 12})\npf = pl.DataFrame({'x': [1, 2]})\n"
    "fig, ax = plt.subplots(figsize=(2, 1), dpi=100)\nax.axis('off')\nplt.close(fig)\n"
    "pic = Image.new('RGB', (30, 20))\nrent = 900",
    "plt.figure(figsize=(1.5, 1), dpi=100)\nplt.axis('off')\nplt.show()",  # cell 3 shows an image
    "6 * 7",  # cell 4
    "1 / 0",  # cell 5
]
TURN = "%%turn --id look --attach df,pf,fig,pic,Out[3]\nRent {rent}, {In[4]} = {Out[4]}, {_}\n{Err[5]}"
REPORT = (
    "import json, slotmagic\nm = [x for x in slotmagic.current_session().messages() if x.role == 'user'][-1]\n"
    "print(json.dumps({'text': m.content, 'images': [[i.label, i.width, i.height, i.digest] for i in m.images],"
    " 'count': len(slotmagic.current_session().messages())}))"
)


class Kernel:
    def __init__(self, env: dict[str, str]) -> None:
        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(env=env, cwd=str(ROOT))
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)

    def run(self, code: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The execute_reply's content and the outputs (stream text and display data)."""
        outputs: list[dict[str, Any]] = []
        reply = self.client.execute_interactive(
            code, store_history=True, timeout=120, output_hook=lambda msg: outputs.append(msg)
        )
        return reply["content"], outputs

    def restart(self) -> None:
        self.manager.restart_kernel(now=True)
        self.client.wait_for_ready(timeout=60)

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    env = {**os.environ, "SLOTMAGIC_DB": str(tmp_path / "state.sqlite3"), "SLOTMAGIC_SESSION": "context"}
    made = Kernel(env)
    yield made
    made.close()


def report(kernel: Kernel) -> dict[str, Any]:
    _, outputs = kernel.run(REPORT)
    text = "".join(o["content"].get("text", "") for o in outputs if o["msg_type"] == "stream")
    return json.loads(text)  # type: ignore[no-any-return]


def run_setup(kernel: Kernel) -> None:
    for cell in SETUP:
        kernel.run(cell)


def displayed(outputs: list[dict[str, Any]]) -> str:
    return "".join(o["content"]["data"].get("text/plain", "") for o in outputs if o["msg_type"] == "display_data")


def test_references_and_attachments_replay_after_a_restart(kernel: Kernel) -> None:
    run_setup(kernel)
    reply, outputs = kernel.run(TURN)
    assert reply["status"] == "ok", outputs
    first = report(kernel)
    text = first["text"]
    assert text.startswith("Rent 900, 6 * 7 = 42, 42\nZeroDivisionError: division by zero\n\nCell In[5]:")
    assert "Attached `df` (pandas DataFrame): 12 rows x 1 columns." in text
    assert "Attached `pf` (polars DataFrame): 2 rows x 1 columns." in text
    assert [i[:3] for i in first["images"][:2]] == [["fig", 200, 100], ["pic", 30, 20]]
    shown = first["images"][2]  # the plot cell 3 showed (the inline backend crops it: bbox "tight")
    assert shown[0] == "Out[3]" and 50 < shown[1] <= 150 and 50 < shown[2] <= 100
    assert f"image Out[3] (image/png {shown[1]}x{shown[2]}" in displayed(outputs)  # echo says what it received
    assert '<img class="slotmagic-thumb"' in "".join(
        o["content"]["data"].get("text/html", "") for o in outputs if o["msg_type"] == "display_data"
    )

    kernel.restart()  # the same cells again in a new kernel: the turn replays, nothing is sent
    run_setup(kernel)
    _, outputs = kernel.run(TURN)
    assert "replayed from the store, no model call" in displayed(outputs)
    again = report(kernel)
    assert again["count"] == first["count"]

    # Edited: forks, and the request carries the same attachments again.
    _, outputs = kernel.run(TURN.replace("Rent {rent}", "Rent of {rent}"))
    assert "edited: new branch" in displayed(outputs)
    edited = report(kernel)
    assert edited["text"].startswith("Rent of 900") and edited["images"] == first["images"]


def test_code_goes_to_the_front_end_as_set_next_input(kernel: Kernel) -> None:
    kernel.run("%load_ext slotmagic")
    reply, _ = kernel.run("%%turn --code\nLike this:\n```python\nprint('from the reply')\n```")
    payloads = [p for p in reply.get("payload", []) if p.get("source") == "set_next_input"]
    assert payloads and payloads[0]["text"] == "print('from the reply')" and payloads[0]["replace"] is False
