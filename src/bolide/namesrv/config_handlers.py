"""The name server's own settings over the wire: GET_NAMESRV_CONFIG (319) and
UPDATE_NAMESRV_CONFIG (318), which ``mqadmin getNamesrvConfig`` / ``updateNamesrvConfig`` send.

319 answers SUCCESS with a body of ``key=value`` lines (UTF-8, sorted), as Java's
``getAllConfigsFormatString``. 318 reads the same format from its body. Java's black list
(``configBlackList``, ``configStorePath``, ``kvConfigPath``) is refused with NO_PERMISSION, as
Java refuses it. Of Bolide's keys only ``orderMessageEnable`` can change while the server runs.
Any other key is refused by name with SYSTEM_ERROR, so a change that would not take effect is
never accepted quietly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import Connection, Dispatcher

__all__ = ["CONFIG_BLACK_LIST", "NamesrvConfigHandlers", "parse_properties_text"]

_log = logging.getLogger(__name__)

CONFIG_BLACK_LIST = frozenset({"configBlackList", "configStorePath", "kvConfigPath"})
"""Keys Java's name server never lets UPDATE_NAMESRV_CONFIG change."""

LIVE_KEY = "orderMessageEnable"
"""The one key a running Bolide name server applies at once."""


def parse_properties_text(text: str) -> dict[str, str]:
    """``key=value`` lines (``#``/``!`` comments and blank lines skipped, blanks around the
    key and value trimmed). Raises ValueError naming a line without ``=``."""
    settings: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, separator, value = line.partition("=")
        if not separator or not key.strip():
            raise ValueError(f"line {number} is not key=value: {line!r}")
        settings[key.strip()] = value.strip()
    return settings


class NamesrvConfigHandlers:
    """Codes 318 and 319. ``settings`` gives the current ``key -> text`` settings; ``set_order``
    switches orderMessageEnable."""

    def __init__(
        self, settings: Callable[[], dict[str, str]], set_order: Callable[[bool], None]
    ) -> None:
        self._settings = settings
        self._set_order = set_order

    def install(self, dispatcher: Dispatcher, family: str) -> None:
        """Register 318 and 319 in ``family``."""
        dispatcher.register(RequestCode.GET_NAMESRV_CONFIG, self.get_config, family=family)
        dispatcher.register(RequestCode.UPDATE_NAMESRV_CONFIG, self.update_config, family=family)

    async def get_config(self, connection: Connection, request: RemotingCommand) -> RemotingCommand:
        """GET_NAMESRV_CONFIG (319): SUCCESS, body ``key=value`` lines."""
        del connection
        text = "".join(f"{key}={value}\n" for key, value in sorted(self._settings().items()))
        return request.make_response(ResponseCode.SUCCESS, None, None, text.encode())

    async def update_config(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_NAMESRV_CONFIG (318): apply the body's settings (see the module docstring)."""
        try:
            updates = parse_properties_text(bytes(request.body).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"string2Properties error: {error}"
            )
        if not updates:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "no setting to update")
        if CONFIG_BLACK_LIST & updates.keys():
            return request.make_response(
                ResponseCode.NO_PERMISSION, "Can not update config in black list."
            )
        known = self._settings()
        unknown = sorted(key for key in updates if key not in known)
        frozen = sorted(key for key in updates if key in known and key != LIVE_KEY)
        if unknown or frozen:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"not changeable on a running name server: {', '.join(unknown + frozen)} "
                f"(unknown: {', '.join(unknown) or 'none'}; only {LIVE_KEY} changes live)",
            )
        value = updates[LIVE_KEY].lower()
        if value not in ("true", "false"):
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"{LIVE_KEY} must be true or false, not {value!r}"
            )
        self._set_order(value == "true")
        _log.warning("name server config updated by %s: %s=%s",
                     connection.remote_address, LIVE_KEY, value)  # fmt: skip
        return request.make_response(ResponseCode.SUCCESS)
