"""A real SMTP server on loopback (aiosmtpd) that keeps every message it accepts, and the Airflow connection that
points at it (AIRFLOW_CONN_SMTP_TEST: plain SMTP, no TLS), for the e-mail alert route."""
from __future__ import annotations

import email
import email.policy
import json

import pytest

from lab.loopback import unused_loopback_port

CONN_ID = "smtp_test"


class Mailbox:
    def __init__(self):
        self.messages: list[email.message.EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []

    async def handle_DATA(self, server, session, envelope):
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        return "250 OK"

    def html(self, i: int) -> str:
        return self.messages[i].get_body(("html",)).get_content()


@pytest.fixture
def smtp_server(monkeypatch):
    from aiosmtpd.controller import Controller

    box = Mailbox()
    port = unused_loopback_port()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps({
        "conn_type": "smtp", "host": "127.0.0.1", "port": port,
        "extra": {"disable_ssl": True, "disable_tls": True, "from_email": "replaudit@lab.example"}}))
    try:
        yield box
    finally:
        controller.stop()
