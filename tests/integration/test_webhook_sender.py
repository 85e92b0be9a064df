"""The Standard Webhooks sender over real HTTP, to a real receiver on this machine."""

from __future__ import annotations

from domain.webhooks import new_secret
from tests.support.webhook_receiver import WebhookReceiver
from worker.webhooks import HttpWebhookSender

BODY = b'{"id":"evt_1","type":"user.enabled"}'


def test_a_delivery_is_signed_as_the_receiver_verifies_it_with_each_secret() -> None:
    current, previous = new_secret(), new_secret()
    with WebhookReceiver() as receiver:
        receiver.secret = previous  # a receiver that has not switched to the new secret yet
        response = HttpWebhookSender(allow_private_networks=True).send(
            receiver.url,
            message_id="evt_1",
            body=BODY,
            secrets=[current, previous],
            timeout_seconds=5,
        )

    assert response.ok
    (received,) = receiver.requests
    assert received.verified
    assert received.body == BODY
    assert received.webhook_id == "evt_1"
    assert len(received.headers["webhook-signature"].split(" ")) == 2


def test_a_receiver_on_a_private_address_is_not_requested_unless_allowed() -> None:
    with WebhookReceiver() as receiver:
        receiver.secret = new_secret()
        response = HttpWebhookSender(allow_private_networks=False).send(
            receiver.url,
            message_id="evt_1",
            body=BODY,
            secrets=[receiver.secret],
            timeout_seconds=5,
        )

    assert response.status is None
    assert response.error is not None
    assert "not a public address" in response.error
    assert receiver.requests == []
