//! The waiting room's fairness table: for the shoppers who joined the pre-queue, the
//! share who won by when they joined (tenths of the window) and by how often they looked
//! (polling classes), each tested against equal shares with a chi-square test; and the
//! bots' share of the units beside their share of the pre-queue. Computed from who held
//! or bought a unit in the run, by account.

use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use crate::chisq::{equal_shares, ChiSquare};
use crate::plan::Persona;
use crate::tally::Joined;

/// One class of joiners: how many joined, how many won, and their looks.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub class: String,
    pub joined: u64,
    pub won: u64,
    pub share: f64,
    /// Looks sent per joiner each second they waited, on average, and the share of
    /// them refused for coming too fast (429).
    pub looks_per_s: f64,
    pub looks_refused: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Table {
    pub rows: Vec<Row>,
    pub test: ChiSquare,
}

#[derive(Debug, Clone, Serialize)]
pub struct Fairness {
    /// Accounts in the pre-queue (shoppers and bots), and units they won.
    pub pre_queue: u64,
    pub pre_queue_won: u64,
    /// Pre-queue shoppers by the tenth of the window they joined in.
    pub by_join_time: Table,
    /// Pre-queue shoppers by how often they looked.
    pub by_polling: Table,
    /// People and bots of the pre-queue: the bots' share of its units against their
    /// share of its accounts.
    pub bots: Table,
    pub bots_share_of_pre_queue: f64,
    pub bots_share_of_units: f64,
    /// Shoppers who joined after the opening, and how many won.
    pub late: Row,
}

/// One account in the room: the first session of it that joined, whether any joined the
/// pre-queue, and the looks of all of them.
struct Account {
    first: Joined,
    pre: bool,
    looks: u64,
    looks_refused: u64,
    looked_for: Duration,
}

#[derive(Default)]
struct Tally {
    joined: u64,
    won: u64,
    looks: u64,
    looks_refused: u64,
    looked_for: Duration,
}

impl Tally {
    fn add(&mut self, a: &Account, won: bool) {
        self.joined += 1;
        self.won += u64::from(won);
        self.looks += a.looks;
        self.looks_refused += a.looks_refused;
        self.looked_for += a.looked_for;
    }

    fn row(&self, class: String) -> Row {
        Row {
            class,
            joined: self.joined,
            won: self.won,
            share: ratio(self.won, self.joined),
            looks_per_s: self.looks as f64 / self.looked_for.as_secs_f64().max(1e-9),
            looks_refused: ratio(self.looks_refused, self.looks),
        }
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn table(tallies: &[Tally], class: impl Fn(usize) -> String) -> Table {
    let pairs: Vec<(u64, u64)> = tallies.iter().map(|t| (t.joined, t.won)).collect();
    Table {
        rows: tallies
            .iter()
            .enumerate()
            .map(|(i, t)| t.row(class(i)))
            .collect(),
        test: equal_shares(&pairs),
    }
}

/// The table, from the sessions the room let join and the accounts that held a unit.
/// `window` is the pre-queue's, ending at `opening` (both from the start of the run);
/// `poll_ms` are the shoppers' polling classes.
pub fn table_of(
    joined: &[Joined],
    winners: &HashSet<(Persona, usize)>,
    opening: Duration,
    window: Duration,
    poll_ms: &[u64],
) -> Fairness {
    let mut accounts: BTreeMap<(Persona, usize), Account> = BTreeMap::new();
    for j in joined {
        let a = accounts
            .entry((j.persona, j.user))
            .or_insert_with(|| Account {
                first: j.clone(),
                pre: false,
                looks: 0,
                looks_refused: 0,
                looked_for: Duration::ZERO,
            });
        if j.at < a.first.at {
            a.first = j.clone();
        }
        a.pre |= j.pre;
        a.looks += j.looks;
        a.looks_refused += j.looks_refused;
        a.looked_for += j.looked_for;
    }
    let from = opening.saturating_sub(window);
    let mut tenths: Vec<Tally> = (0..10).map(|_| Tally::default()).collect();
    let mut classes: Vec<Tally> = poll_ms.iter().map(|_| Tally::default()).collect();
    let (mut people, mut bots, mut late) = (Tally::default(), Tally::default(), Tally::default());
    for (key, a) in &accounts {
        let won = winners.contains(key);
        let persona = key.0;
        if !a.pre {
            if persona == Persona::Shopper {
                late.add(a, won);
            }
            continue;
        }
        if persona.is_bot() {
            bots.add(a, won);
            continue;
        }
        people.add(a, won);
        let into = a.first.at.saturating_sub(from).as_secs_f64();
        let tenth = (into / window.as_secs_f64().max(1e-9) * 10.0) as usize;
        tenths[tenth.min(9)].add(a, won);
        if let Some(c) = a.first.class.and_then(|c| classes.get_mut(c)) {
            c.add(a, won);
        }
    }
    let tenth_s = window.as_secs_f64() / 10.0;
    // Tenths of a window of whole seconds read in tenths; of others, in hundredths.
    let digits = if (tenth_s * 10.0).fract() == 0.0 {
        1
    } else {
        2
    };
    let by_join_time = table(&tenths, |i| {
        let start = window.as_secs_f64() - i as f64 * tenth_s;
        format!("{start:.digits$} to {:.digits$} s before", start - tenth_s)
    });
    let by_polling = table(&classes, |i| format!("every {} ms", poll_ms[i]));
    let pre_queue = people.joined + bots.joined;
    let pre_queue_won = people.won + bots.won;
    let bots_share_of_pre_queue = ratio(bots.joined, pre_queue);
    let bots_share_of_units = ratio(bots.won, pre_queue_won);
    let bots_table = table(&[people, bots], |i| ["people", "bots"][i].to_string());
    Fairness {
        pre_queue,
        pre_queue_won,
        by_join_time,
        by_polling,
        bots: bots_table,
        bots_share_of_pre_queue,
        bots_share_of_units,
        late: late.row("after the opening".into()),
    }
}

impl Fairness {
    /// The table as the text report shows it.
    pub fn text(&self) -> String {
        let mut out = format!(
            "fairness: {} accounts in the pre-queue won {} units\n",
            self.pre_queue, self.pre_queue_won
        );
        let rows = |out: &mut String, head: &str, t: &Table| {
            *out += &format!(
                "  {head:<24} {:>7} {:>6} {:>7} {:>8} {:>8}\n",
                "joined", "won", "share", "looks/s", "refused"
            );
            for r in &t.rows {
                *out += &format!(
                    "  {:<24} {:>7} {:>6} {:>6.1}% {:>8.2} {:>7.1}%\n",
                    r.class,
                    r.joined,
                    r.won,
                    r.share * 100.0,
                    r.looks_per_s,
                    r.looks_refused * 100.0
                );
            }
            *out += &format!("  {}\n", t.test.line());
        };
        rows(&mut out, "shoppers, joined", &self.by_join_time);
        rows(&mut out, "shoppers, looked", &self.by_polling);
        rows(&mut out, "pre-queue", &self.bots);
        out += &format!(
            "  bots: {:.1}% of the pre-queue, {:.1}% of its units\n",
            self.bots_share_of_pre_queue * 100.0,
            self.bots_share_of_units * 100.0
        );
        out += &format!(
            "  late: {} shoppers joined after the opening, {} won\n",
            self.late.joined, self.late.won
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    fn joined(persona: Persona, user: usize, at_ms: u64, class: usize, pre: bool) -> Joined {
        Joined {
            persona,
            user,
            at: Duration::from_millis(at_ms),
            class: Some(class),
            pre,
            looks: 10,
            looks_refused: 1,
            looked_for: Duration::from_secs(1),
        }
    }

    #[test]
    fn the_table_counts_accounts_by_tenth_class_and_kind() {
        // A window of 1 s ending at 2 s: shoppers join at 1.05, 1.15, … 1.95 s, one
        // per tenth, alternating two polling classes; the even ones win.
        let mut all: Vec<Joined> = (0..10)
            .map(|u| joined(Persona::Shopper, u, 1050 + 100 * u as u64, u % 2, true))
            .collect();
        // A bot account with three sessions, and a late shopper.
        for _ in 0..3 {
            all.push(joined(Persona::Hammer, 100, 1000, 0, true));
        }
        all.push(joined(Persona::Shopper, 10, 2100, 0, false));
        let mut winners: HashSet<(Persona, usize)> =
            (0..10).step_by(2).map(|u| (Persona::Shopper, u)).collect();
        winners.insert((Persona::Hammer, 100));
        let f = table_of(
            &all,
            &winners,
            Duration::from_secs(2),
            Duration::from_secs(1),
            &[100, 1000],
        );
        assert_eq!((f.pre_queue, f.pre_queue_won), (11, 6));
        let tenths: Vec<(u64, u64)> = f
            .by_join_time
            .rows
            .iter()
            .map(|r| (r.joined, r.won))
            .collect();
        assert_eq!(
            tenths,
            (0..10)
                .map(|i| (1, u64::from(i % 2 == 0)))
                .collect::<Vec<_>>()
        );
        assert_eq!(f.by_join_time.rows[0].class, "1.0 to 0.9 s before");
        let classes: Vec<(u64, u64)> = f
            .by_polling
            .rows
            .iter()
            .map(|r| (r.joined, r.won))
            .collect();
        assert_eq!(classes, vec![(5, 5), (5, 0)]);
        assert!(f.by_polling.test.statistic > f.by_polling.test.critical_p01);
        // One bot account, however many sessions it ran; their looks add up.
        assert_eq!((f.bots.rows[1].joined, f.bots.rows[1].won), (1, 1));
        assert!(close(f.bots.rows[1].looks_per_s, 10.0, 1e-9));
        assert!(close(f.bots.rows[1].looks_refused, 0.1, 1e-12));
        assert!(close(f.bots_share_of_pre_queue, 1.0 / 11.0, 1e-12));
        assert!(close(f.bots_share_of_units, 1.0 / 6.0, 1e-12));
        assert_eq!((f.late.joined, f.late.won), (1, 0));
        assert!(f.text().contains("every 100 ms"));
    }
}
