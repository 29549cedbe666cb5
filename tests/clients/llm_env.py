"""Driving the real `llm` CLI (from PyPI, with the llm-anthropic plugin, in its own venv) against
a kirod: its settings, one run.

Imported by the client test and capture modules (not a test module itself).

llm-anthropic builds the official `anthropic` SDK client with no base URL of its own, so the
SDK's `ANTHROPIC_BASE_URL` (kirod's, without `/v1`) and the plugin's `ANTHROPIC_API_KEY` (sent
as `x-api-key`) are all it takes; `-m anthropic/<id>` picks one of the plugin's Claude models.
llm keeps its keys, logs database and settings in its user directory: `LLM_USER_PATH` puts it
in the private HOME. llm has no tools of its own: `--functions FILE` registers the Python
functions of FILE as tools, which llm runs when the model calls them and sends back the result
(`--td` prints each call and its result).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tests.clients import install, runs

CLIENT = "llm"
MODEL = "claude-sonnet-4-6"
"""One of llm-anthropic's own model ids (`llm models`), which kirod serves."""
BASE_ENV = "ANTHROPIC_BASE_URL"
KEY_ENV = "ANTHROPIC_API_KEY"
USER_PATH_ENV = "LLM_USER_PATH"
RUN_TIMEOUT_S = 60.0
"""One `llm` prompt (a second or two); this bounds a hang."""

READ_TOOL = "read_file"
TOOLS_FILE = "tools.py"
TOOLS = f"""def {READ_TOOL}(path: str) -> str:
    "Read a text file and return its content."
    with open(path) as file:
        return file.read()
"""
"""The file-read tool the tests give llm (`--functions`), as its docs show one."""

Binary = install.Binary


def client_env(home: Path, base_url: str, token: str) -> dict[str, str]:
    """A private HOME and llm user directory, kirod's URL and the key."""
    return runs.private_env(
        home, {USER_PATH_ENV: str(home / "llm"), BASE_ENV: base_url, KEY_ENV: token}
    )


def command(prompt: str, extra: Iterable[str] = ()) -> list[str]:
    return ["llm", "-m", f"anthropic/{MODEL}", *extra, prompt]


class LLM(runs.Client):
    """llm in a private HOME and working directory, at one kirod with one key; the read tool
    in `tools.py` of its HOME."""

    def __init__(self, binary: Binary, base_url: str, token: str, root: Path) -> None:
        super().__init__(binary, root)
        self.env = client_env(self.home, base_url, token)
        self.tools = self.home / TOOLS_FILE
        self.tools.write_text(TOOLS)

    def run(
        self,
        prompt: str,
        *args: str,
        timeout_s: float = RUN_TIMEOUT_S,
    ) -> runs.Finished:
        """`llm -m anthropic/MODEL ARGS… PROMPT`."""
        return self.launch(runs.Finished, command(prompt, args), timeout_s)

    def openai_endpoint(
        self, url: str, *args: str, timeout_s: float = RUN_TIMEOUT_S
    ) -> runs.Finished:
        """`llm openai endpoint URL ARGS…`: llm's OpenAI-compatible client (Chat Completions,
        or Responses with `--responses`), which logs nothing."""
        return self.launch(runs.Finished, ["llm", "openai", "endpoint", url, *args], timeout_s)
