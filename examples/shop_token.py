#!/usr/bin/env python3
"""How a shop's backend signs its shoppers' seckill tokens (Python 3, standard library only).

A token is base64url(user) "." expiry_ms "." base64url(HMAC-SHA256), where the MAC covers
the domain b"user", the user id and the expiry, each preceded by its length as an 8-byte
big-endian integer. The key is the shop's token key, which
`seckill-dataplane keys shop-token --out shop.key` derives from the nodes' secret: the
file's bytes without the surrounding white space. It signs shoppers' tokens and nothing
else; the nodes' secret itself stays with the nodes. Tokens expiring more than max_token_ttl_s (a day by default)
ahead are refused: sign short-lived ones, and sign again when a shopper comes back.

    python3 examples/shop_token.py --key-file shop.key alice@example.com
"""

import argparse
import base64
import hashlib
import hmac
import struct
import sys
import time


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign(key: bytes, user: str, ttl_s: int = 3600) -> str:
    expiry = str(int(time.time() * 1000) + ttl_s * 1000).encode()
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in (b"user", user.encode(), expiry):
        mac.update(struct.pack(">Q", len(part)))
        mac.update(part)
    return f"{b64(user.encode())}.{expiry.decode()}.{b64(mac.digest())}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--key-file", required=True, help="the shop's token key (seckill-dataplane keys shop-token)")
    p.add_argument("--ttl-s", type=int, default=3600, help="lifetime of the token")
    p.add_argument("user", help="the shopper's id: 1-64 of letters, digits, _ - @ + .")
    a = p.parse_args()
    with open(a.key_file, "rb") as f:
        key = f.read().strip()
    if len(key) < 32:
        print(f"error: --key-file: {a.key_file} holds fewer than 32 bytes", file=sys.stderr)
        return 2
    print(sign(key, a.user, a.ttl_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
