"""The notebook as a turn's context, in a real IPython shell: ``{references}`` filled from the
user namespace (``In``/``Out``/``Err``, ``_``/``__``), ``--raw`` and the session setting,
attachments of each kind, ``--error`` and ``%slot explain``, ``--code`` and ``%slot code``, and
the opt-in ``read_variable`` tool. A reference or attachment that cannot be made stops the cell
with one line: nothing sent, nothing stored."""

from __future__ import annotations

import io
from typing import Any

import pytest
from IPython.core.error import UsageError
from PIL import Image as PILImage

from slotmagic import Session
from slotmagic._magics.references import fill, split_names


def session(ip: Any) -> Session:
    from slotmagic._magics import current_session

    return current_session()


def run(ip: Any, cell: str) -> Any:
    return ip.run_cell(cell, store_history=True)


def sent(ip: Any) -> str:
    """The last user message stored: what the model was sent."""
    user = [m for m in session(ip).messages() if m.role == "user"]
    return user[-1].content


def test_names_and_expressions_are_filled_in(ip: Any) -> None:
    run(ip, "rent = 900\nitems = ['a', 'b']")
    run(ip, "%%turn\nRent {rent}, twice {rent * 2:,}, items {len(items)}: {items!r}; {{literal}} and }}")
    assert sent(ip) == "Rent 900, twice 1,800, items 2: ['a', 'b']; {literal} and }"


def test_in_out_underscores_and_err_name_cells(ip: Any) -> None:
    first = run(ip, "6 * 7").execution_count
    run(ip, "'second'")
    with pytest.raises(ZeroDivisionError):
        run(ip, "ratio = 1 / 0")
    failed = ip.execution_count - 1
    run(ip, f"%%turn\nIn: {{In[{first}]}} Out: {{Out[{first}]}} last: {{_}} before: {{__}}\n{{Err[{failed}]}}")
    text = sent(ip)
    assert text.startswith("In: 6 * 7 Out: 42 last: second before: 42\nZeroDivisionError: division by zero")
    assert f"Cell In[{failed}]:\n```python\nratio = 1 / 0\n```" in text
    assert "\x1b[" not in text  # ANSI stripped


@pytest.mark.parametrize(
    ("cell", "line"),
    [
        ("{undefined_name}", "{undefined_name}: undefined_name is not defined; nothing was sent"),
        ("{1 / 0}", "{1 / 0} failed: ZeroDivisionError: division by zero; nothing was sent"),
        ("{Err[999]}", "{Err[999]}: cell 999 raised no error (cells that did: none so far); nothing was sent"),
    ],
)
def test_a_reference_that_fails_stops_the_cell_in_one_line(ip: Any, cell: str, line: str) -> None:
    with pytest.raises(UsageError) as refused:
        run(ip, f"%%turn\n{cell}")
    assert line in str(refused.value) and "\n" not in str(refused.value)
    assert session(ip).messages() == []  # nothing sent, nothing stored


def test_braces_around_what_is_no_expression_stay_as_written(ip: Any) -> None:
    """JSON, prose in braces, a brace left open or a lone one: text, not references."""
    run(ip, '%%turn\ncall f {"number": 3} {two words} {\n"a": 1\n} and { open and } alone')
    assert sent(ip) == 'call f {"number": 3} {two words} {\n"a": 1\n} and { open and } alone'


def test_raw_and_the_setting_send_the_text_as_written(ip: Any) -> None:
    run(ip, '%%turn --raw\nJSON like {"a": {undefined}}')
    assert sent(ip) == 'JSON like {"a": {undefined}}'
    run(ip, "%config SlotMagic.interpolate = False")
    run(ip, "%%turn\nstill {undefined}")
    assert sent(ip) == "still {undefined}"


def test_the_filled_text_is_stored_and_replayed_as_sent(ip: Any) -> None:
    """A re-run with the same filled text replays; a changed value is an edited cell (fork)."""
    run(ip, "n = 1")
    run(ip, "%%turn --id q\nn is {n}")
    run(ip, "%%turn --id q\nn is {n}")
    assert ip.user_ns["_"].replayed and len(session(ip).messages()) == 2
    run(ip, "n = 2")
    run(ip, "%%turn --id q\nn is {n}")
    reply = ip.user_ns["_"]
    assert not reply.replayed and reply.forked_from is not None and sent(ip) == "n is 2"


def test_attachments_of_every_kind(ip: Any) -> None:
    import matplotlib

    matplotlib.use("Agg")
    run(
        ip,
        "import pandas as pd, polars as pl, matplotlib.pyplot as plt\n"
        "from PIL import Image\n"
        "df = pd.DataFrame({'city': ['Oslo'] * 30, 'rent': range(30)})\n"
        "pf = pl.DataFrame({'x': list(range(12)), 'y': ['v'] * 12})\n"
        "fig, ax = plt.subplots(figsize=(3, 2), dpi=100)\n"
        "pic = Image.new('RGB', (50, 40))\n"
        "notes = 'word ' * 2000",
    )
    run(ip, "%%turn --attach df,pf,ax,pic,notes,df.shape\nLook")
    user = [m for m in session(ip).messages() if m.role == "user"][-1]
    text = user.content
    assert "Attached `df` (pandas DataFrame): 30 rows x 2 columns.\nColumns: city (object), rent (int64)." in text or (
        "Attached `df` (pandas DataFrame): 30 rows x 2 columns.\nColumns: city (str), rent (int64)." in text
    )
    assert "| 29 | Oslo | 29 |" in text and "| … 20 more rows … |" in text
    assert "Attached `pf` (polars DataFrame): 12 rows x 2 columns.\nColumns: x (Int64), y (String)." in text
    assert "Attached `notes` (text, 10,000 characters; its beginning)" in text
    assert "Attached `df.shape` (tuple):\n```\n(30, 2)\n```" in text
    assert [(i.label, i.width, i.height) for i in user.images] == [("ax", 300, 200), ("pic", 50, 40)]  # its figure
    # The whole table and the whole text are in the namespace store, for read_namespace.
    ref = next(line.split(" is kept at ")[1].split(";")[0] for line in text.splitlines() if "table as CSV" in line)
    page = session(ip).history.read_namespace(ref)
    assert "city,rent" in page and "29,Oslo,29" in page
    assert "- its parts: text (" in ip.user_ns["_"].text  # echo says what it received


def test_show_lists_a_messages_images(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(ip, "from PIL import Image\npic = Image.new('RGB', (8, 6))")
    run(ip, "%%turn --attach pic\nLook")
    capsys.readouterr()
    run(ip, "%slot show")
    assert "    [image pic: image/png 8x6, " in capsys.readouterr().out


def test_a_cells_image_output_is_attached_by_out(ip: Any) -> None:
    """``Out[n]`` of a cell that showed an image (a plot displayed, not returned)."""
    buffer = io.BytesIO()
    PILImage.new("RGB", (20, 10)).save(buffer, format="PNG")
    ip.user_ns["png_bytes"] = buffer.getvalue()
    shown = run(ip, "from IPython.display import Image, display\ndisplay(Image(png_bytes))").execution_count
    run(ip, f"%%turn --attach Out[{shown}]\nWhat does it show?")
    user = [m for m in session(ip).messages() if m.role == "user"][-1]
    assert [(i.label, i.width, i.height) for i in user.images] == [(f"Out[{shown}]", 20, 10)]
    with pytest.raises(UsageError, match=r"--attach Out\[9999\]: cell 9999 has no output and showed no image"):
        run(ip, "%%turn --attach Out[9999]\nx")
    with pytest.raises(UsageError, match=r"--attach \{missing\}: missing is not defined"):
        run(ip, "%%turn --attach missing\nx")


def test_error_and_explain_ask_about_the_last_exception(ip: Any) -> None:
    with pytest.raises(KeyError):
        run(ip, "prices = {'rent': 900}\ndef cost(d):\n    return d['deposit']\ncost(prices)")
    run(ip, "%%turn --error\nWhy?")
    text = sent(ip)
    assert text.startswith("Why?\n\nKeyError: 'deposit'")
    assert "  Cell In[" in text and "    return d['deposit']" in text
    assert "Variables it names:\n- prices: dict, length 1: {'rent': 900}\n- d: dict, length 1: {'rent': 900}" in text
    run(ip, "%slot explain")
    assert sent(ip).startswith("Explain this error: what went wrong, and how to fix it.\n\nKeyError: 'deposit'")
    with pytest.raises(UsageError, match=r"^cell 1 raised no error"):
        run(ip, "%slot explain 1")


def test_ansi_colours_in_an_error_are_stripped(ip: Any) -> None:
    """Libraries colour their messages; the model reads them plain."""
    with pytest.raises(ValueError):
        run(ip, "raise ValueError('\\x1b[31mdeposit\\x1b[0m is \\x1b[1mgone\\x1b[0m')")
    run(ip, "%%turn --error\nWhy?")
    assert sent(ip).startswith("Why?\n\nValueError: deposit is gone\n")


def test_explain_with_no_error_says_so(ip: Any) -> None:
    with pytest.raises(UsageError, match="no cell has raised an exception in this kernel yet"):
        run(ip, "%slot explain")
    with pytest.raises(UsageError, match="--error: no cell has raised"):
        run(ip, "%%turn --error\nwhy")
    assert session(ip).messages() == []


def test_code_goes_into_the_next_cell(ip: Any) -> None:
    ip.rl_next_input = None
    run(ip, "%%turn --code\nPlease:\n```python\nprint('one')\n```\nand\n```\nprint('two')\n```")
    assert ip.rl_next_input == "print('one')"
    ip.rl_next_input = None
    run(ip, "%slot code --block 2")
    assert ip.rl_next_input == "print('two')"
    ip.rl_next_input = None
    run(ip, "%%turn\nno code here")
    run(ip, "%slot code")
    assert ip.rl_next_input is None


def test_read_variable_is_offered_only_when_asked(ip: Any) -> None:
    run(ip, "deposit = {'amount': 1800}")
    run(ip, '%%turn\ncall read_variable {{"name": "deposit"}}')
    assert not ip.user_ns["_"].steps and all(m.role != "tool" for m in session(ip).messages())  # not offered
    run(ip, '%%turn --read-vars\ncall read_variable {{"name": "deposit"}}')
    reply = ip.user_ns["_"]
    assert "read_variable: deposit: dict, length 1: {'amount': 1800}" in reply.text
    run(ip, '%%turn --read-vars\ncall read_variable {{"name": "__import__(\'os\')"}}')
    assert "is not a variable name" in ip.user_ns["_"].text


def test_fill_and_split_names_directly() -> None:
    assert fill("{a['}']}", {"a": {"}": 1}}) == "1"
    assert split_names("df, fig ,Out[7], d[1,2]") == ["df", "fig", "Out[7]", "d[1,2]"]


def test_read_variable_per_slot_and_from_python(tmp_path: Any) -> None:
    """A slot whose tools name read_variable offers it on every turn; from Python it reads the
    namespace given to allow_variables, and without one a turn asking for it is refused."""
    from slotmagic._errors import ConfigError

    with Session.open("vars", db_path=tmp_path / "s.db") as plain:
        with pytest.raises(ConfigError, match="allow_variables"):
            plain.submit_turn('call read_variable {"name": "rent"}', read_variables=True)
        assert plain.messages() == []
        plain.options.allow_variables({"rent": 900})
        plain.configure_slot(tools=["read_variable"])
        reply = plain.submit_turn('call read_variable {"name": "rent"}')
        assert "- read_variable: rent: int: 900" in reply.text


def test_an_image_shown_after_magic_cells_is_still_attached_by_out(ip: Any) -> None:
    """A magic's capture and a widget's silent re-run put back the image recorder's hook
    instead of dropping it with their own (they used to: every image after them went unseen)."""
    run(ip, "%slot list")
    run(ip, "%slot tree")
    buffer = io.BytesIO()
    PILImage.new("RGB", (12, 7)).save(buffer, format="PNG")
    ip.user_ns["png_bytes"] = buffer.getvalue()
    shown = run(ip, "from IPython.display import Image, display\ndisplay(Image(png_bytes))").execution_count
    run(ip, f"%%turn --attach Out[{shown}]\nAnd this one?")
    user = [m for m in session(ip).messages() if m.role == "user"][-1]
    assert [(i.width, i.height) for i in user.images] == [(12, 7)]


def test_unloading_gives_the_shell_its_own_publish_back(ip: Any) -> None:
    import slotmagic

    run(ip, "%slot list")
    slotmagic.unload_ipython_extension(ip)
    assert "publish" not in ip.display_pub.__dict__
    slotmagic.load_ipython_extension(ip)
    assert ip.display_pub.__dict__["publish"].__self__.__class__.__name__ == "KernelCells"
