use super::*;

/// The reference libraries' own example: this secret signs this message so.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const TS: i64 = 1_614_265_330;
const BODY: &[u8] = br#"{"test": 2432232314}"#;
const SIG: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

fn headers<'a>(id: &'a str, ts: &'a str, sig: &'a str) -> Headers<'a> {
    Headers {
        id: Some(id),
        timestamp: Some(ts),
        signature: Some(sig),
    }
}

fn verifier() -> Verifier {
    Verifier::new(vec![WebhookKey::parse(SECRET).expect("secret")])
}

#[test]
fn signs_as_the_reference_libraries_do() {
    let signer = Signer::new(&WebhookKey::parse(SECRET).expect("secret")).expect("symmetric");
    assert_eq!(signer.sign(ID, TS, BODY), SIG);
    assert_eq!(signer.secret_text(), SECRET);
}

#[test]
fn takes_a_good_signature_among_others_and_refuses_the_rest() {
    let ts = TS.to_string();
    let v = verifier();
    assert_eq!(v.verify(headers(ID, &ts, SIG), BODY, TS + 10), Ok(ID));
    let several = format!("v1,bm90IGl0 v1a,AAAA {SIG}");
    assert_eq!(v.verify(headers(ID, &ts, &several), BODY, TS), Ok(ID));
    assert_eq!(
        v.verify(headers(ID, &ts, SIG), br#"{"test": 2432232315}"#, TS),
        Err(Invalid::NoMatch)
    );
    assert_eq!(
        v.verify(headers("msg_other", &ts, SIG), BODY, TS),
        Err(Invalid::NoMatch)
    );
    // The version names the algorithm: an HMAC under the name v1a is no signature.
    let renamed = SIG.replacen("v1,", "v1a,", 1);
    assert_eq!(
        v.verify(headers(ID, &ts, &renamed), BODY, TS),
        Err(Invalid::NoMatch)
    );
    assert_eq!(
        v.verify(headers(ID, &ts, SIG), BODY, TS + TOLERANCE_S + 1),
        Err(Invalid::Stale)
    );
    assert_eq!(
        v.verify(headers(ID, &ts, SIG), BODY, TS - TOLERANCE_S - 1),
        Err(Invalid::Stale)
    );
    assert_eq!(
        v.verify(headers(ID, "soon", SIG), BODY, TS),
        Err(Invalid::BadTimestamp)
    );
    let no_sig = Headers {
        signature: None,
        ..headers(ID, &ts, SIG)
    };
    assert_eq!(
        v.verify(no_sig, BODY, TS),
        Err(Invalid::Missing("webhook-signature"))
    );
    assert_eq!(
        v.verify(headers("a b", &ts, SIG), BODY, TS),
        Err(Invalid::BadId)
    );
    assert_eq!(
        Verifier::default().verify(headers(ID, &ts, SIG), BODY, TS),
        Err(Invalid::NoMatch)
    );
}

#[test]
fn an_ed25519_key_verifies_v1a() {
    use ring::signature::{Ed25519KeyPair, KeyPair};
    let pair = Ed25519KeyPair::from_seed_unchecked(&[9; 32]).expect("seed");
    let key = format!("whpk_{}", B64.encode(pair.public_key().as_ref()));
    let v = Verifier::new(vec![WebhookKey::parse(&key).expect("public key")]);
    let ts = TS.to_string();
    let sig = format!(
        "v1a,{}",
        B64.encode(pair.sign(&signed_content(ID, &ts, BODY)).as_ref())
    );
    assert_eq!(v.verify(headers(ID, &ts, &sig), BODY, TS), Ok(ID));
    assert_eq!(
        v.verify(headers(ID, &ts, &sig), b"{}", TS),
        Err(Invalid::NoMatch)
    );
    assert!(Signer::new(&WebhookKey::parse(&key).expect("key")).is_none());
}

#[test]
fn keys_are_read_as_the_spec_writes_them_or_refused() {
    for bad in [
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_not base64!",
        "whsec_c2hvcnQ=",
        "whpk_c2hvcnQ=",
        "whsk_AAAA",
    ] {
        assert!(WebhookKey::parse(bad).is_err(), "{bad}");
    }
    assert!(WebhookKey::parse(&format!("{SECRET}\n")).is_ok());
}
