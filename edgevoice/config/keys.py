"""Linux key names and codes for ``[activation] key`` (``linux/input-event-codes.h``): checked when the configuration
loads, so this module needs nothing of the rest of the package."""

from __future__ import annotations

from collections.abc import Mapping

from edgevoice.errors import ConfigError

KEY_CODES: Mapping[str, int] = {
    **{f"KEY_{c}": code for c, code in zip("1234567890", range(2, 12), strict=True)},
    **{f"KEY_{c}": code for c, code in zip("QWERTYUIOP", range(16, 26), strict=True)},
    **{f"KEY_{c}": code for c, code in zip("ASDFGHJKL", range(30, 39), strict=True)},
    **{f"KEY_{c}": code for c, code in zip("ZXCVBNM", range(44, 51), strict=True)},
    **{f"KEY_F{n}": 58 + n for n in range(1, 11)},
    "KEY_ESC": 1,
    "KEY_ENTER": 28,
    "KEY_LEFTCTRL": 29,
    "KEY_LEFTSHIFT": 42,
    "KEY_SPACE": 57,
    "KEY_F11": 87,
    "KEY_F12": 88,
    "KEY_KPENTER": 96,
    "KEY_RIGHTCTRL": 97,
    "KEY_MUTE": 113,
    "KEY_PAUSE": 119,
    "KEY_PLAYPAUSE": 164,
    "KEY_RECORD": 167,
    "KEY_MICMUTE": 248,
    **{f"BTN_{n}": 0x100 + n for n in range(10)},
    "BTN_LEFT": 0x110,
    "BTN_RIGHT": 0x111,
    "BTN_MIDDLE": 0x112,
    "BTN_SOUTH": 0x130,
    "BTN_TRIGGER": 0x120,
}
"""The Linux key codes (``linux/input-event-codes.h``) of the keys a kiosk button is likely to send; any other key is
given by its number."""


def key_code(name: str) -> int:
    """The Linux key code of ``name`` (``KEY_SPACE``, ``BTN_0``, or a number)."""
    if name.isdigit():
        return int(name)
    try:
        return KEY_CODES[name.upper()]
    except KeyError:
        known = ", ".join(sorted(KEY_CODES))
        raise ConfigError(
            f"activation.key = {name!r}: not a key name known here; give its code (a number) or one of {known}"
        ) from None
