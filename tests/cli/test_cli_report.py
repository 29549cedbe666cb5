"""The report's redaction, as pure code: what names a person, an account or a machine goes."""

from __future__ import annotations

from kirod.cli.commands.report import Redactor, trace_shapes


def test_labels_ids_credentials_and_home_are_replaced() -> None:
    redact = Redactor([("a1b2c3", "work"), ("d4e5f6", "me@example.com")], "/home/ana")
    doc = {
        "reason": "account work is throttled; me@example.com too. So is work.",
        "path": "/home/ana/.local/state/kirod",
        "other": "/home/anabel/x",
        "proxy": "http://user:pa55@proxy.corp:3128",
        "socks": "socks5h://token@10.0.0.1:1080",
        "network": "the network of work-station",
        "ids": ["a1b2c3", "d4e5f6x"],
    }
    assert redact(doc) == {
        "reason": "account account-1 is throttled; account-2 too. So is account-1.",
        "path": "~/.local/state/kirod",
        "other": "/home/anabel/x",
        "proxy": "http://proxy.corp:3128",
        "socks": "socks5h://10.0.0.1:1080",
        "network": "the network of work-station",
        "ids": ["account-1", "d4e5f6x"],
    }


def test_trace_shapes_keep_no_request_or_key_id() -> None:
    redact = Redactor([("acc-1", "work")], "/home/ana")
    trace = {
        "requests": [
            {
                "id": 7,
                "request_id": "req_123",
                "key_id": "key_9",
                "model": "claude-sonnet-4-6",
                "status": 200,
                "account_id": "acc-1",
                "attempts": [{"account_id": "acc-1", "outcome": "ok", "frames": 5}],
            }
        ]
    }
    (shape,) = trace_shapes(trace, redact)
    assert "req_123" not in str(shape)
    assert "key_9" not in str(shape)
    assert (shape["model"], shape["status"], shape["account"]) == (
        "claude-sonnet-4-6",
        200,
        "account-1",
    )
    assert shape["attempts"][0]["account"] == "account-1"
    assert shape["attempts"][0]["frames"] == 5
