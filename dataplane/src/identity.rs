//! Whose tokens name shoppers, and the keys that verify them: the shop's JWKS, read from
//! a file the node watches or fetched from an `https://` address, and the demo issuer's
//! key while it is on.
//!
//! Every shard reads the one [`Keyring`]. A source thread replaces its set when the
//! JWKS changes; when a key is gone (or replaced under its id), the shards drop the
//! tokens they had verified, so what that key signed is checked again, and refused.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use seckill_core::identity::{KeySet, PublicKey, Rules};

/// How often the JWKS file is looked at.
pub const FILE_POLL: Duration = Duration::from_secs(1);
/// How often the JWKS address is fetched when nothing asks sooner.
pub const URL_REFRESH: Duration = Duration::from_secs(300);
/// The least time between two fetches of the JWKS address, however often a token names
/// an unknown key.
pub const URL_MIN_GAP: Duration = Duration::from_secs(5);

/// Where the shop's keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    File(PathBuf),
    Url {
        url: String,
        ca_file: Option<PathBuf>,
    },
}

/// The checks a shopper's token meets, and the keys that verify it.
#[derive(Debug, Clone)]
pub struct Identity {
    pub rules: Rules,
    pub keyring: Arc<Keyring>,
    /// The shop's keys' source; none when only the demo issuer signs.
    pub source: Option<KeySource>,
}

/// Why a node cannot read the shop's keys at start: the setting, and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct KeysError {
    pub field: &'static str,
    pub problem: String,
}

impl Identity {
    /// For a node serving shoppers, before its shards start: the shop's keys read from
    /// their source (a node does not start without them, nor without the shop's issuer),
    /// or the demo issuer's key alone; some key to verify shoppers' tokens is required.
    pub fn load_keys(&self) -> Result<(), KeysError> {
        let bad = |field: &'static str, problem: String| KeysError { field, problem };
        let Some(source) = &self.source else {
            if self.keyring.keys().is_empty() {
                return Err(bad(
                    "identity.jwks_file",
                    "shoppers' tokens need the shop's public keys: set identity.jwks_file or identity.jwks_url, with identity.issuer (or, on loopback for a demo, demo_issuer)".into(),
                ));
            }
            return Ok(());
        };
        if self.rules.issuer.is_empty() {
            return Err(bad(
                "identity.issuer",
                "the shop's issuer (a token's iss) is required with its keys".into(),
            ));
        }
        let field = match source {
            KeySource::File(_) => "identity.jwks_file",
            KeySource::Url { .. } => "identity.jwks_url",
        };
        let keys = load(source).map_err(|e| bad(field, e))?;
        if keys.is_empty() {
            return Err(bad(
                field,
                "no key the node takes (EdDSA, ES256, RS256 of 2048 to 8192 bits, each with a kid; the log says why each was left out)".into(),
            ));
        }
        self.keyring.replace(keys);
        Ok(())
    }

    /// Keeps the shop's keys as their source says, on a thread of its own (see
    /// [`watch`]); nothing without a source.
    pub fn watch(&self) -> std::io::Result<()> {
        match &self.source {
            Some(source) => watch(self.keyring.clone(), source.clone()),
            None => Ok(()),
        }
    }
}

/// The keys shoppers' tokens are verified with, shared by the shards.
pub struct Keyring {
    keys: RwLock<Arc<KeySet>>,
    /// The demo issuer's key, in every set while the demo issuer is on.
    demo: Option<PublicKey>,
    /// How many times a key was dropped: a shard that saw fewer forgets its tokens.
    drops: AtomicU64,
    /// A token named a key not in the set: the address is fetched again early.
    unknown_seen: AtomicBool,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("keys", &self.keys())
            .field("drops", &self.drops())
            .finish()
    }
}

impl Keyring {
    pub fn new(shop: KeySet, demo: Option<PublicKey>) -> Keyring {
        Keyring {
            keys: RwLock::new(Arc::new(with_demo(shop, &demo))),
            demo,
            drops: AtomicU64::new(0),
            unknown_seen: AtomicBool::new(false),
        }
    }

    /// The keys now.
    pub fn keys(&self) -> Arc<KeySet> {
        self.keys
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// How many times a key was dropped so far.
    pub fn drops(&self) -> u64 {
        self.drops.load(Ordering::Acquire)
    }

    /// Takes the shop's keys `shop` (with the demo issuer's), saying whether a key came
    /// and whether one was dropped.
    pub fn replace(&self, shop: KeySet) -> Change {
        let new = with_demo(shop, &self.demo);
        let mut keys = self.keys.write().unwrap_or_else(|p| p.into_inner());
        let change = Change {
            added: keys.drops_any_of(&new),
            dropped: new.drops_any_of(&keys),
        };
        *keys = Arc::new(new);
        // Counted under the lock: no shard reads the new set and the old count.
        if change.dropped {
            self.drops.fetch_add(1, Ordering::AcqRel);
        }
        drop(keys);
        change
    }

    /// A token named a key the set lacks.
    pub fn unknown_key_seen(&self) {
        self.unknown_seen.store(true, Ordering::Relaxed);
    }

    fn take_unknown_seen(&self) -> bool {
        self.unknown_seen.swap(false, Ordering::Relaxed)
    }
}

/// What a new key set changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// A key came (or one was replaced under its id).
    pub added: bool,
    /// A key went (or one was replaced under its id).
    pub dropped: bool,
}

fn with_demo(shop: KeySet, demo: &Option<PublicKey>) -> KeySet {
    match demo {
        Some(k) => shop.with(k.clone()),
        None => shop,
    }
}

/// The shop's keys from a JWKS document; an error names what is wrong with it. A
/// document the node takes no key of is taken as it is: a shop that withdraws every key
/// withdraws them (every token refused), whatever else it left in it.
pub fn parse_jwks(text: &str) -> Result<KeySet, String> {
    let (set, left_out) = KeySet::from_jwks(text)?;
    for why in &left_out {
        tracing::warn!(%why, "a key of the JWKS is left out");
    }
    if set.is_empty() {
        tracing::error!(
            left_out = left_out.len(),
            "the JWKS has no key the node takes (EdDSA, ES256, RS256 with a kid): every shopper's token is refused"
        );
    }
    Ok(set)
}

/// Reads the JWKS at `source` once.
pub fn load(source: &KeySource) -> Result<KeySet, String> {
    match source {
        KeySource::File(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            parse_jwks(&text)
        }
        KeySource::Url { url, ca_file } => parse_jwks(&fetch(url, ca_file.as_deref())?),
    }
}

/// Keeps `keyring` as `source` says, on a thread of its own, for the life of the
/// process: a changed file is read again within [`FILE_POLL`]; the address is fetched
/// every [`URL_REFRESH`], and soon after a token names an unknown key. A source that
/// fails keeps the keys it had.
pub fn watch(keyring: Arc<Keyring>, source: KeySource) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("jwks".into())
        .spawn(move || match &source {
            KeySource::File(path) => {
                // A JWKS is small: read whole each time and compared with the last
                // text read (none at first: a change since the node read it at start
                // is not missed).
                let mut text = None;
                loop {
                    std::thread::sleep(FILE_POLL);
                    let fresh = std::fs::read_to_string(path).ok();
                    if fresh == text {
                        continue;
                    }
                    text = fresh;
                    let keys = match &text {
                        Some(t) => parse_jwks(t),
                        None => Err(format!("cannot read {}", path.display())),
                    };
                    take(&keyring, &source, keys);
                }
            }
            KeySource::Url { .. } => {
                let mut last = Instant::now();
                loop {
                    std::thread::sleep(Duration::from_millis(250));
                    let due = last.elapsed() >= URL_REFRESH
                        || (last.elapsed() >= URL_MIN_GAP && keyring.take_unknown_seen());
                    if due {
                        last = Instant::now();
                        take(&keyring, &source, load(&source));
                    }
                }
            }
        })
        .map(|_| ())
}

fn take(keyring: &Keyring, source: &KeySource, keys: Result<KeySet, String>) {
    match keys {
        Ok(keys) => {
            let kids: Vec<String> = keys.kids().map(String::from).collect();
            let Change { added, dropped } = keyring.replace(keys);
            if added || dropped {
                tracing::info!(?source, ?kids, added, dropped, "the shop's keys changed");
            }
        }
        Err(problem) => {
            tracing::warn!(?source, %problem, "the shop's keys could not be read again; the ones in use stay");
        }
    }
}

/// The largest JWKS taken from an address.
const MAX_JWKS_BYTES: u64 = 1 << 20;

/// The JWKS at an `https://` address, its server trusted by the system's roots or by the
/// certificates of `ca_file` alone.
pub fn fetch(url: &str, ca_file: Option<&std::path::Path>) -> Result<String, String> {
    let agent = ureq::Agent::config_builder()
        .https_only(true)
        .timeout_global(Some(Duration::from_secs(5)))
        .tls_config(seckill_orders::https::tls(ca_file)?)
        .build()
        .new_agent();
    let mut answer = agent.get(url).call().map_err(|e| format!("{url}: {e}"))?;
    answer
        .body_mut()
        .with_config()
        .limit(MAX_JWKS_BYTES)
        .read_to_string()
        .map_err(|e| format!("{url}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use seckill_core::identity::Signer;

    #[test]
    fn a_key_dropped_moves_the_count_the_shards_forget_their_tokens_by() {
        let (a, b) = (
            Signer::ed25519(&[1; 32], "a"),
            Signer::ed25519(&[2; 32], "b"),
        );
        let demo = Signer::ed25519(&[3; 32], "demo");
        let set = |ks: &[&Signer]| {
            ks.iter()
                .fold(KeySet::default(), |s, k| s.with(k.public_key()))
        };
        let ring = Keyring::new(set(&[&a]), Some(demo.public_key()));
        assert_eq!(ring.drops(), 0);
        let change = ring.replace(set(&[&a, &b]));
        assert_eq!((change.added, change.dropped), (true, false));
        assert_eq!(ring.drops(), 0);
        assert_eq!(
            ring.replace(set(&[&a, &b])),
            Change {
                added: false,
                dropped: false
            }
        );
        let change = ring.replace(set(&[&b]));
        assert_eq!((change.added, change.dropped), (false, true));
        assert_eq!(ring.drops(), 1);
        // The demo issuer's key stays whatever the shop publishes.
        assert!(ring.keys().get("demo").is_some());
        assert!(ring.keys().get("a").is_none());
    }

    #[test]
    fn a_jwks_without_a_key_the_node_takes_withdraws_every_key() {
        let a = Signer::ed25519(&[1; 32], "a");
        let ring = Keyring::new(KeySet::default().with(a.public_key()), None);
        let none = parse_jwks(r#"{"keys": [{"kty": "oct", "kid": "h", "k": "c2VjcmV0"}]}"#)
            .expect("a JWKS");
        assert!(none.is_empty());
        assert!(ring.replace(none).dropped);
        assert!(ring.keys().is_empty());
        assert!(parse_jwks(r#"{"keys": []}"#).expect("a JWKS").is_empty());
        assert!(parse_jwks("not json").is_err());
    }
}
