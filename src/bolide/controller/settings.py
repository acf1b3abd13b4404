"""The controller's own settings, read and changed by 1009/1010 as properties text.

Held in memory per controller (a restart returns to the defaults or the command line's).
Keys are RocketMQ's ControllerConfig names; the blacklisted keys (``configBlackList``,
``configStorePath``, ``rocketmqHome``) are refused as Java refuses them, and keys Bolide does
not honour are refused by name rather than accepted and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from bolide.base import limits
from bolide.base.errors import ConfigError

__all__ = ["BLACKLISTED_KEYS", "ControllerSettings", "parse_properties"]

BLACKLISTED_KEYS = frozenset(("configBlackList", "configStorePath", "rocketmqHome"))
"""Keys UPDATE_CONTROLLER_CONFIG never changes (Java's configBlackList and rocketmqHome)."""

_BOOLEAN_KEYS = {
    "enableElectUncleanMaster": "enable_elect_unclean_master",
    "notifyBrokerRoleChanged": "notify_broker_role_changed",
}
_INT_KEYS = {
    "scanNotActiveBrokerInterval": "scan_not_active_broker_interval_ms",
}


@dataclass(slots=True)
class ControllerSettings:
    """``enable_elect_unclean_master`` (default False): elect any live replica when no
    SyncStateSet member is alive; ``notify_broker_role_changed`` (True): send 1008 after an
    election; ``scan_not_active_broker_interval_ms`` (5000): the liveness scan's period (a
    change applies from the next scan). A controller-triggered election is tried once: a set
    left without a master is taken up again by its replicas' own requests (1002) or the next
    scan."""

    enable_elect_unclean_master: bool = False
    notify_broker_role_changed: bool = True
    scan_not_active_broker_interval_ms: int = limits.CONTROLLER_SCAN_INTERVAL_MS

    def to_properties(self) -> str:
        """The settings as properties text (Java's key names)."""
        lines = [
            f"{key}={'true' if getattr(self, name) else 'false'}"
            for key, name in _BOOLEAN_KEYS.items()
        ]
        lines += [f"{key}={getattr(self, name)}" for key, name in _INT_KEYS.items()]
        return "\n".join(sorted(lines)) + "\n"

    def update(self, values: dict[str, str]) -> None:
        """Apply ``values`` (all or nothing); raises :class:`ConfigError` naming a refused or
        unparsable key."""
        refused = sorted(set(values) & BLACKLISTED_KEYS)
        if refused:
            raise ConfigError(f"Can not update config in black list: {', '.join(refused)}")
        unknown = sorted(set(values) - set(_BOOLEAN_KEYS) - set(_INT_KEYS))
        if unknown:
            raise ConfigError(f"controller config keys not supported: {', '.join(unknown)}")
        parsed: dict[str, bool | int] = {}
        for key, text in values.items():
            if key in _BOOLEAN_KEYS:
                if text.strip().lower() not in ("true", "false"):
                    raise ConfigError(f"{key} must be true or false, not {text!r}")
                parsed[_BOOLEAN_KEYS[key]] = text.strip().lower() == "true"
            else:
                try:
                    number = int(text.strip())
                except ValueError as error:
                    raise ConfigError(f"{key} must be an integer, not {text!r}") from error
                if number <= 0:
                    raise ConfigError(f"{key} must be positive, not {number}")
                parsed[_INT_KEYS[key]] = number
        for name, value in parsed.items():
            setattr(self, name, value)


def parse_properties(text: str) -> dict[str, str]:
    """``key=value`` lines (``#``/``!`` comments and blank lines skipped); raises
    :class:`ConfigError` for a line without ``=``."""
    values: dict[str, str] = {}
    for line in text.removeprefix("\ufeff").splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        key, separator, value = stripped.partition("=")
        if not separator:
            raise ConfigError(f"properties line without '=': {stripped!r}")
        values[key.strip()] = value.strip()
    return values
