"""A shop's webhook endpoint, as a shop would write one with the Standard Webhooks
reference library: every webhook verified by `Webhook(secret).verify`, and the verified
ones appended to a log, a JSON line each. It answers 503 for its first DOWN_S seconds
(the shop down), 400 to the webhooks whose type is named in REFUSE_FILE while that file
exists, and 204 to the rest; a webhook that does not verify gets 401 and is logged as
such.

    shop.py PORT SECRET DOWN_S LOG REFUSE_FILE"""

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook

port, secret, down_s, log, refuse_file = sys.argv[1:6]
started = time.monotonic()
hook = Webhook(secret)


class Shop(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0"))).decode()
        if time.monotonic() - started < float(down_s):
            return self.answer(503)
        try:
            event = hook.verify(body, dict(self.headers.items()))
        except Exception as e:  # the library's WebhookVerificationError and the like
            self.record({"invalid": str(e)})
            return self.answer(401)
        refused = []
        if os.path.exists(refuse_file):
            refused = open(refuse_file).read().split()
        if event["type"] in refused:
            return self.answer(400)
        self.record({"id": self.headers["webhook-id"], "type": event["type"], "data": event["data"]})
        self.answer(204)

    def record(self, entry):
        with open(log, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def answer(self, status):
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(port)), Shop).serve_forever()
