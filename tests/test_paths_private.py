"""paths.private_umask and paths.write_private: private from the first instant, never replacing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kirod.paths import private_umask, write_private


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_files_created_under_it_are_private_and_the_umask_comes_back(tmp_path: Path) -> None:
    before = os.umask(0o022)
    try:
        with private_umask():
            (tmp_path / "file").touch(mode=0o666)
            (tmp_path / "dir").mkdir(mode=0o777)
        with private_umask(0o177):
            (tmp_path / "socket-like").touch(mode=0o777)
        with pytest.raises(FileExistsError), private_umask():
            tmp_path.mkdir()
        assert os.umask(0o022) == 0o022
    finally:
        os.umask(before)
    assert mode(tmp_path / "file") == 0o600
    assert mode(tmp_path / "dir") == 0o700
    assert mode(tmp_path / "socket-like") == 0o600


def test_write_private_creates_a_0600_file(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    write_private(path, b"key\n")
    assert path.read_bytes() == b"key\n"
    assert mode(path) == 0o600


def test_write_private_never_replaces_a_file(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_bytes(b"the user's")
    with pytest.raises(FileExistsError):
        write_private(path, b"ours")
    assert path.read_bytes() == b"the user's"


def test_write_private_never_follows_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    link = tmp_path / "secret"
    link.symlink_to(target)
    with pytest.raises(FileExistsError):
        write_private(link, b"ours")
    assert not target.exists()
