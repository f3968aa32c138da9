//! A buyer's payments, and what it sees of its order after them. With the provider's
//! secret, each payment is a `payment.succeeded` webhook signed here and sent from the
//! provider's own addresses, sent again with the same `webhook-id` after a 429, a 503 or
//! no answer; a late payer first reads its order's deadline and pays after it, one who
//! pays twice sends a second payment of its own, one who pays the wrong amount sends a
//! minor unit too much. A provider that storms sends copies of each webhook (the same id,
//! the same body) at once with it, each once; their answers are counted apart. Without the secret, the buyer pays through the demo provider's
//! route, sent again the same way. A buyer whose order was paid looks at it until it is
//! delivered and downloads the content, as a buyer's page would; any other looks once.
//! The last look is counted.

use std::borrow::Cow;
use std::cell::RefCell;
use std::future::Future;
use std::net::Ipv4Addr;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::context::Context;
use crate::http::{Client, Req};
use crate::plan::Payment;
use crate::provider::{Provider, Webhook, WEBHOOK_PATH};
use crate::tally::{OrderLook, Tally};
use seckill_core::api::{Glance, PaymentTaken};
use seckill_core::backoff::Backoff;

/// Units each purchase here buys, and so each payment pays for.
const UNITS: u64 = 1;

/// How long after its hold's deadline a late payer pays: past any difference between
/// this machine's clock and Redis's on one host.
const LATE_BY: Duration = Duration::from_millis(500);

/// Where the provider's webhooks come from: a few addresses of its own, 127.4.0.1 and up.
fn provider_ip(n: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 4, 0, 1 + (n % 16) as u8)
}

/// A buyer who pays: its session's number (which makes its payments' ids unique in the
/// run), its address and token, and how it pays.
pub(crate) struct Buyer<'a> {
    pub n: usize,
    pub ip: Ipv4Addr,
    pub token: &'a str,
    pub pays: Payment,
}

/// Pays for `order` as `b` does, then looks at it: until it is delivered (and downloads
/// the content) when it was paid, else once.
pub(crate) async fn pay_and_collect(
    client: &Client,
    ctx: &Context,
    b: &Buyer<'_>,
    order: &str,
    tally: &RefCell<Tally>,
) {
    let paid = match &ctx.provider {
        Some(p) => pay_by_webhook(client, ctx, p, b, order, tally).await,
        None => Some(send(client, ctx, b, order, Payer::Demo, tally).await),
    };
    match paid {
        Some(true) => collect(client, b, order, tally).await,
        Some(false) => {
            if let Some(look) = look(client, b, order, tally).await {
                tally.borrow_mut().payments.seen(order, &look, false);
            }
        }
        None => {}
    }
}

/// The provider's payments for `order`: whether one was answered `paid`, or nothing when
/// no payment was sent.
async fn pay_by_webhook(
    client: &Client,
    ctx: &Context,
    p: &Provider,
    b: &Buyer<'_>,
    order: &str,
    tally: &RefCell<Tally>,
) -> Option<bool> {
    if b.pays == Payment::Late {
        // The order's page shows the deadline; the money comes after it.
        let pay_by = look(client, b, order, tally).await?.pay_by_ms;
        let left = (pay_by - seckill_core::now_ms()).max(0) as u64;
        let wait = Duration::from_millis(left) + LATE_BY;
        if Instant::now() + wait >= ctx.deadline {
            tally.borrow_mut().payments.late_not_sent += 1;
            return None;
        }
        tokio::time::sleep(wait).await;
    }
    let wrong = b.pays == Payment::WrongAmount;
    let first = p.payment(b.n, 0, order, UNITS, wrong);
    let mut paid = send_in_storm(client, ctx, p, b, order, &first, tally).await;
    if b.pays == Payment::Twice {
        let second = p.payment(b.n, 1, order, UNITS, false);
        paid |= send_in_storm(client, ctx, p, b, order, &second, tally).await;
    }
    Some(paid)
}

/// Sends `w` as [`send`] does and, at the same time, the provider's copies of it (the same
/// `webhook-id`, the same body), each once, as a retry storm sends them: the node must take
/// the payment once. Whether `w` itself was answered `paid`; the copies' answers are
/// counted apart, and count no payment.
async fn send_in_storm(
    client: &Client,
    ctx: &Context,
    p: &Provider,
    b: &Buyer<'_>,
    order: &str,
    w: &Webhook,
    tally: &RefCell<Tally>,
) -> bool {
    if p.copies() == 0 {
        return send(client, ctx, b, order, Payer::Provider(p, w), tally).await;
    }
    let mut paid = false;
    let mut all: Vec<Pin<Box<dyn Future<Output = ()> + '_>>> = Vec::new();
    all.push(Box::pin(async {
        paid = send(client, ctx, b, order, Payer::Provider(p, w), tally).await;
    }));
    for k in 0..p.copies() {
        all.push(Box::pin(send_copy(client, p, b, w, k as usize, tally)));
    }
    join_all(all).await;
    paid
}

/// Copy `k` of `w`, sent once from another of the provider's addresses (and so, with
/// several nodes, maybe to another node); its answer is counted among the copies'.
async fn send_copy(
    client: &Client,
    p: &Provider,
    b: &Buyer<'_>,
    w: &Webhook,
    k: usize,
    tally: &RefCell<Tally>,
) {
    let headers = p.headers(w, seckill_core::now_ms() / 1000).to_vec();
    let req = Req {
        method: "POST",
        path: WEBHOOK_PATH,
        token: None,
        idempotency_key: None,
        receipt: None,
        headers: &headers,
        body: w.body.as_bytes(),
    };
    let sent = Instant::now();
    let r = client
        .send(provider_ip(b.n + 1 + k), &req, webhook_answer)
        .await;
    let answered = r.is_ok();
    let said = match r {
        Ok((200, Some(outcome))) => outcome,
        Ok((status, said)) => format!("{status} {}", said.as_deref().unwrap_or("?")),
        Err(f) => format!("error {}", f.name()),
    };
    let mut t = tally.borrow_mut();
    t.timed("pay copy", sent, answered);
    *t.payments.copies.entry(said).or_default() += 1;
}

/// What the node said to a webhook: its status, and the outcome of a 200 or the error
/// code of anything else.
fn webhook_answer(status: u16, body: &[u8]) -> (u16, Option<String>) {
    let said = match status {
        200 => serde_json::from_slice::<PaymentTaken>(body)
            .ok()
            .map(|t| t.outcome),
        _ => Glance::of(body).error.map(Cow::into_owned),
    };
    (status, said)
}

/// Runs `all` together, until each is done.
async fn join_all(mut all: Vec<Pin<Box<dyn Future<Output = ()> + '_>>>) {
    std::future::poll_fn(|cx| {
        all.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if all.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Who sends a payment: the provider, its webhook; or the buyer, through the demo
/// provider's route (whose node signs the webhook to itself, one payment an order).
#[derive(Clone, Copy)]
enum Payer<'a> {
    Provider(&'a Provider, &'a Webhook),
    Demo,
}

/// Sends one payment until the node answers it: the same request again after a 429, a
/// 503 or no answer (a webhook with its id and body, signed anew at each try as providers
/// sign their retries), backing off from 250 ms to 2 s, until the run's deadline. Whether
/// it was answered `paid`.
async fn send(
    client: &Client,
    ctx: &Context,
    b: &Buyer<'_>,
    order: &str,
    payer: Payer<'_>,
    tally: &RefCell<Tally>,
) -> bool {
    tally.borrow_mut().payments.sent += 1;
    let demo_path = format!("/api/orders/{order}/pay");
    let mut backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(2));
    loop {
        // A webhook is signed when it is sent.
        let headers = match payer {
            Payer::Provider(p, w) => p.headers(w, seckill_core::now_ms() / 1000).to_vec(),
            Payer::Demo => Vec::new(),
        };
        let (ip, req) = match payer {
            Payer::Provider(_, w) => (
                provider_ip(b.n),
                Req {
                    method: "POST",
                    path: WEBHOOK_PATH,
                    token: None,
                    idempotency_key: None,
                    receipt: None,
                    headers: &headers,
                    body: w.body.as_bytes(),
                },
            ),
            Payer::Demo => (
                b.ip,
                Req {
                    method: "POST",
                    path: &demo_path,
                    token: Some(b.token),
                    idempotency_key: None,
                    receipt: None,
                    headers: &[],
                    body: b"",
                },
            ),
        };
        let sent = Instant::now();
        let r = client
            .send(ip, &req, |status, body| match (status, payer) {
                // The demo's 200 is a paid order.
                (200, Payer::Demo) => (status, Some("paid".to_string())),
                _ => webhook_answer(status, body),
            })
            .await;
        let again = {
            let mut t = tally.borrow_mut();
            t.timed("pay", sent, r.is_ok());
            match r {
                Ok((status @ (429 | 503), said)) => {
                    format!("{status} {}", said.as_deref().unwrap_or("?"))
                }
                Err(f) => format!("error {}", f.name()),
                Ok((200, Some(outcome))) => {
                    let paid = outcome == "paid";
                    t.paid += u64::from(paid);
                    t.payments.answered(order, outcome);
                    return paid;
                }
                Ok((status, said)) => {
                    let refused = format!("{status} {}", said.as_deref().unwrap_or("?"));
                    t.payments.answered(order, refused);
                    return false;
                }
            }
        };
        let wait = backoff.wait();
        if Instant::now() + wait >= ctx.deadline {
            tally.borrow_mut().payments.unanswered += 1;
            return false;
        }
        *tally
            .borrow_mut()
            .payments
            .resent_after
            .entry(again)
            .or_default() += 1;
        tokio::time::sleep(wait).await;
    }
}

/// One look at the order, as its buyer's page has it.
async fn look(
    client: &Client,
    b: &Buyer<'_>,
    order: &str,
    tally: &RefCell<Tally>,
) -> Option<OrderLook> {
    let view_path = format!("/api/orders/{order}");
    let view = Req {
        method: "GET",
        path: &view_path,
        token: Some(b.token),
        idempotency_key: None,
        receipt: None,
        headers: &[],
        body: b"",
    };
    let sent = Instant::now();
    let r = client
        .send(b.ip, &view, |status, body| {
            (status == 200).then(|| OrderLook::of(body)).flatten()
        })
        .await;
    tally.borrow_mut().timed("order", sent, r.is_ok());
    r.ok().flatten()
}

/// Looks at a paid order until it is delivered, then downloads the content, as a
/// buyer's page would.
async fn collect(client: &Client, b: &Buyer<'_>, order: &str, tally: &RefCell<Tally>) {
    let paid = Instant::now();
    // A buyer's page looks soon, then less and less often.
    let mut wait = Duration::from_millis(10);
    let delivered = loop {
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_millis(500));
        match look(client, b, order, tally).await {
            Some(l) if l.status == "delivered" => break l,
            Some(l) if matches!(l.status.as_str(), "paid" | "held") => continue,
            Some(l) => {
                tally.borrow_mut().payments.seen(order, &l, true);
                return;
            }
            None => return,
        }
    };
    {
        let mut t = tally.borrow_mut();
        t.delivered += 1;
        t.latency("delivered", paid);
        t.payments.seen(order, &delivered, true);
    }
    let Some(link) = delivered.download_url else {
        return;
    };
    let sent = Instant::now();
    let get = Req {
        method: "GET",
        path: &link,
        token: None,
        idempotency_key: None,
        receipt: None,
        headers: &[],
        body: b"",
    };
    let r = client
        .send(b.ip, &get, |status, body| status == 200 && !body.is_empty())
        .await;
    let mut t = tally.borrow_mut();
    t.timed("download", sent, r.is_ok());
    if r == Ok(true) {
        t.downloaded += 1;
    }
}
