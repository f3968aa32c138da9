//! Arbitrary bytes through everything the data plane does with a request before it
//! touches a shard's state: HTTP/1 parsing (hyper's parser, httparse), the route, the
//! headers it reads (bearer token, Idempotency-Key, X-Forwarded-For), the JSON bodies,
//! order ids and the signed tokens (user, ticket, download link). Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seckill_core::auth::{self, Secret};
use seckill_dataplane::guard::{self, pow};
use seckill_core::keys::OrderId;
use seckill_dataplane::request::{self, PurchaseBody, Route, SessionBody, SolutionBody};

fuzz_target!(|data: &[u8]| {
    let secret = Secret::new(b"fuzzing secret, long enough for HMAC".to_vec()).expect("secret");
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let Ok(httparse::Status::Complete(head)) = req.parse(data) else {
        // Not a request head: still feed the raw bytes to the body and token parsers.
        let _ = request::json_body::<PurchaseBody>(data);
        if let Ok(s) = std::str::from_utf8(data) {
            let _ = auth::verify_token(&secret, s, 0, i64::MAX);
            let _ = OrderId::parse(s);
        }
        return;
    };
    let (Some(method), Some(path)) = (req.method, req.path) else {
        return;
    };
    let Ok(method) = hyper::Method::from_bytes(method.as_bytes()) else {
        return;
    };
    let route = Route::of(&method, path);
    let mut xff = None;
    for h in req.headers.iter() {
        match h.name.to_ascii_lowercase().as_str() {
            "authorization" => {
                if let Ok(token) = request::bearer(Some(h.value)) {
                    let _ = auth::verify_token(&secret, token, 0, i64::MAX);
                    let _ = pow::verify_ticket(&secret, token, 0);
                }
            }
            "idempotency-key" => {
                let _ = request::idempotency_key(Some(h.value));
            }
            "x-forwarded-for" => xff = std::str::from_utf8(h.value).ok(),
            _ => {}
        }
    }
    let peer = std::net::Ipv4Addr::LOCALHOST.into();
    let _ = guard::client_ip(peer, xff, &[peer]);
    let body = &data[head..];
    match route {
        Ok(Route::Purchase(_)) => {
            let _ = request::json_body::<PurchaseBody>(body);
        }
        Ok(Route::Session) => {
            if let Ok(b) = request::json_body::<SessionBody>(body) {
                let _ = auth::valid_user_id(&b.user_id);
            }
        }
        Ok(Route::Ticket(_)) => {
            if let Ok(b) = request::json_body::<SolutionBody>(body) {
                let _ = pow::solves("prefix", &b.nonce, 8);
            }
        }
        Ok(Route::Order(id) | Route::Pay(id)) => {
            let _ = OrderId::parse(id);
        }
        Ok(Route::Download(token)) => {
            if let Ok(order) = auth::verify_download(&secret, token, 0) {
                let _ = OrderId::parse(&order);
            }
        }
        _ => {}
    }
});
