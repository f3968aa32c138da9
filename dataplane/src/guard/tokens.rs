//! Session tokens a shard has verified: a shopper's next request with the same token
//! skips the JWT's checks (its decoding and a signature of the shop's public key), which
//! are most of what authenticating a request costs.

use std::collections::HashMap;
use std::rc::Rc;

use foldhash::fast::RandomState;

/// Tokens whose signature held, each with the user it names and its expiry. Nothing else
/// gets in, so a forged token is checked in full every time; a full cache is emptied, so
/// it never holds more than its capacity. A user's name is shared with the requests
/// that carry the token, not copied for each.
///
/// Looked up by the token's bytes as they came, which need no UTF-8 check, and hashed
/// with foldhash, which over a token's length costs a fraction of SipHash. foldhash does
/// not claim to resist an attacker who watches it; here no client chooses the keys'
/// bytes: only tokens whose signature held get in, each ending in a signature of a key
/// the node trusts (even where anyone may have tokens made, with the demo issuer), the seed is
/// drawn at random in each process, and a full cache is emptied.
#[derive(Debug)]
pub struct VerifiedTokens {
    tokens: HashMap<Box<[u8]>, (Rc<str>, i64), RandomState>,
    capacity: usize,
    /// The keyring's count of dropped keys when these tokens were verified.
    drops: u64,
}

impl VerifiedTokens {
    pub fn new(capacity: usize) -> Self {
        VerifiedTokens {
            tokens: HashMap::default(),
            capacity,
            drops: 0,
        }
    }

    /// Forgets every token when the keyring dropped a key since they were verified (the
    /// count `drops` has moved): what the key signed must be checked again.
    pub fn keys_dropped(&mut self, drops: u64) {
        if drops != self.drops {
            self.tokens.clear();
            self.drops = drops;
        }
    }

    /// The user `token` names, if it was verified here and has not expired by `now_ms`.
    pub fn user(&self, token: &[u8], now_ms: i64) -> Option<Rc<str>> {
        self.tokens
            .get(token)
            .filter(|(_, expires)| *expires > now_ms)
            .map(|(user, _)| user.clone())
    }

    /// Keeps a token whose signature held, until `expires_ms`.
    pub fn insert(&mut self, token: &[u8], user: Rc<str>, expires_ms: i64) {
        if self.capacity == 0 {
            return;
        }
        if self.tokens.len() >= self.capacity {
            self.tokens.clear();
        }
        self.tokens.insert(token.into(), (user, expires_ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_known_until_it_expires() {
        let mut t = VerifiedTokens::new(4);
        t.insert(b"tok", "alice".into(), 100);
        assert_eq!(t.user(b"tok", 99).as_deref(), Some("alice"));
        assert_eq!(t.user(b"tok", 100), None);
        assert_eq!(t.user(b"other", 0), None);
    }

    #[test]
    fn a_dropped_key_empties_it() {
        let mut t = VerifiedTokens::new(4);
        t.insert(b"tok", "alice".into(), 100);
        t.keys_dropped(0);
        assert_eq!(t.user(b"tok", 0).as_deref(), Some("alice"));
        t.keys_dropped(1);
        assert_eq!(t.user(b"tok", 0), None);
    }

    #[test]
    fn it_never_holds_more_than_its_capacity() {
        let mut t = VerifiedTokens::new(2);
        for n in 0..5 {
            t.insert(format!("tok{n}").as_bytes(), "u".into(), 100);
            assert!(t.tokens.len() <= 2);
        }
        assert_eq!(t.user(b"tok4", 0).as_deref(), Some("u"));
        let mut off = VerifiedTokens::new(0);
        off.insert(b"tok", "u".into(), 100);
        assert_eq!(off.user(b"tok", 0), None);
    }
}
