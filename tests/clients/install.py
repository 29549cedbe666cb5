"""Install the coding clients the client tests drive, from npm or PyPI, into `.cache/clients/`.

Standard library only.

    python -m tests.clients.install                  # every client with tests, at its pin
    python -m tests.clients.install --best-effort    # `make test`: report a failure, exit 0
    python -m tests.clients.install --latest         # the newest published version of each
    python -m tests.clients.install --relock         # package.json + lockfile from versions.json

A pinned npm client copies `npm/<client>/package.json` and its `package-lock.json` (committed,
written by `--relock` with `omit-lockfile-registry-resolved`, so it names no registry host but
keeps every `integrity`) into `.cache/clients/<client>-<version>/` and runs `npm ci` there. A
pinned PyPI client (aider, llm, and the agent SDKs, libraries whose "binary" is their venv's
`python`) gets a virtual environment of its own there (its dependencies,
such as aider's exact `openai`, must not meet the suite's), filled from `pypi/<client>/
requirements.txt`: every distribution at the version `--relock` found, with its sha256, installed
with `--require-hashes`. A stamp file makes a second run a no-op; a changed lockfile reinstalls.
When an install fails, `<client>-<version>.failed` says why, and the tests skip with that
reason. Installs of older versions stay in `.cache/clients` (about 400 MB each for Claude Code)
until removed by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
VERSIONS_FILE = HERE / "versions.json"
NPM_DIR = HERE / "npm"
PYPI_DIR = HERE / "pypi"
TESTED_CLIENTS = (
    "claude-code",
    "codex",
    "opencode",
    "kilo-code",
    "cline",
    "continue",
    "copilot",
    "aider",
    "llm",
    "gemini-cli",
    "pi",
    "openai-agents",
    "claude-agent-sdk",
)
"""The clients `tests/clients` drives (every one versions.json pins)."""

STAMP = ".kirod-installed.json"
NPM_CI_TIMEOUT_S = 900.0
VENV_PYTHON = "python3"
"""What makes a PyPI client's virtual environment (aider wants a Python below 3.13)."""
PING_TIMEOUT_S = 30.0
LOCK_WAIT_S = NPM_CI_TIMEOUT_S + 60.0
LOG_TAIL_LINES = 15


class InstallError(RuntimeError):
    """Why a client could not be installed (one line or a short npm log tail)."""


@dataclass(frozen=True)
class Pin:
    client: str
    package: str
    version: str
    bin: str
    path: str | None = None
    """The binary under `node_modules` when the package declares no `bin` (opencode's)."""
    registry: str = "npm"
    """`npm` or `pypi`."""
    plugins: tuple[str, ...] = ()
    """PyPI distributions installed beside the package (`llm-anthropic==0.30`)."""
    module: str | None = None
    """A PyPI library with no program of its own (the agent SDKs): the module a script run by
    its venv's `python` imports; `--version` is then asked of the distribution's metadata."""

    @property
    def binary(self) -> str:
        """The binary's path under the install folder."""
        if self.registry == "pypi":
            return f"venv/bin/{self.bin}"
        return f"node_modules/{self.path or f'.bin/{self.bin}'}"

    @property
    def lockfile(self) -> Path:
        if self.registry == "pypi":
            return PYPI_DIR / self.client / "requirements.txt"
        return NPM_DIR / self.client / "package-lock.json"


def pins() -> dict[str, Pin]:
    data = json.loads(VERSIONS_FILE.read_text())
    return {
        name: Pin(
            name,
            entry["package"],
            entry["version"],
            entry["bin"],
            entry.get("path"),
            entry.get("registry", "npm"),
            tuple(entry.get("plugins", ())),
            entry.get("module"),
        )
        for name, entry in data.items()
    }


def pin(client: str) -> Pin:
    try:
        return pins()[client]
    except KeyError:
        raise InstallError(f"{client!r} is not in {VERSIONS_FILE.name}") from None


def cache_root() -> Path:
    configured = os.environ.get("KIROD_CLIENTS_CACHE")
    return Path(configured) if configured else REPO / ".cache" / "clients"


def install_dir(client: str, version: str) -> Path:
    return cache_root() / f"{client}-{version}"


def failure_file(client: str, version: str) -> Path:
    return cache_root() / f"{client}-{version}.failed"


def binary_path(client: str, version: str) -> Path:
    return install_dir(client, version) / pin(client).binary


def lock_digest(client: str) -> str:
    return hashlib.sha256(pin(client).lockfile.read_bytes()).hexdigest()


def _stamp_for(client: str, version: str) -> dict[str, str]:
    pinned = pin(client).version == version
    return {
        "client": client,
        "version": version,
        "lock_sha256": lock_digest(client) if pinned else "unpinned",
    }


def installed(client: str, version: str) -> Path | None:
    """The binary if this exact install (version, and lockfile for a pin) is complete."""
    stamp = install_dir(client, version) / STAMP
    binary = binary_path(client, version)
    try:
        recorded = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None
    if recorded != _stamp_for(client, version) or not binary.exists():
        return None
    return binary


def recorded_failure(client: str, version: str) -> str | None:
    try:
        return failure_file(client, version).read_text().strip() or "unknown failure"
    except OSError:
        return None


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError("npm is not on PATH (install Node.js and npm to run the client tests)")
    return npm


def _run(args: list[str], cwd: Path, log: Path, timeout_s: float) -> None:
    """Run npm (or pip) with its output in `log`; raise with the log's tail if it fails or
    times out."""
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(args)}  (in {cwd})\n".encode())
        out.flush()
        try:
            code = subprocess.run(
                args, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, timeout=timeout_s
            ).returncode
        except subprocess.TimeoutExpired:
            code = None
    if code == 0:
        return
    output = log.read_text(errors="replace")
    what = f"timed out after {timeout_s:.0f} s" if code is None else f"exited with {code}"
    tail = "\n".join(output.splitlines()[-LOG_TAIL_LINES:])
    tool = f"{Path(args[0]).name} {args[1]}"
    raise InstallError(f"`{tool}` {what}: {_npm_error(output)} (log: {log})\n{tail}")


def check_registry(timeout_s: float = PING_TIMEOUT_S) -> None:
    """Fail fast (instead of npm's minutes of retries) when the registry cannot be reached."""
    try:
        answer = subprocess.run(
            [_npm(), "ping", "--fetch-retries=0", f"--fetch-timeout={int(timeout_s * 1000)}"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s + 5,
        )
    except subprocess.TimeoutExpired:
        raise InstallError(
            f"npm registry unreachable: `npm ping` timed out ({timeout_s:.0f} s)"
        ) from None
    if answer.returncode != 0:
        raise InstallError(
            f"npm registry unreachable: {_npm_error(answer.stderr or answer.stdout)}"
        )


def _npm_error(output: str) -> str:
    """The telling lines of npm's (or pip's) error output: its code and reason, not the
    boilerplate."""
    boilerplate = ("A complete log", "behind a proxy", "npm help config")
    lines = [
        line.removeprefix("npm error").removeprefix("ERROR:").strip()
        for line in output.splitlines()
        if line.startswith(("npm error", "ERROR:")) and not any(t in line for t in boilerplate)
    ]
    telling = [line for line in lines if line and not line.startswith(("at ", "{", "}"))]
    return " / ".join(telling[:4])[:300] or "npm failed without a message"


@contextlib.contextmanager
def _locked(root: Path, name: str) -> Iterator[None]:
    """One installer at a time per client directory (another `make` may be installing)."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / f".{name}.lock").open("w") as handle:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise InstallError(f"another install of {name} holds the lock") from None
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _package_json(pinned: Pin, version: str) -> str:
    document = {
        "name": f"kirod-client-{pinned.client}",
        "version": "0.0.0",
        "private": True,
        "description": f"{pinned.package} for kirod's client tests (tests/clients).",
        "dependencies": {pinned.package: version},
    }
    return json.dumps(document, indent=2) + "\n"


def binary_version(binary: Path, timeout_s: float = 30.0) -> str:
    """What `<binary> --version` prints (first line), e.g. `2.1.332 (Claude Code)`; for a
    library's venv `python` (see `Pin.module`), the version of every library pin it holds,
    e.g. `openai-agents 0.24.0`."""
    answer = subprocess.run(
        [str(binary), *_version_args(binary)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "DISABLE_AUTOUPDATER": "1"},
    )
    if answer.returncode != 0:
        raise InstallError(f"`{binary} --version` exited with {answer.returncode}: {answer.stderr}")
    # pi 0.73.1 prints its version on stderr
    printed = answer.stdout.strip() or answer.stderr.strip()
    return printed.splitlines()[0] if printed else ""


def _version_args(binary: Path) -> list[str]:
    """`--version`, or for a venv's `python` the script that names the library pins in it."""
    if binary.name != "python":
        return ["--version"]
    libraries = [(pin.package, pin.module) for pin in pins().values() if pin.module]
    script = (
        "import importlib, importlib.metadata as m\n"
        f"for package, module in {libraries!r}:\n"
        "    try:\n"
        "        importlib.import_module(module)\n"
        "    except ImportError:\n"
        "        continue\n"
        "    print(package, m.version(package))\n"
    )
    return ["-c", script]


def install(
    client: str, version: str | None = None, *, timeout_s: float = NPM_CI_TIMEOUT_S
) -> Path:
    """Install `client` (its pin unless `version`) if it is not already; return its binary.

    The pinned version installs from the committed lockfile with `npm ci`; any other version
    (`--latest`) with `npm install` of that exact version.
    """
    pinned = pin(client)
    version = version or pinned.version
    root = cache_root()
    with _locked(root, f"{client}-{version}"):
        binary = installed(client, version)
        if binary is not None:
            failure_file(client, version).unlink(missing_ok=True)
            return binary
        try:
            binary = _install(pinned, version, root, timeout_s)
        except InstallError as exc:
            failure_file(client, version).write_text(f"{exc}\n")
            raise
        failure_file(client, version).unlink(missing_ok=True)
        return binary


def _install(pinned: Pin, version: str, root: Path, timeout_s: float) -> Path:
    final = install_dir(pinned.client, version)
    log = root / f"{final.name}.log"
    log.unlink(missing_ok=True)
    if pinned.registry == "pypi":
        _install_pypi(pinned, version, final, log, timeout_s)
    else:
        _install_npm(pinned, version, final, log, timeout_s)
    (final / STAMP).write_text(json.dumps(_stamp_for(pinned.client, version)) + "\n")
    return binary_path(pinned.client, version)


def _install_npm(pinned: Pin, version: str, final: Path, log: Path, timeout_s: float) -> None:
    npm = _npm()
    staging = final.parent / f".{final.name}.staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    if version == pinned.version:
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(NPM_DIR / pinned.client / name, staging / name)
        command = [npm, "ci", "--no-audit", "--no-fund"]
    else:
        (staging / "package.json").write_text(_package_json(pinned, version))
        command = [npm, "install", "--no-audit", "--no-fund", "--save-exact"]
    _run(command, staging, log, timeout_s)
    _check_binary(staging / pinned.binary, version, log)
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)


def _install_pypi(pinned: Pin, version: str, final: Path, log: Path, timeout_s: float) -> None:
    """A virtual environment in `final` (made in place: a venv's scripts name its absolute path,
    so it cannot be staged and renamed; the stamp, written last, marks it complete)."""
    shutil.rmtree(final, ignore_errors=True)
    pip = _venv(final / "venv", log)
    if version == pinned.version:
        command = [*pip, "--require-hashes", "--no-deps", "-r", str(pinned.lockfile)]
    else:
        command = [*pip, *_requirements(pinned, version)]
    _run(command, final, log, timeout_s)
    _check_binary(final / pinned.binary, version, log)


def _venv(folder: Path, log: Path) -> list[str]:
    """A new virtual environment at `folder`; the pip install command of its Python."""
    python = shutil.which(VENV_PYTHON)
    if python is None:
        raise InstallError(f"{VENV_PYTHON} is not on PATH (the PyPI clients need it)")
    folder.parent.mkdir(parents=True, exist_ok=True)
    _run([python, "-m", "venv", str(folder)], folder.parent, log, 120.0)
    return [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-input"]


def _requirements(pinned: Pin, version: str) -> list[str]:
    return [f"{pinned.package}=={version}", *pinned.plugins]


def _check_binary(binary: Path, version: str, log: Path) -> None:
    if not binary.exists():
        raise InstallError(f"the install finished but {binary} is missing; {log}")
    reported = binary_version(binary)
    if version not in reported:
        raise InstallError(f"{binary} --version says {reported!r}, expected {version}")


def latest_version(client: str, timeout_s: float = 60.0) -> str:
    """The newest published version (`npm view <package> version`, or PyPI's JSON API)."""
    pinned = pin(client)
    package = pinned.package
    if pinned.registry == "pypi":
        return _latest_on_pypi(package, timeout_s)
    try:
        answer = subprocess.run(
            [_npm(), "view", package, "version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        raise InstallError(f"`npm view {package} version` timed out") from None
    version = answer.stdout.strip()
    if answer.returncode != 0 or not version:
        raise InstallError(f"`npm view {package} version` failed: {answer.stderr.strip()}")
    return version


def _latest_on_pypi(package: str, timeout_s: float) -> str:
    """`pip index versions`, which reads the index pip is configured for (a mirror too)."""
    command = [sys.executable, "-m", "pip", "index", "versions", package]
    try:
        answer = subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        raise InstallError(f"`pip index versions {package}` timed out") from None
    found = re.search(rf"^{re.escape(package)} \(([^)]+)\)", answer.stdout, re.MULTILINE)
    if answer.returncode != 0 or found is None:
        raise InstallError(f"`pip index versions {package}` failed: {answer.stderr.strip()}")
    return found.group(1)


def relock(client: str, timeout_s: float = 300.0) -> Path:
    """Regenerate the client's committed lockfile from versions.json: for npm, `package.json`
    and `package-lock.json`; for PyPI, `requirements.txt` with every distribution pip resolves
    (on this platform and Python) and its sha256."""
    pinned = pin(client)
    if pinned.registry == "pypi":
        return _relock_pypi(pinned, timeout_s)
    folder = NPM_DIR / client
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(_package_json(pinned, pinned.version))
    (folder / "package-lock.json").unlink(missing_ok=True)
    log = cache_root() / f"relock-{client}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [
        _npm(),
        "install",
        "--package-lock-only",
        "--omit-lockfile-registry-resolved=true",
        "--no-audit",
        "--no-fund",
    ]
    _run(command, folder, log, timeout_s)
    return folder / "package-lock.json"


def _relock_pypi(pinned: Pin, timeout_s: float) -> Path:
    work = cache_root() / f".relock-{pinned.client}"
    shutil.rmtree(work, ignore_errors=True)
    log = cache_root() / f"relock-{pinned.client}.log"
    pip = _venv(work / "venv", log)
    report = work / "report.json"
    resolve = ["--dry-run", "--ignore-installed", "--report", str(report)]
    _run([*pip, *resolve, *_requirements(pinned, pinned.version)], work, log, timeout_s)
    chosen = json.loads(report.read_text())["install"]
    lines = [
        f"{item['metadata']['name']}=={item['metadata']['version']} "
        f"--hash=sha256:{item['download_info']['archive_info']['hashes']['sha256']}"
        for item in chosen
    ]
    header = (
        f"# {pinned.package}=={pinned.version} {' '.join(pinned.plugins)}".rstrip()
        + f" for kirod's client tests, resolved by `install.py --relock {pinned.client}`\n"
    )
    lockfile = pinned.lockfile
    lockfile.parent.mkdir(parents=True, exist_ok=True)
    lockfile.write_text(header + "\n".join(sorted(lines, key=str.lower)) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return lockfile


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clients", nargs="*", help=f"default: {' '.join(TESTED_CLIENTS)}")
    parser.add_argument(
        "--best-effort",
        action="store_true",
        help="on failure, record why (the tests skip with it) and exit 0",
    )
    parser.add_argument(
        "--latest",
        action="store_true",
        help="install the newest published version; print `<client> <version> <binary>`",
    )
    parser.add_argument("--relock", action="store_true", help="regenerate the committed lockfiles")
    parser.add_argument(
        "--timeout", type=float, default=NPM_CI_TIMEOUT_S, help="seconds per npm run"
    )
    args = parser.parse_args(argv)
    clients = args.clients or (list(pins()) if args.relock else list(TESTED_CLIENTS))
    failed = False
    for client in clients:
        version = "?"
        try:
            version = pin(client).version
            if args.relock:
                print(f"{client}: wrote {relock(client)}")
                continue
            if args.latest:
                version = latest_version(client)
            if installed(client, version) is None and args.best_effort:
                check_registry()
            binary = install(client, version, timeout_s=args.timeout)
        except InstallError as exc:
            failed = True
            if not args.relock and version != "?":  # what the tests' skip reason will quote
                failure_file(client, version).parent.mkdir(parents=True, exist_ok=True)
                failure_file(client, version).write_text(f"{exc}\n")
            print(f"{client} {version}: NOT INSTALLED: {exc}", file=sys.stderr)
            continue
        print(f"{client} {version} {binary}" if args.latest else f"{client} {version}: {binary}")
    if failed and args.best_effort:
        print("(continuing: the client tests will skip and say why)", file=sys.stderr)
        return 0
    return 1 if failed else 0


@dataclass(frozen=True)
class Binary:
    path: Path
    version: str  # what `--version` printed, e.g. "2.1.332 (Claude Code)", "codex-cli 0.171.0"


@dataclass(frozen=True)
class Located:
    path: Path | None  # None: not installed
    why: str  # why there is no binary
    requested: bool  # named by an environment variable (so its absence is an error)
    version: str | None  # the version it must report, if known


def env_names(client: str) -> tuple[str, str]:
    """The variables that name a binary or a version of `client` to drive instead of its pin:
    `KIROD_TEST_KILO_CODE_BIN`, `KIROD_TEST_KILO_CODE_VERSION` (the clients driven before these
    keep their own names: see their `*_env` modules)."""
    stem = f"KIROD_TEST_{client.upper().replace('-', '_')}"
    return f"{stem}_BIN", f"{stem}_VERSION"


def locate(client: str, bin_env: str, version_env: str) -> Located:
    """The binary of `client` to drive: `bin_env` names one; `version_env` a version installed
    in `.cache/clients` (`make clients-latest` sets it); by default the pin of versions.json."""
    explicit = os.environ.get(bin_env)
    if explicit:
        path = Path(explicit)
        if not path.exists():
            return Located(None, f"{bin_env}={path} does not exist", True, None)
        return Located(path, "", True, None)
    requested = os.environ.get(version_env)
    version = requested or pin(client).version
    found = installed(client, version)
    if found is not None:
        return Located(found, "", bool(requested), version)
    failure = recorded_failure(client, version)
    why = f"{client} {version} is not installed"
    why += f" ({failure.splitlines()[0]})" if failure else "; run `make clients` to install it"
    return Located(None, why, bool(requested), version)


if __name__ == "__main__":
    sys.exit(main())
