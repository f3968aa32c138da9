//! Challenges and live tickets, in the campaign's ticket slot.

use super::{int, items, text, Store, StoreError};
use seckill_core::keys::TicketKeys;
use seckill_core::scripts;

/// An open challenge as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub user: String,
    pub prefix: String,
    pub difficulty: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Issue {
    Granted,
    /// The user already holds a live ticket: this one, until then.
    Same {
        ticket: String,
        expires_ms: i64,
    },
    /// No such open challenge: never issued, expired, or already traded.
    Gone,
    /// The campaign's cap on live tickets is reached.
    Exhausted,
    /// No such campaign, or a draft.
    Unknown,
    Ended,
    /// Earlier than the ticket window before the opening.
    Early {
        starts_at_ms: i64,
    },
}

/// A ticket about to be issued.
pub struct NewTicket<'a> {
    pub campaign: &'a str,
    pub challenge: &'a str,
    pub user: &'a str,
    pub ticket: &'a str,
    pub expires_ms: i64,
    /// No ticket earlier than this before the opening.
    pub window_ms: i64,
}

impl Store {
    pub async fn open_challenge(
        &self,
        campaign: &str,
        id: &str,
        c: &Challenge,
        ttl_s: u64,
    ) -> Result<(), StoreError> {
        let value = format!("{}:{}:{}", c.user, c.prefix, c.difficulty);
        self.conn
            .query(
                redis::cmd("SET")
                    .arg(TicketKeys::new(campaign).challenge(id))
                    .arg(value)
                    .arg("EX")
                    .arg(ttl_s),
            )
            .await?;
        Ok(())
    }

    pub async fn challenge(
        &self,
        campaign: &str,
        id: &str,
    ) -> Result<Option<Challenge>, StoreError> {
        let v = self
            .conn
            .query(redis::cmd("GET").arg(TicketKeys::new(campaign).challenge(id)))
            .await?;
        Ok(text(Some(&v)).and_then(|s| {
            let mut it = s.rsplitn(3, ':');
            let difficulty = it.next()?.parse().ok()?;
            let prefix = it.next()?.to_string();
            let user = it.next()?.to_string();
            Some(Challenge {
                user,
                prefix,
                difficulty,
            })
        }))
    }

    /// Uses up a challenge and issues `t.ticket`, unless the user holds a live ticket
    /// already, the cap on live tickets is reached, or the campaign does not take them.
    pub async fn issue_ticket(&self, t: &NewTicket<'_>) -> Result<Issue, StoreError> {
        let k = TicketKeys::new(t.campaign);
        let v = items(
            self.eval(
                &scripts::ISSUE_TICKET,
                &[
                    &k.challenge(t.challenge),
                    &k.live(),
                    &k.tickets(),
                    &k.rules(),
                ],
                &[
                    t.user,
                    t.ticket,
                    &t.expires_ms.to_string(),
                    &t.window_ms.to_string(),
                ],
            )
            .await?,
        )?;
        Ok(match text(v.first()).as_deref() {
            Some("ok") => Issue::Granted,
            Some("same") => Issue::Same {
                ticket: text(v.get(1)).unwrap_or_default(),
                expires_ms: int(v.get(2)).unwrap_or(0),
            },
            Some("exhausted") => Issue::Exhausted,
            Some("unknown") => Issue::Unknown,
            Some("ended") => Issue::Ended,
            Some("early") => Issue::Early {
                starts_at_ms: int(v.get(1)).unwrap_or(0),
            },
            _ => Issue::Gone,
        })
    }
}
