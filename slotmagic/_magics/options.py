"""Settings of the magics: traitlets set with ``%config SlotMagic.<name> = ...`` or, before the
extension loads, with ``SLOTMAGIC_<NAME>`` environment variables. ``%config SlotMagic`` lists
them with this help text.

Provider settings become the session's ``ProviderSettings``; their traits are made from the
specs (:data:`~slotmagic.providers._settings.GENERAL_SETTINGS`, and every non-secret setting of
every registered provider), so a provider's registration is all it takes. API keys are not
settings (a key typed on a ``%config`` line would be saved in the notebook): they come from the
environment only, which a notebook sets unseen: ``os.environ["OPENAI_API_KEY"] = getpass.getpass()``.

No setting can break the extension:

- a bad ``SLOTMAGIC_*`` variable stops ``%load_ext`` with one line naming the variable and a
  value that works (:func:`check_environment`), before anything is registered;
- a ``%config`` value that is refused is reported in one line and dropped from the shell's
  config, so it does not come back at the next ``%reload_ext``; one that got there anyway (a
  config file) is ignored at load with one warning line.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from traitlets import Bool, CaselessStrEnum, CFloat, CInt, Dict, TraitError, TraitType, Unicode, default, validate
from traitlets.config import Config, Configurable

from .._core.checks import check_text
from .._core.secrets import masked_url
from .._core.users import current_user
from .._errors import ConfigError, SlotMagicError
from .._store.urls import is_postgres_url, parse_postgres_url
from ..providers import REGISTRY, parse_model
from ..providers._registry import SettingSpec
from ..providers._settings import GENERAL_SETTINGS, GeneralSetting, Number, ProviderSettings
from ..tools._mcp_config import server_config

logger = logging.getLogger("slotmagic")

STREAM_THROTTLE = GeneralSetting(
    "stream_throttle",
    Number("a number of seconds >= 0", minimum_allowed=True),
    0.1,
    "0.5",
    "Seconds between display updates while a reply streams, so a long reply costs a bounded "
    "number of re-renders; a reply complete sooner is shown once.",
    env="SLOTMAGIC_STREAM_THROTTLE",
)
# The numeric settings: the provider's (timeouts, retries, limits) and the magics' own.
NUMBERS: dict[str, GeneralSetting] = {
    s.name: s for s in (*GENERAL_SETTINGS, STREAM_THROTTLE) if s.config and s.kind is not None
}
URLS: dict[str, SettingSpec] = {s.name: s for s in REGISTRY.settings() if not s.secret}
PROVIDER_FIELDS = (*URLS, *(s.name for s in GENERAL_SETTINGS if s.config))

# Each setting's environment variable; SLOTMAGIC_DB predates the others and stays short.
ENVIRONMENT = {
    "model": "SLOTMAGIC_MODEL",
    "db_path": "SLOTMAGIC_DB",
    "session_id": "SLOTMAGIC_SESSION",
    "notebook": "SLOTMAGIC_NOTEBOOK",
    "system": "SLOTMAGIC_SYSTEM",
    "stream": "SLOTMAGIC_STREAM",
    "widgets": "SLOTMAGIC_WIDGETS",
    **{name: spec.env for name, spec in NUMBERS.items() if spec.env},
}
_FALSE = {"0", "false", "no", "off"}


def _env(name: str) -> str | None:
    value = os.environ.get(ENVIRONMENT[name])
    return value if value else None


def environment_value(spec: GeneralSetting) -> Any:
    """The value ``spec``'s ``SLOTMAGIC_*`` variable gives, or its default when unset."""
    text = os.environ.get(spec.env or "")
    if not text or not text.strip():
        return spec.default
    assert spec.kind is not None
    try:
        return spec.kind.parse(text)
    except ValueError:
        raise ConfigError(
            f"{spec.env}={text!r} cannot be used: {spec.name} must be {spec.kind.what}; "
            f"set e.g. {spec.env}={spec.example}, or unset it"
        ) from None


def check_environment() -> None:
    """Raise ``ConfigError`` for the first ``SLOTMAGIC_*`` variable that holds no valid value."""
    for spec in NUMBERS.values():
        if spec.env:
            environment_value(spec)
    current_user()  # SLOTMAGIC_USER: one line, as user= is


class MaskedURL(str):
    """A URL setting's value: a ``str`` whose ``repr`` hides credentials, so ``%config
    SlotMagic`` and ``%config SlotMagic.openai_base_url`` never print them."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(masked_url(str(self)))


class MaskedServers(dict):  # type: ignore[type-arg]
    """``mcp_servers``' value: a dict whose ``repr`` hides the values of ``env`` and ``headers``."""

    def __repr__(self) -> str:
        return repr({name: _masked_server(s) if isinstance(s, dict) else s for name, s in self.items()})


def _masked_server(server: Any) -> Any:
    hidden = ("env", "headers")
    return {k: ({n: "***" for n in v} if k in hidden and isinstance(v, dict) else v) for k, v in server.items()}


def _number_trait(spec: GeneralSetting) -> TraitType[Any, Any]:
    assert spec.kind is not None
    text = spec.help + (f" Env: {spec.env}." if spec.env else "")
    if spec.kind.integer:
        return CInt(help=text).tag(config=True)
    if spec.kind.off_at_zero:
        return CFloat(help=text, allow_none=True).tag(config=True)
    return CFloat(help=text).tag(config=True)


def _number_default(spec: GeneralSetting) -> Any:
    def read(self: Any) -> Any:
        try:
            return environment_value(spec)
        except ConfigError:  # check_environment reports it at load time
            return spec.default

    return default(spec.name)(read)


def _provider_traits() -> dict[str, Any]:
    """The traits (and dynamic defaults) of the provider settings and the stream throttle."""
    traits: dict[str, Any] = {}
    for name, setting in URLS.items():
        traits[name] = Unicode(help=setting.help).tag(config=True)
    for name, spec in NUMBERS.items():
        if name != STREAM_THROTTLE.name:  # declared in the class, for the code that reads it
            traits[name] = _number_trait(spec)
        traits[f"_default_{name}"] = _number_default(spec)
    traits["prices"] = Dict(help=next(s.help for s in GENERAL_SETTINGS if s.name == "prices")).tag(config=True)
    return traits


class SlotMagicOptions(Configurable):
    model = Unicode(
        help="The model for %%turn: provider:model (openai:gpt-4o-mini, anthropic:..., "
        "ollama:...) or echo, the offline test model. Env: SLOTMAGIC_MODEL.",
    ).tag(config=True)

    db_path = Unicode(
        help="The SQLite state file; empty means .slotmagic/state.sqlite3 in the kernel's "
        "working directory (beside the notebook); ':memory:' keeps nothing; a "
        "postgresql://USER@HOST/DB?schema=NAME URL shares sessions between kernels and hosts "
        "(pip install 'slotmagic[postgres]'; the password in ~/.pgpass or PGPASSWORD). Env: SLOTMAGIC_DB.",
    ).tag(config=True)

    session_id = Unicode(
        help="The session to open; empty means the notebook's path when the kernel knows it, "
        "else a new id (see %slot session). Env: SLOTMAGIC_SESSION.",
    ).tag(config=True)

    notebook = Unicode(
        help="This notebook's name, for runs whose front end sends no cell ids (jupyter nbconvert "
        "--execute, papermill): cells run again are recognised by it (empty: the notebook's path "
        "when the kernel knows it, else the cells run before). Env: SLOTMAGIC_NOTEBOOK.",
    ).tag(config=True)

    readonly = Bool(
        False,
        help="Open the session read-only: a view of another person's session, followed live, that "
        "refuses every write in one line (%slot session NAME --readonly sets it, %slot session NAME clears it).",
    ).tag(config=True)

    user = Unicode(
        help="The user name recorded with each turn; empty means $SLOTMAGIC_USER, else JupyterHub's "
        "$JUPYTERHUB_USER, else the OS user.",
    ).tag(config=True)

    system = Unicode(
        help="The default system prompt for slots that have none of their own. Env: SLOTMAGIC_SYSTEM.",
    ).tag(config=True)

    stream = Bool(
        help="Show replies while they stream (--no-stream on a %%turn line turns it off for "
        "one turn). Env: SLOTMAGIC_STREAM=0 to turn it off.",
    ).tag(config=True)

    stream_throttle = _number_trait(STREAM_THROTTLE)

    widgets = Bool(
        help="Show %slot tree, preview and budget as live widgets (they follow the session after "
        "every cell); False prints their text forms. Env: SLOTMAGIC_WIDGETS=0 to turn them off.",
    ).tag(config=True)

    interpolate = Bool(
        True,
        help="Fill {name} and {expression} references in %%turn cells from the user namespace (In[n], "
        "Out[n], Err[n], _ and __ among them; {{ and }} are literal braces). False sends cells as written; "
        "%%turn --raw does so for one cell.",
    ).tag(config=True)

    context_windows = Dict(
        help="Context windows, in tokens, that win over the model data (genai-prices, an Ollama server): "
        "{'openai:my-model': 32768, 'ollama:*': 8192}. A slot without a budget of its own splits "
        "its model's window (system, history, tools, tool results, reserve).",
    ).tag(config=True)

    max_tool_rounds = CInt(
        8,
        help="How many rounds of tool calls one %%turn may take (model → calls → results → model) "
        "before it stops with a note; the partial work is stored.",
    ).tag(config=True)

    prompt_cache = Bool(
        True,
        help="Mark each request's stable prefix (system side, tool definitions, history) for the "
        "provider's prompt cache: Anthropic cache_control breakpoints. Cached tokens and the money "
        "saved show in the turn footer and in %slot budget.",
    ).tag(config=True)

    namespace_threshold = CInt(
        2048,
        help="Tool results larger than this many bytes are kept aside in the namespace store; the "
        "model sees a namespace:// reference and a preview, and can page through them with read_namespace.",
    ).tag(config=True)

    working_context_turns = CInt(
        3,
        allow_none=True,
        help="For how many turns a change to a slot's goals, decisions or open questions (%ctx) is "
        "sent with its requests; the current step is sent with every request, and everything once "
        "after a compaction. 0: only the step (and after a compaction). None: no working context is "
        "sent at all (%ctx off does so for one slot).",
    ).tag(config=True)

    auto_compact = CaselessStrEnum(
        ["on", "ask", "off"],
        "on",
        help="What a turn does when its slot's conversation passes the compaction threshold: 'on' "
        "compacts first (a line before the reply says so), 'ask' stops with the numbers and the "
        "commands to review the summary (%slot compact --preview, --edit, --apply), 'off' refuses.",
    ).tag(config=True)

    context_updates = Bool(
        False,
        help="Offer the model tools that change a slot's working context (add_goal, record_decision, "
        "set_step, ...); what it changes is marked as made by the model. read_context is offered "
        "whenever a slot has a working context.",
    ).tag(config=True)

    max_concurrency = CInt(
        4,
        help="How many requests of a fan-out (%%turn --slots / --models) are in flight at once; the other "
        "columns wait for a place. A 429 slows down only the provider that sent it.",
    ).tag(config=True)

    mcp_servers = Dict(
        help="MCP servers whose tools turns offer, by name: {'time': {'command': 'mcp-server-time'}, "
        "'git': {'command': 'mcp-server-git', 'args': ['--repository', '.']}, 'docs': {'url': "
        "'http://127.0.0.1:8000/mcp'}}; 'env' and 'headers' values are never shown (write ${NAME} to read "
        "one from the environment). Each starts when a turn first offers its tools; %slot mcp lists them.",
    ).tag(config=True)

    compaction_model = Unicode(
        help="The model that writes compaction summaries when a slot's history passes its budget; "
        "empty uses the turn's own model.",
    ).tag(config=True)

    # Every non-secret provider setting (base URLs, hosts), the timeouts, retries and limits,
    # and prices: made from their specs.
    vars().update(_provider_traits())

    def __init__(self, **kwargs: Any) -> None:
        self._refused: list[str] = []
        super().__init__(**kwargs)  # loads the shell's config: refused values are dropped
        for message in self._refused:
            logger.warning("%s", message)
        self._refused = []

    def provider_settings(self) -> ProviderSettings:
        """These settings as the session's ProviderSettings (keys stay in the environment)."""
        values = {name: getattr(self, name) for name in PROVIDER_FIELDS}
        for name in URLS:
            values[name] = str(values[name]) or None
        return ProviderSettings(**values)

    def check_settings(self) -> None:
        """Read every setting once, so any problem shows now (``%load_ext``), not at a turn."""
        check_environment()
        for name in self.trait_names(config=True):
            getattr(self, name)
        self.provider_settings()

    # -- defaults from the environment ---------------------------------------------------------

    @default("model")
    def _default_model(self) -> str:
        return _env("model") or "echo"

    @default("db_path")
    def _default_db_path(self) -> str:
        value = _env("db_path") or ""
        return MaskedURL(value) if is_postgres_url(value) else value

    @default("session_id")
    def _default_session_id(self) -> str:
        return _env("session_id") or ""

    @default("notebook")
    def _default_notebook(self) -> str:
        return _env("notebook") or ""

    @default("system")
    def _default_system(self) -> str:
        return _env("system") or ""

    @default("stream")
    def _default_stream(self) -> bool:
        return (_env("stream") or "1").strip().lower() not in _FALSE

    @default("widgets")
    def _default_widgets(self) -> bool:
        return (_env("widgets") or "1").strip().lower() not in _FALSE

    # -- checks --------------------------------------------------------------------------------

    @validate(*NUMBERS)
    def _check_number(self, proposal: Any) -> Any:
        spec = NUMBERS[proposal["trait"].name]
        try:
            return spec.check(proposal["value"])
        except ConfigError as exc:
            raise TraitError(str(exc)) from None

    @validate(*URLS)
    def _check_url(self, proposal: Any) -> Any:
        setting = URLS[proposal["trait"].name]
        value = proposal["value"]
        if value and setting.check is not None:
            try:
                setting.check(value, f"SlotMagic.{setting.name}")
            except ConfigError as exc:
                raise TraitError(str(exc)) from None
        return MaskedURL(value)

    @validate("session_id", "system")
    def _check_text(self, proposal: Any) -> Any:
        """Text that can be stored: a lone surrogate kept as a setting would refuse every
        later command, ``%slot session another-name`` included."""
        try:
            return check_text(proposal["value"], f"SlotMagic.{proposal['trait'].name}")
        except ConfigError as exc:
            raise TraitError(str(exc)) from None

    @validate("db_path")
    def _check_db_path(self, proposal: Any) -> Any:
        """A PostgreSQL URL: its credentials are never printed (``%config SlotMagic``), and a
        password is refused when typed into the notebook (it would be saved with it)."""
        value = proposal["value"]
        try:
            check_text(value, "SlotMagic.db_path")
        except ConfigError as exc:
            raise TraitError(str(exc)) from None
        if not is_postgres_url(value):
            return value
        try:
            target = parse_postgres_url(value)
        except ConfigError as exc:
            raise TraitError(str(exc)) from None
        if target.password and value != _env("db_path"):
            raise TraitError(
                "SlotMagic.db_path: a password typed into a notebook is saved with it; put it in "
                "~/.pgpass or PGPASSWORD, or set SLOTMAGIC_DB outside the notebook"
            )
        return MaskedURL(value)

    @validate("context_windows")
    def _check_windows(self, proposal: Any) -> Any:
        value = proposal["value"]
        bad = [k for k, v in value.items() if not isinstance(k, str) or type(v) is not int or v < 1]
        if bad:
            raise TraitError(
                f"context_windows maps model strings to whole numbers of tokens >= 1, e.g. "
                f"{{'openai:my-model': 32768}}; not {bad[0]!r}: {value[bad[0]]!r}"
            )
        return value

    @validate("mcp_servers")
    def _check_mcp_servers(self, proposal: Any) -> Any:
        value = proposal["value"]
        try:
            for name, server in value.items():
                server_config(name, server)
        except ConfigError as exc:
            raise TraitError(str(exc)) from None
        return MaskedServers(value)

    @validate("max_tool_rounds", "namespace_threshold", "max_concurrency")
    def _check_positive(self, proposal: Any) -> Any:
        value = proposal["value"]
        if value < 1:
            raise TraitError(f"{proposal['trait'].name} must be a whole number >= 1, not {value!r}")
        return value

    @validate("working_context_turns")
    def _check_working_context_turns(self, proposal: Any) -> Any:
        value = proposal["value"]
        if value is not None and value < 0:
            raise TraitError(f"working_context_turns must be a whole number >= 0 or None, not {value}")
        return value

    @validate("compaction_model")
    def _check_compaction_model(self, proposal: Any) -> Any:
        value = proposal["value"]
        if value:
            try:
                parse_model(value)
            except SlotMagicError as exc:
                raise TraitError(str(exc)) from None
        return value

    @validate("prices")
    def _check_prices(self, proposal: Any) -> Any:
        try:
            ProviderSettings(prices=proposal["value"])
        except ConfigError as exc:
            raise TraitError(str(exc)) from None
        return proposal["value"]

    # -- config that cannot stick when refused ---------------------------------------------------

    def _load_config(
        self, cfg: Config, section_names: list[str] | None = None, traits: dict[str, Any] | None = None
    ) -> None:
        """Load each configured value on its own: a refused value is reported (``_refused``)
        and removed from ``cfg`` and the shell's config instead of failing the whole load."""
        mine = self._find_my_config(cfg)
        known = self.traits(config=True)
        for name, value in mine.items():
            if name in known:
                # Give the trait its value now: a refused value is rolled back to the trait's
                # value before it, which for a dynamic default never computed would be the
                # static default (0.0 for a timeout) instead of the real one.
                getattr(self, name)
            single = Config()
            single[type(self).__name__] = Config({name: value})
            try:
                super()._load_config(single, section_names, traits)
            except TraitError as exc:
                self._refused.append(self._refusal(name, value, exc))
                self._forget(cfg, name)

    def update_config(self, config: Config) -> None:
        """``%config SlotMagic.x = ...``: a refused value raises one line (which ``%config``
        shows) and is not kept anywhere; accepted values are kept as usual."""
        self._refused = []
        super().update_config(config)
        refused, self._refused = self._refused, []
        if refused:
            raise TraitError("; ".join(refused))

    def _refusal(self, name: str, value: Any, exc: TraitError) -> str:
        reason = str(exc)
        spec = NUMBERS.get(name)
        if spec is not None:  # a value traitlets could not even convert: say what would do
            try:
                spec.check(value)
            except ConfigError as mine:
                reason = str(mine)
        url = name in URLS or (name == "db_path" and is_postgres_url(value))
        shown = MaskedURL(value) if url and isinstance(value, str) else value
        if name == "mcp_servers" and isinstance(value, dict):
            shown = MaskedServers(value)
        return f"SlotMagic.{name} = {shown!r} refused: {reason}; it stays {getattr(self, name)!r}"

    def _forget(self, cfg: Config, name: str) -> None:
        """Drop ``name`` from ``cfg`` and from the shell's config (which ``%config`` updated
        before this object), putting back the value this object had from config, if any."""
        parent = getattr(self, "parent", None)
        configs = [cfg] + ([parent.config] if parent is not None and parent.config is not cfg else [])
        for section in self.section_names():
            kept = dict.get(self.config, section)
            for config in configs:
                found = dict.get(config, section)
                if found is None or name not in found:
                    continue
                if config is not cfg and kept is not None and name in kept and kept is not found:
                    found[name] = kept[name]  # the earlier, accepted value
                else:
                    del found[name]
