"""Signs payment webhooks as a provider would, with the Standard Webhooks reference
library (v1, HMAC-SHA256) or with `cryptography` (v1a, Ed25519, which the library does
not sign). Reads a JSON list of webhooks on stdin, each
{"secret", "id", "body", "age_s", "v1a_seed"?}, and writes the list of their header sets.
With `--public SEED_HEX` it prints the whpk_ key of an Ed25519 seed instead."""

import base64
import json
import sys
from datetime import datetime, timedelta, timezone

from standardwebhooks import Webhook


def v1a(seed_hex, msg_id, ts, body):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(seed_hex))
    sig = key.sign(f"{msg_id}.{ts}.{body}".encode())
    return "v1a," + base64.b64encode(sig).decode()


def main():
    if sys.argv[1:2] == ["--public"]:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives import serialization

        key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(sys.argv[2]))
        raw = key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        print("whpk_" + base64.b64encode(raw).decode())
        return
    out = []
    for w in json.load(sys.stdin):
        at = datetime.now(tz=timezone.utc) - timedelta(seconds=w.get("age_s", 0))
        ts = int(at.timestamp())
        if "v1a_seed" in w:
            sig = v1a(w["v1a_seed"], w["id"], ts, w["body"])
        else:
            sig = Webhook(w["secret"]).sign(w["id"], at, w["body"])
            # The receiver's own check, by the same library: what we send verifies.
            Webhook(w["secret"]).verify(
                w["body"],
                {"webhook-id": w["id"], "webhook-timestamp": str(ts), "webhook-signature": sig},
            ) if w.get("age_s", 0) < 300 else None
        out.append({"webhook-id": w["id"], "webhook-timestamp": str(ts), "webhook-signature": sig})
    json.dump(out, sys.stdout)


main()
