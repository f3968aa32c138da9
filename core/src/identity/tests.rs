use serde_json::json;

use super::*;

const NOW: i64 = 1_800_000_000_000;

fn rules() -> Rules {
    Rules {
        issuer: "https://shop.example".into(),
        audience: "seckill".into(),
        leeway_s: 30,
        max_ttl_s: 86_400,
    }
}

fn claims(exp_s: i64) -> serde_json::Value {
    json!({"sub": "alice", "iss": "https://shop.example", "aud": "seckill", "exp": exp_s})
}

fn set_of(signers: &[&Signer]) -> KeySet {
    signers
        .iter()
        .fold(KeySet::default(), |s, k| s.with(k.public_key()))
}

#[test]
fn a_token_of_each_algorithm_names_its_shopper_and_expiry() {
    for alg in [Alg::EdDSA, Alg::ES256] {
        let (k, _pem) = Signer::generate(alg, "k1").expect("generate");
        let keys = set_of(&[&k]);
        let t = k.sign(&claims(NOW / 1000 + 600));
        let s = verify(&keys, &rules(), &t, NOW).expect("verifies");
        assert_eq!(s.user, "alice");
        assert_eq!(s.expires_ms, NOW + 600_000);
    }
}

#[test]
fn the_claims_are_checked_with_the_leeway() {
    let k = Signer::ed25519(&[7; 32], "k1");
    let keys = set_of(&[&k]);
    let exp = NOW / 1000 + 600;
    let check = |c: serde_json::Value| verify(&keys, &rules(), &k.sign(&c), NOW);
    let with = |f: &str, v: serde_json::Value| {
        let mut c = claims(exp);
        c[f] = v;
        check(c)
    };
    assert_eq!(
        with("iss", json!("https://other.example")),
        Err(Refused::Issuer)
    );
    assert_eq!(with("aud", json!("other")), Err(Refused::Audience));
    assert!(with("aud", json!(["other", "seckill"])).is_ok());
    assert!(
        with("iss", json!(["https://shop.example"])).is_err(),
        "iss is one string"
    );
    assert_eq!(with("exp", json!(NOW / 1000 - 31)), Err(Refused::Expired));
    assert!(
        with("exp", json!(NOW / 1000 - 29)).is_ok(),
        "within the leeway"
    );
    assert_eq!(
        with("exp", json!(NOW / 1000 + 86_400 + 31)),
        Err(Refused::TooLong)
    );
    assert_eq!(
        with("nbf", json!(NOW / 1000 + 31)),
        Err(Refused::NotYetValid)
    );
    assert!(with("nbf", json!(NOW / 1000 + 29)).is_ok());
    assert_eq!(
        with("iat", json!(NOW / 1000 + 31)),
        Err(Refused::NotYetValid)
    );
    assert_eq!(with("sub", json!("al ice")), Err(Refused::Subject));
    let mut c = claims(exp);
    c.as_object_mut().map(|o| o.remove("exp"));
    assert_eq!(check(c), Err(Refused::MissingClaim));
}

#[test]
fn only_a_known_key_of_the_named_algorithm_verifies() {
    let k = Signer::ed25519(&[7; 32], "k1");
    let other = Signer::ed25519(&[8; 32], "k1");
    let keys = set_of(&[&k]);
    let c = claims(NOW / 1000 + 600);
    assert_eq!(
        verify(&keys, &rules(), &other.sign(&c), NOW),
        Err(Refused::Signature)
    );
    let stranger = Signer::ed25519(&[8; 32], "k2");
    assert_eq!(
        verify(&keys, &rules(), &stranger.sign(&c), NOW),
        Err(Refused::UnknownKey)
    );
    // A P-256 token under the id of the Ed25519 key.
    let (ec, _) = Signer::generate(Alg::ES256, "k1").expect("generate");
    assert_eq!(
        verify(&keys, &rules(), &ec.sign(&c), NOW),
        Err(Refused::Algorithm)
    );
    for garbage in ["", "a.b", "a.b.c", "not a token", "e30.e30.e30"] {
        assert!(verify(&keys, &rules(), garbage, NOW).is_err(), "{garbage}");
    }
}

#[test]
fn a_jwks_takes_public_signing_keys_only_and_says_why_it_left_one_out() {
    let k = Signer::ed25519(&[7; 32], "ed");
    let (ec, _) = Signer::generate(Alg::ES256, "ec").expect("generate");
    let doc = json!({"keys": [
        k.jwk(),
        ec.jwk(),
        {"kty": "oct", "kid": "hs", "k": "c2VjcmV0"},
        {"kty": "RSA", "kid": "small", "n": "AQAB", "e": "AQAB"},
        {"kty": "OKP", "crv": "Ed25519", "kid": "enc", "use": "enc", "x": k.jwk()["x"]},
        {"kty": "OKP", "crv": "Ed25519", "kid": "liar", "alg": "ES256", "x": k.jwk()["x"]},
        {"kty": "OKP", "crv": "Ed25519", "x": k.jwk()["x"]},
        {"kty": "OKP", "crv": "Ed25519", "kid": "private", "x": k.jwk()["x"], "d": "AAAA"},
        {"kty": "RSA", "kid": "empty", "n": "", "e": "AQAB"},
        {"kty": "RSA", "kid": "zeros", "n": "AAAA", "e": "AQAB"},
    ]});
    let (set, left_out) = KeySet::from_jwks(&doc.to_string()).expect("a JWKS");
    assert_eq!(set.kids().collect::<Vec<_>>(), ["ed", "ec"]);
    assert_eq!(left_out.len(), 8, "{left_out:?}");
    assert!(left_out[5].contains("private"), "{left_out:?}");
    assert!(left_out[0].contains("symmetric"), "{left_out:?}");
    assert!(left_out[1].contains("2048"), "{left_out:?}");
    assert!(KeySet::from_jwks("{}").is_err());
    assert!(KeySet::from_jwks("nope").is_err());
}

#[test]
fn a_set_that_loses_or_replaces_a_key_says_so() {
    let a = Signer::ed25519(&[1; 32], "a");
    let b = Signer::ed25519(&[2; 32], "b");
    let b2 = Signer::ed25519(&[3; 32], "b");
    let old = set_of(&[&a, &b]);
    assert!(!set_of(&[&a, &b, &b2]).drops_any_of(&set_of(&[&a])));
    assert!(set_of(&[&a]).drops_any_of(&old));
    assert!(set_of(&[&a, &b2]).drops_any_of(&old));
    assert!(!set_of(&[&b, &a]).drops_any_of(&old));
}

#[test]
fn a_generated_key_reads_back_from_its_pem() {
    for alg in [Alg::EdDSA, Alg::ES256] {
        let (k, pem) = Signer::generate(alg, "k").expect("generate");
        let back = Signer::from_pem(pem.as_bytes(), "k").expect("reads");
        assert_eq!(back.alg(), alg);
        assert_eq!(back.jwk(), k.jwk());
    }
    assert!(Signer::from_pem(
        b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        "k"
    )
    .is_err());
}

#[test]
fn ring_checks_the_signatures() {
    let k = Signer::ed25519(&[7; 32], "k1");
    let keys = set_of(&[&k]);
    assert!(verify(&keys, &rules(), &k.sign(&claims(NOW / 1000 + 600)), NOW).is_ok());
    assert!(ring_verify::installed());
}

#[test]
fn an_rsa_token_verifies_and_a_changed_one_does_not() {
    // A test key of 2048 bits (dataplane/benches/keys), as a shop's RS256 key.
    let k = Signer::from_pem(
        include_bytes!("../../../dataplane/benches/keys/rsa-2048.pem"),
        "rsa",
    )
    .expect("an RSA key");
    assert_eq!(k.alg(), Alg::RS256);
    let keys = set_of(&[&k]);
    let t = k.sign(&claims(NOW / 1000 + 600));
    assert_eq!(
        verify(&keys, &rules(), &t, NOW).map(|s| s.user).as_deref(),
        Ok("alice")
    );
    // One character of the signature's middle changed.
    let at = t.len() - 40;
    let swap = if &t[at..=at] == "A" { "B" } else { "A" };
    let forged = format!("{}{swap}{}", &t[..at], &t[at + 1..]);
    assert_eq!(
        verify(&keys, &rules(), &forged, NOW),
        Err(Refused::Signature)
    );
}
