"""The mutation check: each invariant users rely on, broken on purpose, must fail a test.

Each :class:`Mutation` names an invariant in words, a snippet of slotmagic's source that occurs
once in the package (found by its text, wherever the module lives), what it is changed to, and
the tests that should fail. ``python tools/mutations.py`` copies the checkout to a temporary
folder, applies each mutation there in turn (the working tree is never touched), runs its tests
in one process and prints which were caught; it exits 1 when any was missed.
``tests/test_mutations.py`` keeps the list from rotting: every snippet is found once and every
test it names exists.

    python tools/mutations.py             # every mutation
    python tools/mutations.py --only ID   # one (repeatable)
    python tools/mutations.py --list      # the mutations, without running them
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "slotmagic"
TIMEOUT = 900  # seconds for one mutant's tests: a mutant that loops forever counts as caught


@dataclass(frozen=True)
class Mutation:
    id: str
    invariant: str
    snippet: str  # occurs exactly once in the package's source
    replacement: str
    tests: tuple[str, ...]  # test node ids (file::name, or a file)
    k: str | None = None  # a pytest -k expression narrowing ``tests``


def _m(id: str, invariant: str, snippet: str, replacement: str, *tests: str, k: str | None = None) -> Mutation:
    return Mutation(id, invariant, snippet, replacement, tests, k)


INV = "tests/test_invariants.py"
BOUNDS = "tests/test_limits_boundaries.py"

MUTATIONS: tuple[Mutation, ...] = (
    # -- slots and modes --------------------------------------------------------------------------
    _m(
        "focused-past-compaction",
        "a focused slot never reaches back past a compaction",
        "if start < build.start:  # never reach back",
        "if False:  # never reach back",
        f"{INV}::test_a_focused_slot_never_reaches_back_past_a_compaction",
    ),
    _m(
        "focused-drops-system",
        "a focused slot sends no system message from its history's tail",
        'tail, counts, strict=True)\n            if m.role != "system"',
        "tail, counts, strict=True)\n            if True",
        f"{INV}::test_a_focused_slot_sends_its_historys_system_message_once",
    ),
    _m(
        "focused-exclusions-shrink",
        "excluding a message never shrinks what a focused slot sends",
        "if hidden <= extra or start == 0:",
        "if True:",
        "tests/test_explore.py::test_an_excluded_message_does_not_count_against_a_focused_slot",
    ),
    _m(
        "readonly-store-append",
        "a readonly slot refuses an append in the store",
        "if writable and row.slot_config(self._live_parent(rows, row)).mode is SlotMode.READONLY:",
        "if False:",
        "tests/test_session.py::test_readonly_slot_refuses_turns_and_appends",
    ),
    _m(
        "readonly-turn-before-call",
        "a turn on a readonly slot is refused before the model is called",
        "        if slot.mode is SlotMode.READONLY:\n            raise SlotReadonly(slot.id)",
        "        pass",
        f"{INV}::test_a_turn_on_a_readonly_slot_is_refused_before_a_stream_starts",
    ),
    _m(
        "excluded-still-sent",
        "an excluded message never reaches the request",
        'return not (entry.kind == "history" and entry.position in excluded)',
        "return True",
        "tests/test_explore.py::test_an_excluded_message_is_not_in_the_view_and_stays_stored",
    ),
    _m(
        "pinned-not-brought-back",
        "a pinned message is sent even when the focused filter or a compaction left it out",
        "back = sorted(build.pinned - shown)",
        "back: list[int] = []",
        "tests/test_explore.py::test_a_pinned_message_survives_compaction_and_the_focused_filter",
    ),
    # -- forks and derive -------------------------------------------------------------------------
    _m(
        "derive-at-ignored",
        "a slot derived at an earlier point shares its parent's history only up to that point",
        "            if at is not None and at != length:\n                self._check_fork_point",
        "            if False:\n                self._check_fork_point",
        "tests/test_session.py::test_derive_at_an_earlier_point",
    ),
    _m(
        "fork-point-past-end",
        "a fork point past the parent's end is refused in one line",
        "        if not 0 <= at <= parent.length:",
        "        if not 0 <= at <= parent.length + 1:",
        f"{INV}::test_a_fork_point_past_the_parents_end_is_one_line",
    ),
    _m(
        "fork-point-mid-turn",
        "a fork point inside a turn is refused, naming the boundaries around it",
        "            return\n        before, after = self._db.execute(",
        "            return\n        return\n        before, after = self._db.execute(",
        "tests/test_bad_input.py::test_fork_points_must_be_whole_turn_boundaries",
    ),
    _m(
        "turn-on-moved-slot",
        "a turn is stored only on the history its request was made from (else it forks)",
        "raise SlotMoved(row.name)\n            return self._append(",
        "pass\n            return self._append(",
        "tests/test_concurrency.py::test_threads_on_one_slot",
    ),
    # -- compaction -------------------------------------------------------------------------------
    _m(
        "trigger-at-room",
        "the compaction trigger is strictly past the room left (a conversation of exactly the room fits)",
        "return self.conversation_used > self.history_available",
        "return self.conversation_used >= self.history_available",
        f"{INV}::test_the_compaction_trigger_is_strictly_past_the_room_left",
    ),
    _m(
        "room-ignores-reply",
        "the room for history never lets a request past the budget less the reply",
        "room = min(self.history + self.tool_results, self.request_limit(reply))",
        "room = self.history + self.tool_results",
        "tests/test_budget.py::test_the_threshold_never_lets_a_request_past_the_window_less_the_reply",
    ),
    _m(
        "room-ignores-system-side",
        "what is injected on the system side lowers the room for history",
        "return max(0, room - system_side)",
        "return max(0, room)",
        "tests/test_budget.py::test_the_threshold_is_the_history_and_tool_result_budgets_less_the_system_side",
    ),
    _m(
        "summary-over-limit-taken",
        "a model's summary longer than its limit is refused for a keyword one",
        "if made.tokens_after <= self.limit:",
        "if True:",
        f"{INV}::test_a_model_summary_over_the_limit_is_refused_for_a_keyword_one_that_fits",
    ),
    _m(
        "summary-at-limit-refused",
        "a summary exactly at its limit is taken",
        "if made.tokens_after <= self.limit:",
        "if made.tokens_after < self.limit:",
        f"{BOUNDS}::test_a_summary_exactly_at_its_limit_is_taken_one_token_over_falls_back",
    ),
    _m(
        "keyword-summary-untrimmed",
        "the keyword fallback is trimmed until it fits the limit",
        "while made.tokens_after > self.limit:  # trim",
        "while False:  # trim",
        f"{INV}::test_a_model_summary_over_the_limit_is_refused_for_a_keyword_one_that_fits",
    ),
    _m(
        "summary-limit-third",
        "a summary may cost at most a third of the room for history",
        "return max(64, min((room + view.report.system.used) // 3, (room - recall) // 2))",
        "return max(64, min((room + view.report.system.used) // 2, (room - recall) // 2))",
        f"{BOUNDS}::test_the_summary_limit_keeps_its_recall_bound",
    ),
    _m(
        "summary-limit-recall",
        "the summary limit leaves room for recall's definition beside the kept half",
        "return max(64, min((room + view.report.system.used) // 3, (room - recall) // 2))",
        "return max(64, min((room + view.report.system.used) // 3, room // 2))",
        f"{BOUNDS}::test_the_summary_limit_keeps_its_recall_bound",
    ),
    _m(
        "summary-as-long-taken",
        "a summary as long as what it replaces is refused",
        "if len(whole) >= replaced:",
        "if len(whole) > replaced:",
        f"{BOUNDS}::test_a_summary_as_long_as_what_it_replaces_is_refused_one_shorter_taken",
    ),
    _m(
        "empty-card-taken",
        "a summary with an empty card is refused",
        "if not text or card.empty:",
        "if not text:",
        f"{BOUNDS}::test_a_card_with_no_sections_is_refused",
    ),
    _m(
        "fold-restarts-at-zero",
        "a compaction folds on from where the previous one stopped",
        "start = previous.upto if previous is not None else 0\n    n = len(history)",
        "start = 0\n    n = len(history)",
        "tests/test_budgets.py::test_a_long_conversation_compacts_and_every_request_stays_within_budget",
        "tests/test_compaction_bounds.py::test_a_huge_slot_compacts_in_bounded_parts_and_loses_nothing",
    ),
    _m(
        "fold-shows-excluded",
        "an excluded message reaches no summary",
        "for p, m in zip(positions, history.messages(start, upto), strict=True) if p not in excluded]",
        "for p, m in zip(positions, history.messages(start, upto), strict=True)]",
        "tests/test_explore.py::test_an_excluded_message_reaches_no_summary_and_no_merge",
    ),
    _m(
        "compaction-start-ignored",
        "the conversation starts after the messages a compaction folded",
        "    build.start = compaction.upto\n",
        "    build.start = 0\n",
        "tests/test_budgets.py::test_manual_compaction_keeps_the_last_messages_and_the_originals",
        f"{INV}::test_a_focused_slot_never_reaches_back_past_a_compaction",
    ),
    _m(
        "compaction-replaced-count",
        "a compaction covers and counts only what the one before it left",
        "replaced=fold.upto - fold.start,\n            note=",
        "replaced=fold.upto,\n            note=",
        f"{INV}::test_a_second_compaction_replaces_only_what_the_first_left",
    ),
    # -- budgets ----------------------------------------------------------------------------------
    _m(
        "priming-not-counted",
        "the reply's priming counts as history in the budget",
        "- tool_results + build.counting.counter.priming",
        "- tool_results",
        f"{INV}::test_the_reply_priming_counts_as_history",
    ),
    _m(
        "tool-results-as-history",
        "tool results count in their own share of the budget",
        "tool_results += entry.tokens",
        "tool_results += 0",
        f"{INV}::test_tool_results_count_in_their_own_share_of_the_budget",
    ),
    _m(
        "tools-not-counted",
        "tool definitions count in the tools share and lower the threshold",
        "tools = counting.scale(counting.counter.count_tools_after(definitions, first))",
        "tools = 0",
        "tests/test_budgets.py::test_tool_definitions_count_in_the_tools_share_and_lower_the_threshold",
    ),
    _m(
        "new-message-uncounted",
        "the turn's new message counts against the budget",
        '        build.conversation.append(ViewEntry(build.new, "new"))',
        "        pass",
        f"{INV}::test_a_turns_new_message_counts_against_the_budget",
    ),
    _m(
        "max-tokens-not-lowered",
        "a max_tokens over the model's output limit is lowered, in one line",
        "if limits.output is not None and asked > limits.output:",
        "if False:",
        "tests/providers/test_providers_model_limits.py::test_max_tokens_over_the_models_output_is_lowered_with_one_line",
    ),
    _m(
        "max-tokens-no-room",
        "a max_tokens that leaves the request no room is refused naming it",
        "if budget.request_limit(asked) <= 0:",
        "if budget.request_limit(asked) < 0:",
        "tests/providers/test_providers_model_limits.py::test_a_max_tokens_that_leaves_no_room_is_refused_naming_it",
    ),
    _m(
        "reply-reserve-floor",
        "the reply takes at least the budget's reserve, more when max_tokens is larger",
        "return max(0, self.total - max(self.reserve, reply))",
        "return max(0, self.total - reply)",
        "tests/test_budget.py",
    ),
    # -- namespace --------------------------------------------------------------------------------
    _m(
        "shelve-threshold",
        "a tool result of exactly the threshold stays in the history, one byte more is kept aside",
        'len(message.content.encode("utf-8")) <= self.threshold:',
        'len(message.content.encode("utf-8")) < self.threshold:',
        f"{INV}::test_a_tool_result_of_exactly_the_threshold_stays_in_the_history",
    ),
    _m(
        "shelve-counts-characters",
        "the threshold is in bytes of UTF-8, not characters",
        'len(message.content.encode("utf-8")) <= self.threshold:',
        "len(message.content) * 2 <= self.threshold:",
        f"{BOUNDS}::test_a_result_of_exactly_the_threshold_stays_and_one_byte_more_is_kept_aside",
    ),
    _m(
        "page-cap",
        "a namespace page is capped at 50,000 characters whatever length is asked",
        "max(1, min(length, 50_000))",
        "max(1, length)",
        f"{INV}::test_a_namespace_page_is_capped_whatever_length_is_asked",
    ),
    _m(
        "namespace-other-session",
        "a reference from another session is refused",
        '"SELECT content FROM namespace WHERE session_id = ? AND key = ?"',
        '"SELECT content FROM namespace WHERE (session_id = ? OR 1 = 1) AND key = ?"',
        "tests/test_namespace.py::test_a_reference_from_another_session_is_refused",
    ),
    _m(
        "expand-any-reference",
        "a small result that only starts with a reference is exported as it is",
        "if original is not None and message.content.startswith(_reference_head(tool, key, original)):",
        "if original is not None:",
        "tests/test_namespace.py::test_a_small_result_that_starts_with_a_reference_is_exported_as_it_is",
    ),
    # -- tool-result shelving when space is short -------------------------------------------------
    _m(
        "aged-results-oldest-first",
        "when space is short, the oldest tool results are shortened first (the latest turns' last)",
        "for i, entry in enumerate(build.conversation):",
        "for i, entry in reversed(list(enumerate(build.conversation))):",
        f"{INV}::test_when_space_is_short_the_oldest_tool_result_is_shortened_first",
    ),
    _m(
        "aged-results-when-fits",
        "tool results are shortened only when the conversation is past the room",
        "    if conversation <= room:\n        return\n    # Oldest first",
        "    if conversation < 0:\n        return\n    # Oldest first",
        f"{INV}::test_when_space_is_short_the_oldest_tool_result_is_shortened_first",
    ),
    # -- working context --------------------------------------------------------------------------
    _m(
        "context-fresh-window",
        "a kind of working context rides along for the turns after it changed, then only when asked",
        "return everything or self.changed.get(kind, -1) > turn - recent",
        "return everything or self.changed.get(kind, -1) >= turn - recent",
        "tests/test_context.py::test_the_injection_rule_by_kind_and_turn",
    ),
    _m(
        "context-open-items",
        "done goals drop out of the block once no longer fresh; active ones stay",
        'shown = [g for g in self.goals if g.status == "active" or recent_item(g.changed_at)]',
        "shown = list(self.goals)",
        "tests/test_context.py::test_done_and_resolved_items_show_while_fresh_then_only_what_is_open",
    ),
    _m(
        "context-after-compaction",
        "the first request after a compaction carries the whole working context once",
        "return everything or changed_at > turn - recent",
        "return changed_at > turn - recent",
        f"{INV}::test_after_a_compaction_the_block_carries_even_a_goal_completed_long_before",
    ),
    # -- workflow DAG -----------------------------------------------------------------------------
    _m(
        "workflow-cycle",
        "a workflow cannot lead back to a step (no cycle)",
        "        if cycle is not None:\n            loop",
        "        if False:\n            loop",
        "tests/test_workflow.py::test_refusals_quote_the_line",
    ),
    _m(
        "workflow-self-loop",
        "a step cannot be its own next step",
        "        if a == b:\n",
        "        if False:\n",
        "tests/test_workflow.py::test_refusals_quote_the_line",
    ),
    _m(
        "workflow-two-levels",
        "the workflow block looks two levels ahead, no further",
        "            if depth > levels:",
        "            if depth > levels + 1:",
        "tests/test_workflow.py::test_next_steps_stop_two_levels_ahead_and_show_statuses",
    ),
    _m(
        "workflow-redefine-status",
        "redefining a workflow keeps the status of the steps that remain",
        "nodes = tuple(old.get(i, WorkflowNode(i)) for i in ids)",
        "nodes = tuple(WorkflowNode(i) for i in ids)",
        "tests/test_workflow.py::test_redefining_keeps_the_status_of_steps_that_remain",
    ),
    # -- store: undo, redo, gc ---------------------------------------------------------------------
    _m(
        "redo-drops-gathered",
        "redo carries the pins, context events and compactions gathered since the undo",
        'for table in ("marks", "context_events", "compactions"):',
        'for table in ("context_events", "compactions"):',
        f"{INV}::test_redo_keeps_the_pins_context_and_compactions_made_since_the_undo",
    ),
    _m(
        "redo-after-new-turns",
        "redo is refused once the slot had turns since the undo",
        "if row.length != row.fork_at:",
        "if False:",
        "tests/test_explore.py::test_after_undo_a_new_turn_continues_and_redo_is_refused",
    ),
    _m(
        "undo-too-many",
        "undo refuses more turns than the slot has",
        "if not 1 <= turns <= len(records):",
        "if not 1 <= turns:",
        "tests/test_explore.py::test_undo_mistakes_are_one_line",
    ),
    _m(
        "gc-takes-undo-reach",
        "gc keeps a deleted ancestor's rows that an undo step still reaches",
        "                if row.live or row.undo is not None:\n                    for piece",
        "                if row.live:\n                    for piece",
        f"{INV}::test_gc_keeps_what_an_undo_step_reaches_in_a_deleted_ancestor",
    ),
    _m(
        "gc-takes-parents",
        "gc keeps a deleted slot's rows that a live slot still reaches",
        "reach[piece.key] = max(reach.get(piece.key, 0), piece.hi)",
        "reach[piece.key] = 0",
        "tests/test_explore.py::test_gc_after_deleting_branches_frees_space_and_keeps_what_is_reachable",
    ),
    _m(
        "refused-store-writes",
        "a store that refuses writes (read-only file, damage found, a view) stores nothing",
        "            if self.refusal is not None:\n                raise StoreError(self.refusal)\n"
        "            self._generation += 1",
        "            self._generation += 1",
        "tests/test_files.py::test_a_read_only_store_opens_for_reading_and_refuses_writes_in_one_line",
        "tests/test_files.py::test_damage_found_by_a_read_stops_every_write",
    ),
    _m(
        "state-file-private",
        "the state file slotmagic creates is private (0600)",
        "os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))",
        "os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))",
        "tests/test_files.py::test_folders_and_files_slotmagic_creates_are_private",
    ),
    _m(
        "search-like-wildcards",
        "% and _ are literal in the search of messages not indexed yet",
        r'.replace("%", "\\%").replace("_", "\\_")',
        "",
        f"{INV}::test_a_percent_sign_is_literal_in_the_search_of_messages_not_indexed",
    ),
    # -- sanitizing stored data and rendering replies ---------------------------------------------
    _m(
        "stored-text-unescaped",
        "text in a stored output is escaped again when shown",
        "self._out.append(html.escape(data, quote=False))",
        "self._out.append(data)",
        "tests/test_stored_data.py::test_nothing_of_a_hostile_html_can_run_or_reach_out",
    ),
    _m(
        "stored-script-kept",
        "a script (and the like) in a stored output is dropped with all it holds",
        "        if tag in _DROPPED:\n            self._skipping.append(tag)\n            return",
        "        if False:\n            return",
        "tests/test_stored_data.py::test_what_a_dropped_tag_holds_is_left_out_with_it",
    ),
    _m(
        "stored-link-scheme",
        "a stored link keeps only http(s), mailto or relative targets",
        "return value if scheme is None or scheme.group(1).lower() in _LINKS else None",
        "return value",
        "tests/test_stored_data.py::test_nothing_of_a_hostile_html_can_run_or_reach_out",
    ),
    _m(
        "stored-attribute-quoted",
        "a kept attribute's value is escaped",
        "parts.append(f'{name}=\"{html.escape(kept, quote=True)}\"')",
        "parts.append(f'{name}=\"{kept}\"')",
        "tests/test_stored_data.py::test_nothing_of_a_hostile_html_can_run_or_reach_out",
    ),
    _m(
        "stored-kinds",
        "only the kinds of output slotmagic shows are kept from a stored record",
        "if isinstance(image, str) and _BASE64.fullmatch(image):",
        "if isinstance(image, str):",
        "tests/test_stored_data.py::test_a_bundle_keeps_only_what_slotmagic_shows",
    ),
    _m(
        "reply-raw-html",
        "model text never runs as HTML: raw HTML in a reply is escaped",
        'MarkdownIt("commonmark", {"html": False})',
        'MarkdownIt("commonmark", {"html": True})',
        "tests/test_markdown.py::test_markup_in_a_reply_is_shown_as_text",
    ),
    # -- API keys ---------------------------------------------------------------------------------
    _m(
        "redact-pieces",
        "a word holding a long piece of a key is redacted too",
        "if any(p in m[0] for p in pieces) else m[0]",
        "if False else m[0]",
        "tests/test_tools_run.py::test_an_error_quoting_a_secret_cut_short_is_redacted",
    ),
    _m(
        "redact-environment",
        "keys named in the environment are redacted from a third party's text",
        "for secret in (*secrets, *environment_secrets()):",
        "for secret in secrets:",
        "tests/test_tools_run.py::test_an_error_quoting_a_secret_of_the_environment_is_redacted",
    ),
    _m(
        "url-password-shown",
        "a URL's password is shown nowhere",
        'return (scheme + sep if sep else "") + "***@" + rest.rpartition("@")[2]',
        "return text",
        f"{INV}::test_a_urls_password_is_shown_in_no_refusal",
    ),
    # -- replay of magics -------------------------------------------------------------------------
    _m(
        "replay-edited-as-same",
        "an edited %%turn forks; only an unchanged one replays",
        "return found.record.info.cell is not None and found.record.info.cell.same_text(cell)",
        "return found.record.info.cell is not None",
        "tests/test_replay.py::test_edited_cell_forks_a_sibling_before_its_earlier_turn",
    ),
    _m(
        "replay-reads-out-of-order",
        "a read-only command shows the session as of its cell only while Run All retraces the run",
        '        if kind == "reads" and not follows:\n            return None',
        "        pass",
        "tests/test_cell_records.py",
    ),
    _m(
        "replay-restores-slot",
        "a replayed change restores the current slot it left",
        "                self._store.set_current_slot(self._session_id, record.current)",
        "                pass",
        "tests/test_cell_records.py",
    ),
    # -- token counting ---------------------------------------------------------------------------
    _m(
        "message-framing",
        "each message costs its framing tokens besides role and content",
        "_MESSAGE_FRAMING = 3  #",
        "_MESSAGE_FRAMING = 2  #",
        "tests/tokens/test_accuracy.py",
    ),
    _m(
        "reply-priming",
        "a request's reply priming is 3 tokens (2 for harmony models)",
        "return 2 if self._harmony else 3",
        "return 2 if self._harmony else 2",
        "tests/tokens/test_accuracy.py",
    ),
    _m(
        "tool-result-name",
        "a tool result is counted with the name of the tool it answers",
        'sender = f"functions.{tool_name or _UNKNOWN_TOOL_NAME} to=assistant"',
        'sender = f"functions.{_UNKNOWN_TOOL_NAME} to=assistant"',
        "tests/tokens/test_accuracy.py",
    ),
    _m(
        "images-counted",
        "a message's images are counted by its provider's rule",
        "        if message.images:\n            tokens += self.count_images(message)",
        "        if False:\n            tokens += self.count_images(message)",
        "tests/test_images.py::test_the_budget_counts_the_image",
        "tests/test_images.py::test_each_model_counts_an_image_by_its_providers_rule",
    ),
    # -- provider request limits ------------------------------------------------------------------
    _m(
        "images-count-limit",
        "a request over the API's count of images is refused before anything is sent",
        "if limits.count is not None and len(images) > limits.count:",
        "if limits.count is not None and len(images) > limits.count + 1:",
        "tests/providers/test_providers_image_limits.py::test_over_the_count_is_refused_before_anything_is_sent",
    ),
    _m(
        "images-many-rule",
        "more than 20 images in an Anthropic request take at most 2,000 px a side",
        "if limits.many is not None and count > limits.many[0]:",
        "if False:",
        "tests/providers/test_providers_image_limits.py::test_anthropic_many_images_take_2000_px",
    ),
    _m(
        "images-bytes-limit",
        "an image over its API's bytes limit is downscaled",
        "(size is not None and len(image.data) > size)",
        "(size is not None and len(image.data) > 2 * size)",
        "tests/providers/test_providers_image_limits.py::test_anthropic_five_megabytes_an_image",
    ),
)


# -- finding and applying -----------------------------------------------------------------------


def sources(root: Path) -> Iterator[Path]:
    """The package's Python files under ``root``."""
    for path in sorted((root / PACKAGE).rglob("*.py")):
        if "__pycache__" not in path.parts:
            yield path


def occurrences(mutation: Mutation, root: Path = ROOT) -> list[tuple[Path, int]]:
    """Each file holding the snippet, with how many times it does."""
    found = []
    for path in sources(root):
        n = path.read_text(encoding="utf-8").count(mutation.snippet)
        if n:
            found.append((path, n))
    return found


def located(mutation: Mutation, root: Path) -> Path:
    """The one file holding the snippet once; ValueError when it is not exactly one place."""
    found = occurrences(mutation, root)
    if len(found) != 1 or found[0][1] != 1:
        where = ", ".join(f"{p.relative_to(root)} ({n} times)" for p, n in found) or "nowhere"
        raise ValueError(f"{mutation.id}: the snippet must occur once in {PACKAGE}/, found {where}")
    return found[0][0]


def pytest_args(mutation: Mutation) -> list[str]:
    return [*mutation.tests, *(["-k", mutation.k] if mutation.k else [])]


def _copy(into: Path) -> Path:
    """The checkout, without what git ignores or tests never read, copied under ``into``."""
    tree = into / "tree"
    skip = shutil.ignore_patterns(
        ".git", "__pycache__", "node_modules", ".ci", "_build", ".mypy_cache", ".ruff_cache", ".hypothesis", "lib"
    )
    shutil.copytree(ROOT, tree, ignore=skip, symlinks=True)
    return tree


def _run_tests(tree: Path, mutation: Mutation) -> int | None:
    """pytest's exit code for the mutation's tests in ``tree`` (None: it ran past the timeout)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", *pytest_args(mutation), "-n", "0", "-x", "-q", "-p", "no:cacheprovider"]
    try:
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None
    return done.returncode


def verdict(code: int | None) -> str:
    """caught (a test failed, or collection did, or it hung), missed (all passed), or error
    (the selection ran nothing, or pytest was used wrongly)."""
    if code is None:
        return "caught (timeout)"
    if code in (1, 2):
        return "caught"
    if code == 0:
        return "missed"
    return f"error (pytest exit {code})"


def run(mutations: Sequence[Mutation], *, echo: bool = True) -> dict[str, str]:
    """Each mutation applied alone to one copy of the checkout (restored after it), its tests run:
    the verdict by id."""
    results: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="slotmagic-mutants-") as folder:
        tree = _copy(Path(folder))
        for mutation in mutations:
            try:
                path = located(mutation, tree)
            except ValueError as exc:
                results[mutation.id] = f"error ({exc})"
            else:
                original = path.read_text(encoding="utf-8")
                path.write_text(original.replace(mutation.snippet, mutation.replacement, 1), encoding="utf-8")
                try:
                    results[mutation.id] = verdict(_run_tests(tree, mutation))
                finally:
                    path.write_text(original, encoding="utf-8")
            if echo:
                print(f"{mutation.id:<28} {results[mutation.id]}", flush=True)
    return results


# -- the command --------------------------------------------------------------------------------


def _table(mutations: Sequence[Mutation], results: dict[str, str]) -> str:
    width = max(len(m.id) for m in mutations)
    lines = [f"{'mutation':<{width}}  {'result':<16}  invariant"]
    lines += [f"{m.id:<{width}}  {results[m.id]:<16}  {m.invariant}" for m in mutations]
    caught = sum(r.startswith("caught") for r in results.values())
    missed = sum(r == "missed" for r in results.values())
    errors = len(results) - caught - missed
    lines.append(f"{caught} of {len(results)} caught, {missed} missed" + (f", {errors} errors" if errors else ""))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Break each invariant on purpose and check a test fails.")
    parser.add_argument("--only", action="append", metavar="ID", help="run this mutation only (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the mutations and their tests, run nothing")
    args = parser.parse_args(argv)
    chosen = list(MUTATIONS)
    if args.only:
        known = {m.id for m in MUTATIONS}
        unknown = [i for i in args.only if i not in known]
        if unknown:
            parser.error(f"no mutation {', '.join(unknown)} (see --list)")
        chosen = [m for m in MUTATIONS if m.id in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.id}: {m.invariant}\n    tests: {' '.join(pytest_args(m))}")
        return 0
    results = run(chosen)
    print()
    print(_table(chosen, results))
    return 0 if all(r.startswith("caught") for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
