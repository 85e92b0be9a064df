"""A webhook receiver for trying billing-worker's events: it checks each delivery's signature
(Standard Webhooks) and prints the event's type and subject once per event id.

    WEBHOOK_SECRET=whsec_... python examples/webhook_receiver.py [PORT]
"""

import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from standardwebhooks import Webhook, WebhookVerificationError

webhook = Webhook(os.environ["WEBHOOK_SECRET"])  # printed by `billing-worker webhooks add`
seen: set[str] = set()  # deliveries are at least once: a repeated webhook-id is a duplicate


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        try:
            event = webhook.verify(body, dict(self.headers))  # signature and timestamp
        except WebhookVerificationError:
            self.send_response(400)
        else:
            if event["id"] not in seen:
                seen.add(event["id"])
                print(event["type"], event["subject"]["id"], flush=True)
            self.send_response(204)  # any 2xx, quickly; anything else is retried
        self.end_headers()


port = int(sys.argv[1]) if len(sys.argv) > 1 else 9999
HTTPServer(("127.0.0.1", port), Receiver).serve_forever()
