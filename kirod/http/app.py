"""The public API application: route table and middleware stack."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Middleware

from kirod.config.hosts import ApiHosts
from kirod.http import websocket
from kirod.http.cors import add_cors_headers, make_cors
from kirod.http.hosts import make_host_check
from kirod.http.ingress import (
    API_KEY_ID,
    Handler,
    add_request_id_header,
    make_ingress,
    path_family,
)
from kirod.http.routes import (
    chat,
    compact,
    gemini,
    health,
    messages,
    models,
    ollama,
    responses,
    usage,
)
from kirod.http.services import SERVICES, Services
from kirod.http.streaming import STREAMS, Streams
from kirod.protocols.envelopes import Family

# Paths served without an API key; the console (under CONSOLE_PREFIX) has its own sessions,
# and API keys do not open it.
OPEN_PATHS = frozenset({"/health"})
CONSOLE_PREFIX = "/console"
CHAT_COMPLETIONS = "/v1/chat/completions"


@dataclass(frozen=True)
class Route:
    path: str
    methods: dict[str, Callable[[web.Request], Awaitable[web.StreamResponse]]]


ROUTES: tuple[Route, ...] = (
    Route("/health", {"GET": health.health, "HEAD": health.health}),
    Route("/ready", {"GET": health.ready}),
    Route("/v1/messages", {"POST": messages.create_message}),
    Route("/v1/messages/count_tokens", {"POST": messages.count_tokens}),
    Route(
        "/v1/responses",
        {"POST": responses.create_response, "GET": websocket.responses_socket},
    ),
    Route("/v1/responses/compact", {"POST": compact.compact_response}),
    Route(
        "/v1/responses/{response_id}",
        {"GET": responses.get_response, "DELETE": responses.delete_response},
    ),
    Route("/v1/responses/{response_id}/input_items", {"GET": responses.input_items}),
    Route(CHAT_COMPLETIONS, {"POST": chat.create_chat_completion}),
    Route("/v1/models", {"GET": models.list_models}),
    Route("/v1/models/{model_id}", {"GET": models.get_model}),
    Route("/v1/usage", {"GET": usage.get_usage}),
    Route("/api/version", {"GET": ollama.version, "HEAD": ollama.version}),
    Route("/api/tags", {"GET": ollama.tags, "HEAD": ollama.tags}),
    Route("/api/show", {"POST": ollama.show}),
    Route("/api/chat", {"POST": ollama.chat}),
    Route("/v1beta/models", {"GET": gemini.list_models}),
    Route("/v1beta/models/{model_id}", {"GET": gemini.get_model, "POST": gemini.call}),
    # google-genai given only a base URL; GET /v1/models/{model_id} above stays kirod's own.
    Route("/v1/models/{model_id:[^/]+:[A-Za-z]+}", {"POST": gemini.call}),
)


def outside_api(path: str) -> bool:
    """`/health` (open to all) and the console's paths (its guard checks `Host` and sessions its
    own way): neither the API's `Host` check nor its key gate applies."""
    path = path.rstrip("/")
    return path in OPEN_PATHS or path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/")


def _gate() -> Middleware:
    @web.middleware
    async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path.rstrip("/")
        if not outside_api(path):
            services = request.app[SERVICES]
            family = path_family(request.method, path)
            ollama_path = family is Family.OLLAMA
            if ollama_path:
                ollama.require_enabled(services.settings)  # the 404 says more than a 401
            elif family is Family.GEMINI:
                gemini.require_enabled(services.settings)
            # `ollama_keyless_loopback` lets a local client in without a key on the Ollama
            # routes, and on Chat Completions, which VS Code's Ollama provider chats over.
            request[API_KEY_ID] = await services.gate.admit(
                request, keyless_route=ollama_path or path == CHAT_COMPLETIONS
            )
        return await handler(request)

    return gate


def add_routes(app: web.Application, routes: tuple[Route, ...]) -> None:
    """Register each route with and without one trailing slash (no redirects: POSTs must work)."""
    for route in routes:
        for path in (route.path, route.path + "/"):
            for method, handler in route.methods.items():
                app.router.add_route(method, path, handler)


async def _drain_streams(app: web.Application) -> None:
    app[STREAMS].cut_after(app[SERVICES].settings.shutdown_drain_s)


def build_public_app(services: Services, extra_routes: tuple[Route, ...] = ()) -> web.Application:
    settings = services.settings
    origins = settings.cors_origins
    hosts = ApiHosts(settings.host, settings.allowed_hosts)
    middlewares = [
        make_ingress(),
        make_host_check(hosts, outside_api),
        *([make_cors(origins)] if origins else []),
        _gate(),
    ]
    app = web.Application(
        middlewares=middlewares,
        client_max_size=settings.max_request_body_bytes,
        # The connections' own options (timeouts) are set where they are made:
        # kirod/http/connection.py.
        handler_args={"handler_cancellation": True},
    )
    app[SERVICES] = services
    app[STREAMS] = Streams()
    app.on_shutdown.append(_drain_streams)
    app.on_response_prepare.append(add_request_id_header)
    if origins:
        app.on_response_prepare.append(add_cors_headers)
    websocket.install(app)
    add_routes(app, ROUTES + extra_routes)
    return app
