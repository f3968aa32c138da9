//! Properties over generated inputs of the pure logic: partition routing and hash slots,
//! token, ticket and download-link signatures, token-bucket arithmetic, and request
//! routing on arbitrary paths. Beside it: `transfer_replay.rs` (the transfer scripts) and
//! `reconcile_faults.rs` (reconciliation of generated ledgers with planted faults).

use proptest::prelude::*;
use std::time::{Duration, Instant};

use seckill_core::auth::{sign_download, valid_user_id, verify_download, Secret, TokenError};
use seckill_core::identity::{self, KeySet, Rules, Signer};
use seckill_core::keys::{partition_of, PartitionKeys};
use seckill_dataplane::guard::bucket::Bucket;
use seckill_dataplane::guard::pow::{sign_ticket, verify_ticket, Ticket};
use seckill_dataplane::request::Route;
use seckill_dataplane::store::slot_of;

fn secret() -> Secret {
    Secret::new(b"property tests, a long enough secret".to_vec()).expect("secret")
}

/// The shop's key, and what a node checks its tokens against.
fn shop() -> (Signer, KeySet, Rules) {
    let k = Signer::ed25519(&[9; 32], "shop");
    let keys = KeySet::default().with(k.public_key());
    let rules = Rules {
        issuer: "https://shop.example".into(),
        audience: "seckill".into(),
        leeway_s: 0,
        max_ttl_s: 10_000_000,
    };
    (k, keys, rules)
}

fn jwt(k: &Signer, user: &str, exp_s: i64) -> String {
    k.sign(&serde_json::json!({
        "sub": user, "iss": "https://shop.example", "aud": "seckill", "exp": exp_s,
    }))
}

/// Valid user ids: what the demo issuer and identity providers hand out.
fn user_id() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_@+.-]{1,64}"
}

proptest! {
    #[test]
    fn a_user_always_lands_on_the_same_partition_in_range(user in user_id(), parts in 1u32..512) {
        let p = partition_of(&user, parts);
        prop_assert!(p < parts);
        prop_assert_eq!(p, partition_of(&user, parts));
    }

    #[test]
    fn every_key_of_one_purchase_is_in_one_slot(
        campaign in "[a-z0-9-]{1,32}",
        p in 0u32..1024,
    ) {
        let k = PartitionKeys::new(&campaign, p);
        let slot = slot_of(k.part().as_bytes());
        for other in [
            k.buyers(), k.holds(), k.events(), k.transfers_out(), k.transfers_in(),
            k.once(), k.pass_log(), k.order(&format!("{campaign}.{p}.7")),
        ] {
            prop_assert_eq!(slot_of(other.as_bytes()), slot, "{}", other);
        }
    }

    #[test]
    fn a_shoppers_token_verifies_as_its_user_until_it_expires(user in user_id(), ttl in 1i64..10_000_000, now in 1_000_000_000i64..2_000_000_000) {
        let (k, keys, rules) = shop();
        let t = jwt(&k, &user, now + ttl);
        prop_assert_eq!(identity::verify(&keys, &rules, &t, now * 1000).map(|s| s.user), Ok(user.clone()));
        prop_assert_eq!(identity::verify(&keys, &rules, &t, (now + ttl) * 1000), Err(identity::Refused::Expired));
    }

    #[test]
    fn a_changed_shoppers_token_never_verifies_as_another(user in user_id(), at in any::<prop::sample::Index>(), with in any::<u8>()) {
        let (k, keys, rules) = shop();
        let t = jwt(&k, &user, 1_900_000_000);
        let mut bytes = t.clone().into_bytes();
        let i = at.index(bytes.len());
        prop_assume!(bytes[i] != with);
        bytes[i] = with;
        if let Ok(changed) = String::from_utf8(bytes) {
            // Base64 has a few spellings of the same bytes; a change that decodes to the
            // same token is the same token.
            if let Ok(s) = identity::verify(&keys, &rules, &changed, 1_800_000_000_000) {
                prop_assert_eq!(s.user, user);
            }
        }
    }

    #[test]
    fn a_link_moves_no_character_between_order_and_expiry(order in "[a-z]{1,20}[0-9]{1,3}", exp in 1_000_000_000_000i64..2_000_000_000_000) {
        // The signature covers the order and the expiry as separate fields: the link of
        // "alice7" expiring at E is no link of "alice" expiring at "7E".
        let s = secret();
        let t = sign_download(&s, &order, exp);
        let mut parts = t.split('.');
        let (_, e, sig) = (parts.next().expect("order"), parts.next().expect("exp"), parts.next().expect("sig"));
        let (short, moved) = order.split_at(order.len() - 1);
        use base64::Engine;
        let forged = format!(
            "{}.{moved}{e}.{sig}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(short)
        );
        prop_assert_eq!(verify_download(&s, &forged, 0), Err(TokenError::BadSignature));
    }

    #[test]
    fn tickets_and_links_verify_only_for_what_they_were_signed_for(
        campaign in "[a-z0-9-]{1,32}",
        user in user_id(),
        id in "[a-z0-9]{1,16}",
        order in "[a-z0-9-]{1,32}\\.[0-9]{1,3}\\.[0-9]{1,6}",
    ) {
        let s = secret();
        let ticket = Ticket { campaign, user: user.clone(), id };
        let signed = sign_ticket(&s, &ticket, i64::MAX / 2);
        prop_assert_eq!(verify_ticket(&s, &signed, 0), Ok(ticket));
        // A ticket is no link, a link no ticket, and neither a shopper's token.
        prop_assert!(verify_download(&s, &signed, 0).is_err());
        let link = sign_download(&s, &order, i64::MAX / 2);
        prop_assert_eq!(verify_download(&s, &link, 0), Ok(order));
        prop_assert!(verify_ticket(&s, &link, 0).is_err());
        let (_, keys, rules) = shop();
        prop_assert!(identity::verify(&keys, &rules, &link, 0).is_err());
        prop_assert!(identity::verify(&keys, &rules, &signed, 0).is_err());
        prop_assert!(valid_user_id(&user));
    }

    #[test]
    fn a_bucket_never_gives_more_than_its_burst_and_rate(
        rate in 0.5f64..1000.0,
        burst in 1.0f64..500.0,
        gaps_us in prop::collection::vec(0u64..20_000, 1..400),
    ) {
        let t0 = Instant::now();
        let mut b = Bucket::full(burst, t0);
        let (mut now, mut taken) = (t0, 0u64);
        for gap in gaps_us {
            now += Duration::from_micros(gap);
            match b.take(now, rate, burst) {
                Ok(()) => taken += 1,
                Err(wait) => {
                    // The wait it names is enough: a token is there by then.
                    let mut probe = b;
                    prop_assert!(probe.take(now + wait + Duration::from_micros(1), rate, burst).is_ok());
                }
            }
            let allowed = burst + rate * (now - t0).as_secs_f64();
            prop_assert!(taken as f64 <= allowed + 1e-9, "{} taken, {} allowed", taken, allowed);
        }
    }

    #[test]
    fn any_path_routes_or_is_refused_without_panicking(path in "\\PC{0,80}", post in any::<bool>()) {
        let method = if post { hyper::Method::POST } else { hyper::Method::GET };
        let _ = Route::of(&method, &path);
    }
}
