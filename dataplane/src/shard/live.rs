//! The events stream's update per campaign, made once per change of the shard's copy and
//! shared by every stream of the campaign on the shard.

use std::collections::HashMap;
use std::rc::Rc;

use super::view::CampaignView;

/// What a campaign's event is made from: when none of it changed, neither did the
/// event, and the one made before is sent again.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LiveKey {
    state: &'static str,
    remaining: i64,
    starts_at_ms: Option<i64>,
    ends_at_ms: Option<i64>,
    room: Option<RoomKey>,
}

/// What of a waiting room its event shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RoomKey {
    admit_per_s: u32,
    /// The seed is committed to (its hash published).
    committed: bool,
    drawn: bool,
    admitted: u64,
    sold_out: bool,
}

impl LiveKey {
    fn of(v: &CampaignView) -> Self {
        LiveKey {
            state: v.public_state(),
            remaining: v.remaining,
            starts_at_ms: v.campaign.starts_at_ms,
            ends_at_ms: v.campaign.ends_at_ms,
            room: v.queue.as_ref().map(|q| RoomKey {
                admit_per_s: q.admit_per_s,
                committed: q.seed_sha1.is_some(),
                drawn: q.drawn_ms.is_some(),
                admitted: q.admitted,
                sold_out: q.sold_out,
            }),
        }
    }
}

/// Each campaign's last event, with what it was made from.
#[derive(Debug, Default)]
pub(super) struct LiveEvents(HashMap<String, (LiveKey, Rc<str>)>);

impl LiveEvents {
    /// The event for campaign `id`, seen as `v`: the one made before if `v` has not changed since, else
    /// `render`'s, kept for the next asker. `None` when `render` makes none.
    pub(super) fn of(
        &mut self,
        id: &str,
        v: &CampaignView,
        render: impl FnOnce(&CampaignView) -> Option<String>,
    ) -> Option<Rc<str>> {
        let key = LiveKey::of(v);
        if let Some((k, ev)) = self.0.get(id) {
            if *k == key {
                return Some(ev.clone());
            }
        }
        let ev: Rc<str> = Rc::from(render(v)?);
        self.0.insert(id.to_string(), (key, ev.clone()));
        Some(ev)
    }
}
