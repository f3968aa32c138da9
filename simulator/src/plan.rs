//! The arrival plan: when each request is meant to be sent, by whom, from where. Fixed
//! before the run starts, so the load never waits on replies (an open model).

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::net::Ipv4Addr;
use std::time::Duration;

use crate::scenario::{Population, Profile, Queue, Scenario};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Persona {
    Shopper,
    Hammer,
    IpRotator,
    Forger,
    Replayer,
    Skipper,
    Sybil,
}

impl Persona {
    pub const ALL: [Persona; 7] = [
        Persona::Shopper,
        Persona::Hammer,
        Persona::IpRotator,
        Persona::Forger,
        Persona::Replayer,
        Persona::Skipper,
        Persona::Sybil,
    ];

    pub fn is_bot(self) -> bool {
        self != Persona::Shopper
    }

    pub fn name(self) -> &'static str {
        match self {
            Persona::Shopper => "shopper",
            Persona::Hammer => "hammer",
            Persona::IpRotator => "ip_rotator",
            Persona::Forger => "forger",
            Persona::Replayer => "replayer",
            Persona::Skipper => "skipper",
            Persona::Sybil => "sybil",
        }
    }
}

/// One planned purchase.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// When it is meant to be sent, from the start of the run.
    pub at: Duration,
    pub persona: Persona,
    /// Index into the token table.
    pub user: usize,
    /// Source address (127.0.0.0/8), so one machine stands for many clients.
    pub ip: Ipv4Addr,
    /// How the buyer pays for the unit it holds; none: it does not pay.
    pub pays: Option<Payment>,
    pub retries: bool,
    /// In a queued sale: `at` is when the session joins the waiting room, and how often
    /// it looks at the line.
    pub looks: Option<Looks>,
}

/// How a buyer pays for what it holds: `population.pay_fraction` of the shoppers pay, and
/// of those the scenario's shares pay late, twice or the wrong amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payment {
    /// Once, before the hold's deadline, the right amount.
    OnTime,
    /// After the hold's deadline: the money is owed back, no unit.
    Late,
    /// On time, then a second payment of its own: the second is owed back.
    Twice,
    /// One minor unit too much: a mismatch, nothing paid.
    WrongAmount,
}

impl Payment {
    /// How one buyer who pays pays, drawn from `rng` by the scenario's shares.
    fn draw(rng: &mut StdRng, p: &Population) -> Payment {
        let mut pick = rng.random::<f64>();
        for (share, how) in [
            (p.pay_late_fraction, Payment::Late),
            (p.pay_twice_fraction, Payment::Twice),
            (p.pay_wrong_amount_fraction, Payment::WrongAmount),
        ] {
            if pick < share {
                return how;
            }
            pick -= share;
        }
        Payment::OnTime
    }
}

/// Draws how the buyers pay from a stream of its own, so that the arrival plan of a seed
/// is the same whatever the payment shares.
fn payments_rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed ^ 0x7061_796d_656e_7473)
}

/// How often a session in a waiting room looks at the line.
#[derive(Debug, Clone, Copy)]
pub struct Looks {
    pub every: Duration,
    /// A shopper's polling class (an index into `queue.poll_ms`); none for bots.
    pub class: Option<usize>,
}

/// Accounts the sybil persona spreads over.
pub const SYBIL_ACCOUNTS: usize = 500;

/// The token table: shoppers `0..users`, then one account each for the hammer, the
/// rotator, the replayer and the skipper, then the sybils' accounts.
pub fn account_names(users: usize) -> Vec<String> {
    let mut names: Vec<String> = (0..users).map(|u| format!("shopper-{u}")).collect();
    for bot in ["hammer", "rotator", "replayer", "skipper"] {
        names.push(format!("bot-{bot}"));
    }
    names.extend((0..SYBIL_ACCOUNTS).map(|i| format!("sybil-{i}")));
    names
}

pub fn hammer_user(users: usize) -> usize {
    users
}
pub fn rotator_user(users: usize) -> usize {
    users + 1
}
pub fn replayer_user(users: usize) -> usize {
    users + 2
}
pub fn skipper_user(users: usize) -> usize {
    users + 3
}
pub fn sybil_user(users: usize, i: usize) -> usize {
    users + 4 + i % SYBIL_ACCOUNTS
}

/// The address an account earns its ticket from: shoppers their own, the bots theirs,
/// sybils a handful shared by many accounts.
pub fn account_ip(s: &Scenario, account: usize) -> Ipv4Addr {
    let users = s.population.users;
    if account < users {
        return shopper_ip(account, s.population.addresses);
    }
    match account - users {
        0 => Ipv4Addr::new(127, 0, 0, 2),
        1 => Ipv4Addr::new(127, 0, 1, 3),
        2 => Ipv4Addr::new(127, 0, 0, 4),
        3 => Ipv4Addr::new(127, 0, 0, 5),
        n => Ipv4Addr::new(127, 0, 0, 6 + (n % 4) as u8),
    }
}

/// The rate (per second) at time `t` seconds into the run.
pub fn rate_at(s: &Scenario, t: f64) -> f64 {
    let a = &s.arrivals;
    let since_start = t - s.campaign.starts_in_s;
    match a.profile {
        Profile::Constant => a.rate,
        Profile::Ramp => {
            if since_start < 0.0 {
                a.rate * 0.01
            } else {
                a.rate * (since_start / a.ramp_s).clamp(0.01, 1.0)
            }
        }
        Profile::Spike => {
            if (0.0..a.ramp_s).contains(&since_start) {
                a.rate
            } else {
                a.rate * 0.1
            }
        }
    }
}

/// Shopper `user`'s address among `addresses` (at most 65,536: 127.1.0.0 and up).
pub fn shopper_ip(user: usize, addresses: u32) -> Ipv4Addr {
    let n = user as u32 % addresses.clamp(1, 65_536);
    Ipv4Addr::new(127, 1, (n >> 8) as u8, n as u8)
}

pub fn build(s: &Scenario, seed: u64) -> Vec<Arrival> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut paying = payments_rng(seed);
    let p = &s.personas;
    let shares = [
        p.shopper,
        p.hammer,
        p.ip_rotator,
        p.forger,
        p.replayer,
        p.skipper,
        p.sybil,
    ];
    let total: f64 = shares.iter().sum();
    let users = s.population.users;
    let mut out = Vec::new();
    let mut t = 0.0;
    let mut next_shopper = 0usize;
    while t < s.duration_s {
        let mut pick = rng.random::<f64>() * total;
        let persona = Persona::ALL
            .into_iter()
            .zip(shares)
            .find(|(_, share)| {
                pick -= share;
                pick < 0.0
            })
            .map_or(Persona::Shopper, |(p, _)| p);
        let (user, ip) = match persona {
            Persona::Shopper => {
                let u = next_shopper % users;
                next_shopper += 1;
                (u, shopper_ip(u, s.population.addresses))
            }
            Persona::Hammer => (hammer_user(users), Ipv4Addr::new(127, 0, 0, 2)),
            Persona::IpRotator => (
                rotator_user(users),
                Ipv4Addr::new(127, 0, rng.random_range(1..255), rng.random_range(3..255)),
            ),
            Persona::Forger => (rng.random_range(0..users), Ipv4Addr::new(127, 0, 0, 3)),
            Persona::Replayer => (replayer_user(users), Ipv4Addr::new(127, 0, 0, 4)),
            Persona::Skipper => (skipper_user(users), Ipv4Addr::new(127, 0, 0, 5)),
            // Many fresh accounts from a handful of addresses.
            Persona::Sybil => (
                sybil_user(users, rng.random_range(0..SYBIL_ACCOUNTS)),
                Ipv4Addr::new(127, 0, 0, rng.random_range(6..10)),
            ),
        };
        out.push(Arrival {
            at: Duration::from_secs_f64(t),
            persona,
            user,
            ip,
            pays: (persona == Persona::Shopper && rng.random::<f64>() < s.population.pay_fraction)
                .then(|| Payment::draw(&mut paying, &s.population)),
            retries: persona == Persona::Shopper
                && rng.random::<f64>() < s.population.retry_fraction,
            looks: None,
        });
        t += 1.0 / rate_at(s, t).max(0.1);
    }
    out
}

/// The plan of a sale through a waiting room: one session per shopper, joining the
/// pre-queue at an instant spread evenly at random over the window before the opening
/// (or, for `late_fraction` of them, over `late_s` after it) with a polling class drawn
/// at random, independently of the join time. The bots' shares are of the whole crowd
/// (`users / shopper` sessions): the one-account bots run that many sessions on their
/// account, the sybils one account each. Bots join in the window's first tenth, as
/// early as a script can, and look every `bot_poll_ms`; the skipper goes straight to
/// the purchase once the sale is live; the forger joins with forged tokens, or brings a
/// forged pass once the sale is live.
pub fn build_queued(s: &Scenario, q: &Queue, seed: u64) -> Vec<Arrival> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut paying = payments_rng(seed);
    let users = s.population.users;
    let opening = s.campaign.starts_in_s;
    let window = q.window(s);
    let from = opening - window;
    let mut out = Vec::new();
    for u in 0..users {
        let late = window <= 0.0 || rng.random::<f64>() < q.late_fraction;
        let at = if late {
            opening + rng.random::<f64>() * q.late_s
        } else {
            from + rng.random::<f64>() * window
        };
        let class = rng.random_range(0..q.poll_ms.len());
        out.push(Arrival {
            at: Duration::from_secs_f64(at),
            persona: Persona::Shopper,
            user: u,
            ip: shopper_ip(u, s.population.addresses),
            pays: (rng.random::<f64>() < s.population.pay_fraction)
                .then(|| Payment::draw(&mut paying, &s.population)),
            retries: rng.random::<f64>() < s.population.retry_fraction,
            looks: Some(Looks {
                every: Duration::from_millis(q.poll_ms[class]),
                class: Some(class),
            }),
        });
    }
    let p = &s.personas;
    let crowd = users as f64 / p.shopper.max(f64::MIN_POSITIVE);
    let bots = [
        (Persona::Hammer, p.hammer),
        (Persona::IpRotator, p.ip_rotator),
        (Persona::Forger, p.forger),
        (Persona::Replayer, p.replayer),
        (Persona::Skipper, p.skipper),
        (Persona::Sybil, p.sybil),
    ];
    for (persona, share) in bots {
        let sessions = (crowd * share).round() as usize;
        for i in 0..sessions {
            let (user, ip) = match persona {
                // (Shoppers are planned above.)
                Persona::Shopper | Persona::Hammer => {
                    (hammer_user(users), Ipv4Addr::new(127, 0, 0, 2))
                }
                Persona::IpRotator => (
                    rotator_user(users),
                    Ipv4Addr::new(127, 0, rng.random_range(1..255), rng.random_range(3..255)),
                ),
                Persona::Forger => (rng.random_range(0..users), Ipv4Addr::new(127, 0, 0, 3)),
                Persona::Replayer => (replayer_user(users), Ipv4Addr::new(127, 0, 0, 4)),
                Persona::Skipper => (skipper_user(users), Ipv4Addr::new(127, 0, 0, 5)),
                Persona::Sybil => {
                    let account = sybil_user(users, i);
                    (account, account_ip(s, account))
                }
            };
            let at = match persona {
                Persona::Skipper => opening + rng.random::<f64>() * q.late_s,
                // Half join with forged tokens, half bring forged passes once it is live.
                Persona::Forger if i % 2 == 0 => from + rng.random::<f64>() * window,
                Persona::Forger => opening + rng.random::<f64>() * q.late_s,
                _ => from + rng.random::<f64>() * window / 10.0,
            };
            out.push(Arrival {
                at: Duration::from_secs_f64(at),
                persona,
                user,
                ip,
                pays: None,
                retries: false,
                looks: Some(Looks {
                    every: Duration::from_millis(q.bot_poll_ms),
                    class: None,
                }),
            });
        }
    }
    // Each load thread sends its share in the order of the plan.
    out.sort_by_key(|a| a.at);
    out
}
