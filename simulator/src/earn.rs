//! Tickets before the opening: each account earns its own from its own source address
//! (challenge, proof of work, ticket), as shoppers do on the sale page while it counts
//! down.

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Instant;

use crate::http::{Client, Req};
use crate::tally::Tally;
use seckill_core::api;

/// Earns a ticket for each account from its own source address (challenge, proof of
/// work, ticket), as shoppers do on the sale page while it counts down. An account the
/// data plane turns away (rate limits, the ticket cap) simply has none.
pub fn earn_tickets(
    targets: &[SocketAddr],
    campaign: &str,
    accounts: Vec<(String, Ipv4Addr)>,
    threads: usize,
) -> (Vec<Option<String>>, Tally) {
    let chunk = accounts.len().div_ceil(threads.max(1)).max(1);
    let handles: Vec<_> = accounts
        .chunks(chunk)
        .map(|part| {
            let (part, campaign, targets) = (part.to_vec(), campaign.to_string(), targets.to_vec());
            std::thread::spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return (vec![None; part.len()], Tally::new());
                };
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, async move {
                    let client = Client::new(targets, 64);
                    let tally = RefCell::new(Tally::new());
                    let mut out = Vec::with_capacity(part.len());
                    for (token, ip) in &part {
                        out.push(earn_one(&client, &campaign, token, *ip, &tally).await);
                    }
                    (out, tally.into_inner())
                })
            })
        })
        .collect();
    let mut tickets = Vec::new();
    let mut tally = Tally::new();
    for h in handles {
        if let Ok((t, seen)) = h.join() {
            tickets.extend(t);
            tally.merge(seen);
        }
    }
    (tickets, tally)
}

async fn earn_one(
    client: &Client,
    campaign: &str,
    token: &str,
    ip: Ipv4Addr,
    tally: &RefCell<Tally>,
) -> Option<String> {
    let challenge = |status: u16, body: &[u8]| {
        let c = serde_json::from_slice::<api::Challenge>(body).ok();
        (
            status,
            c.map(|c| {
                (
                    c.challenge_id.into_owned(),
                    c.prefix.into_owned(),
                    c.difficulty,
                )
            }),
        )
    };
    let ticket = |status: u16, body: &[u8]| {
        let t = serde_json::from_slice::<api::Ticket>(body).ok();
        (status, t.map(|t| t.ticket.into_owned()))
    };
    let path = format!("/api/campaigns/{campaign}/challenge");
    let req = Req {
        method: "POST",
        path: &path,
        token: Some(token),
        idempotency_key: None,
        receipt: None,
        headers: &[],
        body: b"",
    };
    let sent = Instant::now();
    let r = client.send(ip, &req, challenge).await;
    tally.borrow_mut().timed("challenge", sent, r.is_ok());
    let (200, Some((challenge_id, prefix, difficulty))) = r.ok()? else {
        return None;
    };
    let nonce = seckill_core::pow::solve(&prefix, difficulty);
    let body = serde_json::to_string(&api::SolutionBody {
        challenge_id,
        nonce,
    })
    .ok()?;
    let path = format!("/api/campaigns/{campaign}/ticket");
    let req = Req {
        body: body.as_bytes(),
        path: &path,
        ..req
    };
    let sent = Instant::now();
    let r = client.send(ip, &req, ticket).await;
    tally.borrow_mut().timed("ticket", sent, r.is_ok());
    let (200, t) = r.ok()? else { return None };
    t
}
