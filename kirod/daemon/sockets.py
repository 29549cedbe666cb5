"""Listening sockets, created by us so that modes and addresses are right from the first instant."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from kirod.errors import AlreadyRunning, StartupError
from kirod.paths import ensure_private_dir

BACKLOG = 512
# sun_path is 108 bytes on Linux and 104 on macOS, including the terminating NUL.
MAX_UNIX_PATH = 103


@dataclass(frozen=True)
class UnixListener:
    sock: socket.socket
    path: Path
    inode: tuple[int, int]

    def close(self) -> None:
        """Close the socket and remove its path, unless another process has replaced it."""
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError):
            current = os.stat(self.path)
            if (current.st_dev, current.st_ino) == self.inode:
                os.unlink(self.path)


def _socket_is_live(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def bind_unix(path: Path) -> UnixListener:
    """Listen on `path` with mode 0600 inside a 0700 directory.

    The socket is bound under a 0077 umask so it is never world-accessible, even for an instant.
    A leftover socket file is removed only when nothing answers on it.
    """
    if len(os.fsencode(path)) > MAX_UNIX_PATH:
        raise StartupError(f"socket path {path} is too long for a Unix socket; set socket_path")
    ensure_private_dir(path.parent)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None:
        if not stat.S_ISSOCK(mode):
            raise StartupError(f"{path} exists and is not a socket; remove it or set socket_path")
        if _socket_is_live(path):
            raise AlreadyRunning(f"kirod is already running: its control socket {path} answers")
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot bind control socket {path}: {exc.strerror}") from None
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(BACKLOG)
    sock.setblocking(False)
    info = os.stat(path)
    return UnixListener(sock=sock, path=path, inode=(info.st_dev, info.st_ino))


def bind_tcp(host: str, port: int) -> socket.socket:
    """Listen on host:port (port 0 picks a free one); errors name the address."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupError(f"cannot resolve listen host {host!r}: {exc.strerror}") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        in_use = exc.errno == errno.EADDRINUSE
        hint = " (is another kirod or program using it? set port)" if in_use else ""
        raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror}{hint}") from None
    sock.setblocking(False)
    return sock


def tcp_address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
