//! The signatures of shoppers' tokens: ES256 and RS256 checked with ring (ECDSA P-256 and
//! RSA PKCS#1 v1.5 verification in assembly), under the JOSE library's own checks, where
//! the library's default backend (pure Rust) took 5 and 3 times longer a token; EdDSA
//! stays with the default's curve25519-dalek (SIMD), which beat ring's by a fifth
//! (`dataplane/benches/hot.rs`). Signing stays with the default.

use std::sync::{LazyLock, Once};

use jsonwebtoken::crypto::{rust_crypto, CryptoProvider, JwtVerifier};
use jsonwebtoken::errors::{Error, ErrorKind};
use jsonwebtoken::signature::{self, Verifier};
use jsonwebtoken::{Algorithm, DecodingKey, DecodingKeyKind};
use ring::signature::{
    RsaPublicKeyComponents, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED, RSA_PKCS1_2048_8192_SHA256,
};

/// One token's key, for one algorithm: a P-256 key's uncompressed point, or an RSA
/// key's modulus and exponent.
enum RingKey {
    P256(Vec<u8>),
    Rsa { n: Vec<u8>, e: Vec<u8> },
}

struct RingVerifier(RingKey);

impl Verifier<Vec<u8>> for RingVerifier {
    fn verify(&self, msg: &[u8], sig: &Vec<u8>) -> Result<(), signature::Error> {
        let checked = match &self.0 {
            RingKey::P256(k) => {
                UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, k).verify(msg, sig)
            }
            // 2048 to 8192 bits: the key's size was checked when it was taken.
            RingKey::Rsa { n, e } => {
                RsaPublicKeyComponents { n, e }.verify(&RSA_PKCS1_2048_8192_SHA256, msg, sig)
            }
        };
        checked.map_err(|_| signature::Error::new())
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        match self.0 {
            RingKey::P256(_) => Algorithm::ES256,
            RingKey::Rsa { .. } => Algorithm::RS256,
        }
    }
}

/// A verifier of `alg` under `key`: the three algorithms a node takes, nothing else.
fn new_verifier(alg: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>, Error> {
    let key = match (alg, key.kind()) {
        (Algorithm::EdDSA, _) => {
            return (rust_crypto::DEFAULT_PROVIDER.verifier_factory)(alg, key);
        }
        (Algorithm::ES256, DecodingKeyKind::SecretOrDer(k)) => RingKey::P256(k.clone()),
        (Algorithm::RS256, DecodingKeyKind::RsaModulusExponent { n, e }) => RingKey::Rsa {
            n: n.clone(),
            e: e.clone(),
        },
        _ => return Err(ErrorKind::InvalidAlgorithm.into()),
    };
    Ok(Box::new(RingVerifier(key)))
}

/// The library's default provider, ES256's and RS256's verification ring's.
static PROVIDER: LazyLock<CryptoProvider> = LazyLock::new(|| CryptoProvider {
    verifier_factory: new_verifier,
    ..rust_crypto::DEFAULT_PROVIDER.clone()
});

/// Makes this verification the process's, before the library's first use (which
/// would fix its default); the tokens of this module call it first.
pub(super) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if CryptoProvider::install_default(&PROVIDER).is_err() {
            // Something used the library first: its default backend verifies, slower.
            tracing::warn!(
                "the JOSE library's backend was fixed before ring's verification was installed"
            );
        }
    });
}

/// Whether this verification is the process's.
#[cfg(test)]
pub(super) fn installed() -> bool {
    CryptoProvider::try_get_default().is_some_and(|p| std::ptr::eq(p, &*PROVIDER))
}
