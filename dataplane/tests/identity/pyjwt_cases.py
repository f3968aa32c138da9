#!/usr/bin/env python3
"""Shoppers' tokens minted by PyJWT, not by seckill: the keys of a shop (Ed25519, P-256,
RSA-2048), its JWKS, and one token per case, good and bad.

    pyjwt_cases.py DIR ISSUER   # writes DIR/jwks.json, prints {"case": token, ...}
"""

import base64
import hashlib
import hmac
import json
import sys
import time

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

out_dir, issuer = sys.argv[1], sys.argv[2]
now = int(time.time())
keys = {
    "ed": ed25519.Ed25519PrivateKey.generate(),
    "ec": ec.generate_private_key(ec.SECP256R1()),
    "rsa": rsa.generate_private_key(public_exponent=65537, key_size=2048),
}
algs = {"ed": "EdDSA", "ec": "ES256", "rsa": "RS256"}


def jwk(kid):
    d = json.loads(jwt.algorithms.get_default_algorithms()[algs[kid]].to_jwk(keys[kid].public_key()))
    d.update(kid=kid, use="sig", alg=algs[kid])
    return d


with open(f"{out_dir}/jwks.json", "w") as f:
    json.dump({"keys": [jwk(k) for k in keys]}, f)


def claims(sub, **over):
    c = {"sub": sub, "iss": issuer, "aud": "seckill", "iat": now, "exp": now + 600}
    c.update(over)
    return {k: v for k, v in c.items() if v is not None}


def sign(kid, c, key=None, alg=None, header_kid=None):
    return jwt.encode(c, key or keys[kid], algorithm=alg or algs[kid],
                      headers={"kid": header_kid or kid})


def b64(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


good_ed = sign("ed", claims("pyjwt-ed"))
cases = {
    "ok EdDSA": good_ed,
    "ok ES256": sign("ec", claims("pyjwt-ec")),
    "ok RS256": sign("rsa", claims("pyjwt-rsa", aud=["other", "seckill"])),
    "expired": sign("ed", claims("late", exp=now - 120)),
    "not yet valid": sign("ed", claims("early", nbf=now + 120)),
    "issued in the future": sign("ed", claims("early2", iat=now + 120)),
    "wrong iss": sign("ed", claims("iss", iss="https://evil.example")),
    "wrong aud": sign("ed", claims("aud", aud="other")),
    "no exp": sign("ed", claims("noexp", exp=None)),
    "exp beyond the cap": sign("ed", claims("far", exp=now + 3 * 86_400)),
    "unknown kid": sign("ed", claims("kid"), header_kid="nobody"),
    "known kid, another key": sign("ed", claims("other"), key=ed25519.Ed25519PrivateKey.generate()),
    "ES256 under an EdDSA kid": sign("ec", claims("mix"), header_kid="ed"),
    "alg none": jwt.encode(claims("none"), None, algorithm="none", headers={"kid": "ed"}),
    "tampered claims": ".".join([good_ed.split(".")[0],
                                 b64(json.dumps(claims("mallory")).encode()),
                                 good_ed.split(".")[2]]),
    "garbage": "not-a-token",
    "three dots of garbage": "a.b.c",
}
# The algorithm-confusion attack (RFC 8725 §2.1): HS256 with the RSA key's public PEM as
# the HMAC secret. PyJWT refuses to mint it, so it is built by hand.
pem = keys["rsa"].public_key().public_bytes(serialization.Encoding.PEM,
                                            serialization.PublicFormat.SubjectPublicKeyInfo)
head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "rsa"}).encode())
body = b64(json.dumps(claims("confused")).encode())
mac = hmac.new(pem, f"{head}.{body}".encode(), hashlib.sha256).digest()
cases["HS256 with the RSA public key"] = f"{head}.{body}.{b64(mac)}"
json.dump(cases, sys.stdout)
