//! The keys a node trusts, read from the shop's JWKS (RFC 7517).

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use jsonwebtoken::DecodingKey;
use serde_json::Value;

use super::Alg;

/// The least modulus an RSA key may have (RFC 7518 §3.3), and the most the verifier
/// takes.
const MIN_RSA_BITS: usize = 2048;
const MAX_RSA_BITS: usize = 8192;

/// One public key: its id, the one algorithm it verifies, and its material.
#[derive(Clone)]
pub struct PublicKey {
    kid: String,
    alg: Alg,
    decoding: DecodingKey,
    /// The JWK's key parameters, to tell a key replaced under the same id.
    material: String,
}

impl PublicKey {
    pub fn kid(&self) -> &str {
        &self.kid
    }

    pub fn alg(&self) -> Alg {
        self.alg
    }

    pub(super) fn decoding(&self) -> &DecodingKey {
        &self.decoding
    }

    /// From one JWK; `Err` says why the key is not taken.
    pub fn from_jwk(jwk: &Value) -> Result<PublicKey, String> {
        let text = |name: &str| jwk.get(name).and_then(Value::as_str);
        let kid = text("kid").ok_or("no kid")?.to_string();
        if kid.is_empty() || kid.len() > 128 {
            return Err("a kid of 1 to 128 characters".into());
        }
        if jwk.get("d").is_some() {
            return Err(format!(
                "kid {kid}: a private key; a JWKS publishes public keys only"
            ));
        }
        if let Some(u) = jwk.get("use") {
            if u != "sig" {
                return Err(format!("kid {kid}: \"use\" is {u}, not \"sig\""));
            }
        }
        let part = |name: &str| -> Result<Vec<u8>, String> {
            let t = text(name).ok_or_else(|| format!("kid {kid}: no \"{name}\""))?;
            B64.decode(t)
                .map_err(|_| format!("kid {kid}: \"{name}\" is not base64url"))
        };
        let (alg, decoding, material) = match (text("kty"), text("crv")) {
            (Some("OKP"), Some("Ed25519")) => {
                let x = part("x")?;
                if x.len() != 32 {
                    return Err(format!("kid {kid}: an Ed25519 key is 32 bytes"));
                }
                let key = DecodingKey::from_ed_components(&B64.encode(&x))
                    .map_err(|e| format!("kid {kid}: {e}"))?;
                (Alg::EdDSA, key, format!("OKP:{}", B64.encode(&x)))
            }
            (Some("EC"), Some("P-256")) => {
                let (x, y) = (part("x")?, part("y")?);
                if x.len() != 32 || y.len() != 32 {
                    return Err(format!("kid {kid}: a P-256 point is 32 bytes each way"));
                }
                let key = DecodingKey::from_ec_components(&B64.encode(&x), &B64.encode(&y))
                    .map_err(|e| format!("kid {kid}: {e}"))?;
                (
                    Alg::ES256,
                    key,
                    format!("EC:{}:{}", B64.encode(&x), B64.encode(&y)),
                )
            }
            (Some("RSA"), _) => {
                let (n, e) = (part("n")?, part("e")?);
                let n = strip_zeros(&n);
                let bits = match n.first() {
                    Some(b) => n.len() * 8 - b.leading_zeros() as usize,
                    None => 0,
                };
                if !(MIN_RSA_BITS..=MAX_RSA_BITS).contains(&bits) {
                    return Err(format!(
                        "kid {kid}: an RSA key of {bits} bits; {MIN_RSA_BITS} to {MAX_RSA_BITS} are taken"
                    ));
                }
                // An even exponent, or one below 3, verifies nothing.
                let odd_from_3 = match strip_zeros(&e) {
                    [] => false,
                    [one] => *one >= 3 && one % 2 == 1,
                    [.., last] => last % 2 == 1,
                };
                if !odd_from_3 {
                    return Err(format!(
                        "kid {kid}: an RSA exponent must be odd and at least 3"
                    ));
                }
                let key = DecodingKey::from_rsa_raw_components(n, strip_zeros(&e));
                (
                    Alg::RS256,
                    key,
                    format!("RSA:{}:{}", B64.encode(n), B64.encode(&e)),
                )
            }
            (Some("oct"), _) => {
                return Err(format!(
                    "kid {kid}: a symmetric key; a node takes the shop's public keys only"
                ))
            }
            (kty, crv) => {
                return Err(format!(
                    "kid {kid}: kty {} crv {} is not taken (OKP Ed25519, EC P-256, RSA)",
                    kty.unwrap_or("missing"),
                    crv.unwrap_or("none")
                ))
            }
        };
        if let Some(a) = jwk.get("alg") {
            if a != alg.name() {
                return Err(format!(
                    "kid {kid}: \"alg\" is {a}, but the key's type makes it {}",
                    alg.name()
                ));
            }
        }
        Ok(PublicKey {
            kid,
            alg,
            decoding,
            material,
        })
    }
}

fn strip_zeros(b: &[u8]) -> &[u8] {
    let first = b.iter().position(|&x| x != 0).unwrap_or(b.len());
    &b[first..]
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.kid, self.alg.name())
    }
}

/// The keys a node trusts, by id.
#[derive(Clone, Debug, Default)]
pub struct KeySet {
    keys: Vec<PublicKey>,
}

impl KeySet {
    /// The keys of a JWKS document, and why each key left out was; a document that is
    /// not a JWKS is an error.
    pub fn from_jwks(text: &str) -> Result<(KeySet, Vec<String>), String> {
        let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let keys = doc
            .get("keys")
            .and_then(Value::as_array)
            .ok_or("not a JWKS: no \"keys\" array")?;
        let mut set = KeySet::default();
        let mut left_out = Vec::new();
        for jwk in keys {
            match PublicKey::from_jwk(jwk) {
                Ok(k) if set.get(&k.kid).is_some() => {
                    left_out.push(format!("kid {}: listed twice; the first is taken", k.kid))
                }
                Ok(k) => set.keys.push(k),
                Err(why) => left_out.push(why),
            }
        }
        Ok((set, left_out))
    }

    /// This set with `key` too (replacing a key of the same id).
    pub fn with(mut self, key: PublicKey) -> KeySet {
        self.keys.retain(|k| k.kid != key.kid);
        self.keys.push(key);
        self
    }

    pub fn get(&self, kid: &str) -> Option<&PublicKey> {
        self.keys.iter().find(|k| k.kid == kid)
    }

    pub fn kids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|k| k.kid.as_str())
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether a key of `older` is gone from this set or changed in it: what it verified
    /// must be verified again.
    pub fn drops_any_of(&self, older: &KeySet) -> bool {
        older
            .keys
            .iter()
            .any(|k| self.get(&k.kid).is_none_or(|n| n.material != k.material))
    }
}
