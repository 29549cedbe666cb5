"""A faithful fake of the Kiro service, speaking genuine AWS event-stream frames.

Start with `running_fake()` (inside an event loop) or `ThreadedFake` (synchronous code), mint an
account with `FakeKiro.issue_social_account()` / `issue_idc_account()`, script answers with
`FakeKiro.enqueue(Reply(...))` or `Script(fault=Fault...)`, and read what kirod sent with
`FakeKiro.requests()`; `FakeKiro.connections` closes, resets or half-closes its connections.
`python -m kirod.testing.fake_kiro` serves it standalone; `RemoteFake` drives such a fake from
another process.
"""

from kirod.testing.fake_kiro.catalog import (
    DEFAULT_MODELS,
    FABLE_MODELS,
    LAUNCH_DAY_MODELS,
    Model,
)
from kirod.testing.fake_kiro.connections import ConnectionFault
from kirod.testing.fake_kiro.remote import RemoteFake, RemoteFakeError
from kirod.testing.fake_kiro.runner import ThreadedFake, running_fake
from kirod.testing.fake_kiro.script import (
    Fault,
    Latency,
    Reply,
    Script,
    TokenUsage,
    ToolCall,
    ToolCut,
)
from kirod.testing.fake_kiro.search import Search, SearchFault
from kirod.testing.fake_kiro.server import build_app
from kirod.testing.fake_kiro.state import FakeKiro, RecordedRequest
from kirod.testing.fake_kiro.tokens import AuthKind, DeviceFlow, DeviceOutcome, TokenSet
from kirod.testing.fake_kiro.usage import Bonus, FreeTrial, Usage
from kirod.testing.fake_kiro.validate import RULES, Rejection, validate_chat

__all__ = [
    "DEFAULT_MODELS",
    "FABLE_MODELS",
    "LAUNCH_DAY_MODELS",
    "RULES",
    "AuthKind",
    "Bonus",
    "ConnectionFault",
    "DeviceFlow",
    "DeviceOutcome",
    "FakeKiro",
    "Fault",
    "FreeTrial",
    "Latency",
    "Model",
    "RecordedRequest",
    "Rejection",
    "RemoteFake",
    "RemoteFakeError",
    "Reply",
    "Script",
    "Search",
    "SearchFault",
    "ThreadedFake",
    "TokenSet",
    "TokenUsage",
    "ToolCall",
    "ToolCut",
    "Usage",
    "build_app",
    "running_fake",
    "validate_chat",
]
