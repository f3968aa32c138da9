#!/usr/bin/env python3
"""How a shop's backend signs its shoppers' seckill tokens: a JWT (RFC 7519) signed with
the shop's private key, here with PyJWT (`pip install 'pyjwt[crypto]'`).

The nodes hold only the public key, published in the JWKS they read
(`[identity] jwks_file` or `jwks_url`). `seckill-dataplane keys new --alg EdDSA --kid shop-1
--dir keys` makes such a pair: keys/shop-1.pem (the private key) and keys/jwks.json. A
token names its key in the header (`kid`, here the key file's name), its shopper in `sub`,
the shop in `iss` and seckill in `aud` (the nodes' identity.issuer and identity.audience),
and expires in `exp`. Tokens expiring more than max_token_ttl_s (a day by default) ahead
are refused: sign short-lived ones, and sign again when a shopper comes back.

    python3 examples/shop_token.py --key-file keys/shop-1.pem \\
        --issuer https://shop.example alice@example.com
"""

import argparse
import pathlib
import sys
import time

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa


def algorithm(key) -> str:
    """The one algorithm a node takes for the key's type."""
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "EdDSA"
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1":
        return "ES256"
    if isinstance(key, rsa.RSAPrivateKey) and key.key_size >= 2048:
        return "RS256"
    raise SystemExit("--key-file: an Ed25519, P-256 or RSA (2048 bits or more) private key")


def sign(key_file: str, user: str, issuer: str, audience: str = "seckill",
         ttl_s: int = 3600, kid: str | None = None) -> str:
    pem = pathlib.Path(key_file).read_bytes()
    key = serialization.load_pem_private_key(pem, password=None)
    now = int(time.time())
    claims = {"sub": user, "iss": issuer, "aud": audience, "iat": now, "exp": now + ttl_s}
    headers = {"kid": kid or pathlib.Path(key_file).stem}
    return jwt.encode(claims, key, algorithm=algorithm(key), headers=headers)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--key-file", required=True, help="the shop's private key (PEM)")
    p.add_argument("--kid", help="the key's id in the JWKS (default: the file's name)")
    p.add_argument("--issuer", required=True, help="the nodes' identity.issuer")
    p.add_argument("--audience", default="seckill", help="the nodes' identity.audience")
    p.add_argument("--ttl-s", type=int, default=3600, help="lifetime in seconds")
    p.add_argument("user_id")
    a = p.parse_args()
    if a.ttl_s <= 0:
        sys.exit("--ttl-s: must be above 0")
    print(sign(a.key_file, a.user_id, a.issuer, a.audience, a.ttl_s, a.kid))


if __name__ == "__main__":
    main()
