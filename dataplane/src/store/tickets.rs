//! Challenges and the ticket count, in the campaign's ticket slot.

use super::{text, Store, StoreError};
use crate::keys::TicketKeys;
use crate::scripts;

/// An open challenge as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub user: String,
    pub prefix: String,
    pub difficulty: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Issue {
    Granted,
    /// No such open challenge: never issued, expired, or already traded.
    Gone,
    /// The campaign's ticket cap is reached.
    Exhausted,
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

    /// Uses up a challenge and counts a ticket, unless the cap is reached.
    pub async fn issue_ticket(
        &self,
        campaign: &str,
        challenge: &str,
        cap: u64,
    ) -> Result<Issue, StoreError> {
        let k = TicketKeys::new(campaign);
        let v = self
            .eval(
                &scripts::ISSUE_TICKET,
                &[&k.challenge(challenge), &k.issued()],
                &[&cap.to_string()],
            )
            .await?;
        Ok(match text(Some(&v)).as_deref() {
            Some("ok") => Issue::Granted,
            Some("exhausted") => Issue::Exhausted,
            _ => Issue::Gone,
        })
    }
}
