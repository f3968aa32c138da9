"""A shop's endpoint for seckill's order webhooks, as a shop would write one with the
Standard Webhooks reference library (pip install standardwebhooks): each webhook is
verified with the shop's secret before anything is done with it, then printed.

    python3 examples/shop_endpoint.py PORT SECRET_FILE

The node sends them when its configuration names this endpoint and the same secret:

    [shop_webhooks]
    url = "http://127.0.0.1:PORT/hooks"
    secret_file = "SECRET_FILE"
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook

port, secret_file = int(sys.argv[1]), sys.argv[2]
hook = Webhook(open(secret_file).read().strip())
printing = threading.Lock()  # a line a webhook, whichever thread takes it


class Endpoint(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real server keeps its senders' connections

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0"))).decode()
        try:
            event = hook.verify(body, dict(self.headers.items()))
        except Exception as e:
            with printing:
                print(f"refused a webhook: {e}", flush=True)
            self.send_response(401)
        else:
            d = event["data"]
            extra = {k: d[k] for k in ("amount_cents", "currency", "reason", "license_keys") if k in d}
            with printing:
                print(f"{event['type']:<16} {d.get('order_id', '')} {json.dumps(extra) if extra else ''}", flush=True)
            self.send_response(204)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", port), Endpoint).serve_forever()
