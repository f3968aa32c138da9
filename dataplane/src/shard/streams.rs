//! The event streams a shard holds open, counted by client address and in all.

use std::collections::HashMap;
use std::net::IpAddr;

/// Which cap refused an event stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamCap {
    /// The client address has `http.max_event_streams_per_client` open.
    Client,
    /// The shard has `http.max_event_streams_per_shard` open.
    Shard,
}

/// The event streams a shard holds open. A stream stays open for as long as its client
/// likes and holds a connection all that time: without caps, idle streams from a few
/// addresses could take every connection a shard accepts.
#[derive(Debug, Default)]
pub struct StreamSlots {
    by_client: HashMap<IpAddr, u32>,
    open: usize,
}

impl StreamSlots {
    /// Takes a slot for a stream of `client`, unless it or the shard is at its cap.
    pub fn take(
        &mut self,
        client: IpAddr,
        per_client: u32,
        per_shard: usize,
    ) -> Result<(), StreamCap> {
        if self
            .by_client
            .get(&client)
            .is_some_and(|n| *n >= per_client)
        {
            return Err(StreamCap::Client);
        }
        if self.open >= per_shard {
            return Err(StreamCap::Shard);
        }
        *self.by_client.entry(client).or_insert(0) += 1;
        self.open += 1;
        self.check();
        Ok(())
    }

    /// Gives back a slot `take` gave `client`.
    pub fn give_back(&mut self, client: IpAddr) {
        if let Some(n) = self.by_client.get_mut(&client) {
            debug_assert!(*n > 0 && self.open > 0, "a stream slot given back twice");
            *n -= 1;
            if *n == 0 {
                self.by_client.remove(&client);
            }
            self.open -= 1;
        }
        self.check();
    }

    /// The shard's count is the sum of the clients', none of which is kept at zero. A
    /// stream is opened or closed seldom: the sum is taken, in debug builds, every time.
    fn check(&self) {
        debug_assert!(self.by_client.values().all(|n| *n > 0));
        debug_assert_eq!(
            self.open,
            self.by_client.values().map(|n| *n as usize).sum::<usize>(),
            "stream slots out of count"
        );
    }

    /// Streams open on the shard.
    pub fn open(&self) -> usize {
        self.open
    }

    /// Streams `client` has open on the shard.
    pub fn of(&self, client: IpAddr) -> u32 {
        self.by_client.get(&client).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_slots_cap_each_client_and_the_shard_and_come_back_when_given_back() {
        let ip = |n: u8| IpAddr::from([127, 0, 0, n]);
        let mut slots = StreamSlots::default();
        assert_eq!(slots.take(ip(1), 2, 3), Ok(()));
        assert_eq!(slots.take(ip(1), 2, 3), Ok(()));
        assert_eq!(slots.take(ip(1), 2, 3), Err(StreamCap::Client));
        assert_eq!(slots.take(ip(2), 2, 3), Ok(()));
        assert_eq!(slots.take(ip(3), 2, 3), Err(StreamCap::Shard));
        // A refusal takes nothing.
        assert_eq!((slots.open(), slots.of(ip(1)), slots.of(ip(3))), (3, 2, 0));
        slots.give_back(ip(1));
        assert_eq!(slots.take(ip(3), 2, 3), Ok(()));
        for n in [1, 2, 3] {
            slots.give_back(ip(n));
        }
        // Giving back what was never taken changes nothing.
        slots.give_back(ip(9));
        assert_eq!(slots.open(), 0);
        assert!(slots.by_client.is_empty(), "{:?}", slots.by_client);
    }
}
