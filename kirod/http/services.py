"""What the public handlers need, built once by the daemon's composition root."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web

from kirod.accounts.model_directory import ModelDirectory
from kirod.config import Settings
from kirod.control.spending import Spending
from kirod.dispatch.pipeline import Dispatcher
from kirod.http.auth import KeyGate
from kirod.protocols.anthropic import ThinkingSigner
from kirod.protocols.responses import ReasoningBox
from kirod.storage.accounts import AccountStore
from kirod.storage.db import Database
from kirod.storage.responses import ResponseStore
from kirod.upstream.outages import Outages


@dataclass(frozen=True)
class Services:
    settings: Settings
    db: Database
    accounts: AccountStore
    gate: KeyGate
    dispatcher: Dispatcher
    models: ModelDirectory
    signer: ThinkingSigner
    reasoning_box: ReasoningBox
    responses: ResponseStore
    spending: Spending  # GET /v1/usage
    outages: Outages = field(default_factory=Outages)  # the client's: Kiro hosts not reachable


SERVICES = web.AppKey("services", Services)
