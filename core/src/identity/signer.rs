//! Private keys that mint shoppers' tokens: the demo issuer's, and a shop's key file.

use base64::engine::general_purpose::STANDARD as B64_PEM;
use base64::Engine;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use super::PublicKey;

/// The algorithms a shopper's token may be signed with, each with the one key type it
/// verifies under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    /// Ed25519 (RFC 8037).
    EdDSA,
    /// ECDSA on P-256 with SHA-256.
    ES256,
    /// RSASSA-PKCS1-v1_5 with SHA-256, keys of 2048 bits or more.
    RS256,
}

impl Alg {
    pub const ALL: [Alg; 3] = [Alg::EdDSA, Alg::ES256, Alg::RS256];

    /// The name a JWS header and a JWK's `alg` give it.
    pub fn name(self) -> &'static str {
        match self {
            Alg::EdDSA => "EdDSA",
            Alg::ES256 => "ES256",
            Alg::RS256 => "RS256",
        }
    }

    pub(super) fn jose(self) -> Algorithm {
        match self {
            Alg::EdDSA => Algorithm::EdDSA,
            Alg::ES256 => Algorithm::ES256,
            Alg::RS256 => Algorithm::RS256,
        }
    }
}

impl std::str::FromStr for Alg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Alg::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("{s}: one of EdDSA, ES256, RS256"))
    }
}

/// PKCS #8 of an Ed25519 private key (RFC 8410), up to the 32 bytes of its seed.
const ED25519_PKCS8: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// PKCS #8 of a P-256 private key (RFC 5915, without its public key), up to the 32 bytes
/// of its scalar.
const P256_PKCS8: [u8; 35] = [
    0x30, 0x41, 0x02, 0x01, 0x00, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01,
    0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x04, 0x27, 0x30, 0x25, 0x02, 0x01,
    0x01, 0x04, 0x20,
];

/// A private key and its id: signs shoppers' tokens that its public key verifies.
pub struct Signer {
    kid: String,
    alg: Alg,
    key: EncodingKey,
    jwk: Value,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Signer({} {})", self.kid, self.alg.name())
    }
}

impl Signer {
    fn new(kid: &str, alg: Alg, key: EncodingKey) -> Result<Signer, String> {
        // Before the library's first use, which would fix its backend.
        super::ring_verify::install();
        let public = Jwk::from_encoding_key(&key, alg.jose())
            .map_err(|e| format!("not a usable {} private key: {e}", alg.name()))?;
        let mut jwk = serde_json::to_value(public).map_err(|e| e.to_string())?;
        jwk["kid"] = json!(kid);
        jwk["use"] = json!("sig");
        jwk["alg"] = json!(alg.name());
        Ok(Signer {
            kid: kid.to_string(),
            alg,
            key,
            jwk,
        })
    }

    /// From a PEM private key (PKCS #8; PKCS #1 for RSA): its type makes the algorithm.
    pub fn from_pem(pem: &[u8], kid: &str) -> Result<Signer, String> {
        if let Ok(k) = EncodingKey::from_ed_pem(pem) {
            return Signer::new(kid, Alg::EdDSA, k);
        }
        if let Ok(k) = EncodingKey::from_ec_pem(pem) {
            return Signer::new(kid, Alg::ES256, k);
        }
        if let Ok(k) = EncodingKey::from_rsa_pem(pem) {
            return Signer::new(kid, Alg::RS256, k);
        }
        Err("not a PEM private key of Ed25519, P-256 or RSA".into())
    }

    /// A key file as `keys new` writes it: `DIR/KID.pem`, its name its `kid`.
    pub fn read(path: &std::path::Path) -> Result<Signer, String> {
        let kid = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| format!("{}: the file's name is the key's id", path.display()))?;
        let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Signer::from_pem(&pem, kid).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The Ed25519 key of a 32-byte seed.
    pub fn ed25519(seed: &[u8; 32], kid: &str) -> Signer {
        Signer::new(
            kid,
            Alg::EdDSA,
            EncodingKey::from_ed_der(&ed25519_der(seed)),
        )
        .unwrap_or_else(|e| unreachable!("every 32 bytes seed an Ed25519 key: {e}"))
    }

    /// The Ed25519 key of a 32-byte seed, and its private key as PEM (PKCS #8).
    pub fn ed25519_with_pem(seed: &[u8; 32], kid: &str) -> (Signer, String) {
        (
            Signer::ed25519(seed, kid),
            pem("PRIVATE KEY", &ed25519_der(seed)),
        )
    }

    /// A new random key of `alg`, and its private key as PEM (PKCS #8).
    pub fn generate(alg: Alg, kid: &str) -> Result<(Signer, String), String> {
        let der = match alg {
            Alg::EdDSA => ed25519_der(&rand::random()),
            Alg::ES256 => loop {
                // A scalar at or past the group's order (odds of 2^-32) is drawn again.
                let der = [&P256_PKCS8[..], &rand::random::<[u8; 32]>()].concat();
                let key = EncodingKey::from_ec_der(&der);
                if Jwk::from_encoding_key(&key, Algorithm::ES256).is_ok() {
                    break der;
                }
            },
            Alg::RS256 => {
                return Err(
                    "RS256 keys are made with openssl: openssl genpkey -algorithm RSA \
                     -pkeyopt rsa_keygen_bits:3072"
                        .into(),
                )
            }
        };
        let key = match alg {
            Alg::EdDSA => EncodingKey::from_ed_der(&der),
            _ => EncodingKey::from_ec_der(&der),
        };
        Ok((Signer::new(kid, alg, key)?, pem("PRIVATE KEY", &der)))
    }

    pub fn kid(&self) -> &str {
        &self.kid
    }

    pub fn alg(&self) -> Alg {
        self.alg
    }

    /// The public key, as a JWKS lists it.
    pub fn jwk(&self) -> &Value {
        &self.jwk
    }

    /// The public key, as a node trusts it.
    pub fn public_key(&self) -> PublicKey {
        PublicKey::from_jwk(&self.jwk)
            .unwrap_or_else(|e| unreachable!("a signer's own key is taken: {e}"))
    }

    /// A token of `claims`, its header naming this key.
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg.jose());
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.key)
            .unwrap_or_else(|e| unreachable!("a signer signs: {e}"))
    }

    /// A shopper's token: `user` as `sub`, from `issuer` for `audience`, issued now and
    /// expiring at `expires_ms`.
    pub fn shopper_token(
        &self,
        user: &str,
        issuer: &str,
        audience: &str,
        expires_ms: i64,
    ) -> String {
        let now_s = crate::now_ms() / 1000;
        self.sign(&json!({
            "sub": user,
            "iss": issuer,
            "aud": audience,
            "iat": now_s,
            "exp": expires_ms / 1000,
        }))
    }
}

fn ed25519_der(seed: &[u8; 32]) -> Vec<u8> {
    [&ED25519_PKCS8[..], seed].concat()
}

/// `der` as PEM of `label`, in lines of 64.
fn pem(label: &str, der: &[u8]) -> String {
    let body = B64_PEM.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}
