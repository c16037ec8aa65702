"""Whether a path edgevoice creates may replace what is there now: one rule for every socket and file it writes.

A socket's path is taken over only when it holds nothing, or a socket nobody listens on (left by a process that was
killed); a file is replaced only when it is a regular file of the kind written there (a WAV over a WAV, a JSON
report over a JSON report, an empty file). Anything else (a regular file where a socket goes, a directory, a
device, a text file where a WAV goes, a socket another process serves) is refused, untouched, with the config key
or option and the path named (code :data:`CODE`). ``edgevoice config --check`` reports the same refusals before a
start (a socket that is served now is only a warning there: it is usually the running service's own).

Files inside a directory that is the service's own (the models directory, the caches, the debug recorder's directory,
checked by :func:`edgevoice.live.recorder.check_record_dir`) are its own by their names: a damaged cache file there
is replaced, not refused.
"""

from __future__ import annotations

import enum
import errno
import os
import socket
import stat
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edgevoice.errors import ConfigError, EdgeVoiceError

__all__ = [
    "CODE",
    "CONFIG_TOML",
    "JSON_REPORT",
    "PNG",
    "TEXT",
    "WAV",
    "BoundSocket",
    "FileKind",
    "SocketState",
    "check_file",
    "check_output_path",
    "check_socket",
    "claim_socket",
    "socket_state",
]

CODE = "path_not_ours"
"""The error code of every refusal here."""
HEAD_BYTES = 4096
"""How much of an existing file is read to tell its kind."""
CONNECT_TIMEOUT_S = 0.5
"""How long a connection to an existing socket may take to tell whether someone serves it."""


class SocketState(enum.Enum):
    FREE = "free"
    """Nothing at the path."""
    STALE = "stale"
    """A socket nobody listens on: it may be replaced."""
    LIVE = "live"
    """A socket another process serves (or one this user may not connect to: another user's)."""


def _refuse(key: str, path: Path | str, what: str, instead: str) -> ConfigError:
    return ConfigError(f"{key}: {path} {what}; it is not replaced ({instead})", code=CODE)


def socket_state(key: str, path: str) -> SocketState:
    """What is at a Unix socket's ``path``; :class:`ConfigError` naming ``key`` when it is anything but a socket."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return SocketState.FREE
    except OSError as exc:
        raise ConfigError(f"{key}: cannot look at {path} ({exc.strerror})", code=CODE) from exc
    if not stat.S_ISSOCK(mode):
        raise _refuse(key, path, f"exists and is {_kind_of(mode)}, not a socket", "name another path, or remove it")
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
        with socket.socket(socket.AF_UNIX, kind) as probe:
            probe.settimeout(CONNECT_TIMEOUT_S)
            try:
                probe.connect(path)
            except OSError as exc:
                if exc.errno == errno.EPROTOTYPE:  # a socket of another type: try the next
                    continue
                if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
                    return SocketState.STALE
                if isinstance(exc, TimeoutError) or exc.errno == errno.EAGAIN:  # a full backlog: it is served
                    return SocketState.LIVE
                if exc.errno in (errno.EACCES, errno.EPERM):  # another user's (the service's, 0600): never ours
                    return SocketState.LIVE
                raise _refuse(key, path, f"is a socket this user cannot reach ({exc.strerror})", "not ours") from exc
            return SocketState.LIVE
    return SocketState.STALE


def claim_socket(key: str, path: str) -> None:
    """Make ``path`` free for a new socket: a stale socket is removed; anything else is refused untouched."""
    state = socket_state(key, path)
    if state is SocketState.LIVE:
        raise _refuse(key, path, "is a socket another process serves", "is edgevoice already running?")
    if state is SocketState.STALE:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ConfigError(f"{key}: cannot remove the stale socket {path} ({exc.strerror})", code=CODE) from exc


class BoundSocket:
    """The socket file just bound at ``path``, known by its device and inode: :meth:`remove` takes away that file
    only, never what another process put at the same path since."""

    def __init__(self, path: str) -> None:
        st = os.lstat(path)
        self.path, self._identity = path, (st.st_dev, st.st_ino)

    def remove(self) -> None:
        try:
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self._identity:
                os.unlink(self.path)
        except OSError:
            pass


def check_socket(key: str, path: str, warnings: list[str] | None) -> None:
    """What :func:`claim_socket` would refuse, without touching ``path``; a socket served now is a warning in
    ``warnings`` (refused when it is None)."""
    if socket_state(key, path) is SocketState.LIVE:
        if warnings is None:
            raise _refuse(key, path, "is a socket another process serves", "is edgevoice already running?")
        warnings.append(f"{key}: {path} is served by a running process now (a start beside it would be refused)")


@dataclass(frozen=True)
class FileKind:
    """A kind of file edgevoice writes: its name for messages and how its first bytes look (``whole``: how all of
    it looks, for a kind told only by parsing it, as a TOML config)."""

    name: str
    looks_ours: Callable[[bytes], bool]
    whole: bool = False


def _toml(head: bytes) -> bool:
    try:
        tomllib.loads(head.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return True


WAV = FileKind("a WAV file", lambda head: head[:4] == b"RIFF" and head[8:12] == b"WAVE")
JSON_REPORT = FileKind("a JSON report", lambda head: head.lstrip()[:1] in (b"{", b"["))
PNG = FileKind("a PNG image", lambda head: head.startswith(b"\x89PNG\r\n\x1a\n"))
CONFIG_TOML = FileKind("a TOML config", _toml, whole=True)
TEXT = FileKind("a UTF-8 text file", lambda head: b"\0" not in head and _utf8_prefix(head))


def _utf8_prefix(head: bytes) -> bool:
    """``head`` is UTF-8, but for a character cut at its end."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3 and exc.reason == "unexpected end of data"
    return True


def check_file(key: str, path: Path | str, kind: FileKind) -> None:
    """Refuse ``path`` unless nothing is there or it is a regular file of ``kind`` (an empty file is any kind). A
    symbolic link is judged by what it points to; one that points to nothing is refused: writing through it would
    create a file wherever it points (a link left in a shared folder such as /tmp)."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise _refuse(key, path, "is a symbolic link to nothing", "name a file, not a link") from None
        return
    except OSError as exc:
        raise ConfigError(f"{key}: cannot look at {path} ({exc.strerror})", code=CODE) from exc
    if not stat.S_ISREG(mode):
        raise _refuse(key, path, f"is {_kind_of(mode)}", f"name a file for {kind.name}")
    try:
        with path.open("rb") as fh:
            head = fh.read() if kind.whole else fh.read(HEAD_BYTES)
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path} ({exc.strerror})", code=CODE) from exc
    if head and not kind.looks_ours(head):
        raise _refuse(key, path, f"exists and is not {kind.name}", "name a new file, or remove it")


def check_output_path(path: Path | str, *, key: str, kind: FileKind) -> None:
    """Refuse, before any work is done, a path a file of ``kind`` cannot be written to or must not replace: a
    directory, a missing or read-only folder, a read-only file, a file of another kind (:func:`check_file`)."""
    path = Path(path)
    parent = path.parent
    if path.is_dir():
        problem = "is a directory; name a file"
    elif not parent.is_dir():
        problem = f"its folder {parent} does not exist"
    elif not os.access(parent, os.W_OK | os.X_OK):
        problem = f"its folder {parent} is not writable"
    elif path.exists() and not os.access(path, os.W_OK):
        problem = "the file exists and is not writable"
    else:
        check_file(key, path, kind)
        return
    raise EdgeVoiceError(f"cannot write {path}: {problem}", code="output_path")


def _kind_of(mode: int) -> str:
    kinds = [
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ]
    return next((name for test, name in kinds if test(mode)), "not a regular file")
