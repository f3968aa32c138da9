//! A lean HTTP/1.1 keep-alive client for the load threads: the request is written from
//! one buffer, the reply's head parsed in place with `httparse`, and its body handed back
//! as a slice of the connection's buffer. No per-request tasks or channels, no header
//! maps: the simulator must offer load faster than the data plane answers it.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// What went wrong with a request, as the report names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Connect,
    /// The connection broke or closed before a whole reply came.
    Transport,
    /// The reply was not HTTP/1.1 the simulator can read.
    Protocol,
}

impl Failure {
    pub fn name(self) -> &'static str {
        match self {
            Failure::Connect => "connect",
            Failure::Transport => "transport",
            Failure::Protocol => "protocol",
        }
    }
}

/// One request. The body, when there is one, is JSON.
pub struct Req<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub token: Option<&'a str>,
    pub idempotency_key: Option<&'a str>,
    /// A waiting room's receipt, sent back with a look (`Queue-Receipt`).
    pub receipt: Option<&'a str>,
    /// Any other headers: a payment provider's webhook carries its id, timestamp and
    /// signature.
    pub headers: &'a [(&'a str, String)],
    pub body: &'a [u8],
}

impl Req<'_> {
    fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        // Writing into a Vec cannot fail.
        let _ = write!(
            out,
            "{} {} HTTP/1.1\r\nHost: seckill\r\n",
            self.method, self.path
        );
        if let Some(t) = self.token {
            let _ = write!(out, "Authorization: Bearer {t}\r\n");
        }
        if let Some(k) = self.idempotency_key {
            let _ = write!(out, "Idempotency-Key: {k}\r\n");
        }
        if let Some(r) = self.receipt {
            let _ = write!(out, "Queue-Receipt: {r}\r\n");
        }
        for (name, value) in self.headers {
            let _ = write!(out, "{name}: {value}\r\n");
        }
        if self.body.is_empty() {
            out.extend_from_slice(b"Content-Length: 0\r\n\r\n");
        } else {
            let _ = write!(
                out,
                "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                self.body.len()
            );
            out.extend_from_slice(self.body);
        }
    }
}

/// A keep-alive connection from one source address.
pub struct Conn {
    stream: TcpStream,
    ip: Ipv4Addr,
    out: Vec<u8>,
    buf: Vec<u8>,
    /// Whether the server asked to close after the last reply.
    closing: bool,
    /// When it was last given back to the pool: the pool's count of give-backs then.
    returned: u64,
}

const HEAD_LIMIT: usize = 16 * 1024;

impl Conn {
    async fn open(ip: Ipv4Addr, target: SocketAddr) -> std::io::Result<Conn> {
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(ip.into(), 0))?;
        let stream = socket.connect(target).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            ip,
            out: Vec::with_capacity(512),
            buf: Vec::with_capacity(4096),
            closing: false,
            returned: 0,
        })
    }

    /// Sends `req` and reads the whole reply: its status and body.
    async fn call(&mut self, req: &Req<'_>) -> Result<(u16, std::ops::Range<usize>), Failure> {
        req.encode(&mut self.out);
        // Empty until this request's reply starts arriving: a failure before that may be
        // retried on a fresh connection.
        self.buf.clear();
        self.stream
            .write_all(&self.out)
            .await
            .map_err(|_| Failure::Transport)?;
        let (status, head, length) = loop {
            if self.read_some().await? == 0 {
                return Err(Failure::Transport);
            }
            let mut headers = [httparse::EMPTY_HEADER; 24];
            let mut reply = httparse::Response::new(&mut headers);
            match reply.parse(&self.buf) {
                Ok(httparse::Status::Complete(head)) => {
                    let status = reply.code.ok_or(Failure::Protocol)?;
                    let mut length = None;
                    for h in reply.headers.iter() {
                        if h.name.eq_ignore_ascii_case("content-length") {
                            length = std::str::from_utf8(h.value)
                                .ok()
                                .and_then(|v| v.trim().parse::<usize>().ok());
                        } else if h.name.eq_ignore_ascii_case("connection")
                            && h.value.eq_ignore_ascii_case(b"close")
                        {
                            self.closing = true;
                        }
                    }
                    // The data plane always says how long its replies are.
                    break (status, head, length.ok_or(Failure::Protocol)?);
                }
                Ok(httparse::Status::Partial) if self.buf.len() < HEAD_LIMIT => {}
                _ => return Err(Failure::Protocol),
            }
        };
        while self.buf.len() < head + length {
            if self.read_some().await? == 0 {
                return Err(Failure::Transport);
            }
        }
        Ok((status, head..head + length))
    }

    async fn read_some(&mut self) -> Result<usize, Failure> {
        if self.buf.capacity() - self.buf.len() < 1024 {
            self.buf.reserve(4096);
        }
        self.stream
            .read_buf(&mut self.buf)
            .await
            .map_err(|_| Failure::Transport)
    }
}

/// Keep-alive connections pooled per source address, to one target per address (as a
/// load balancer with source affinity would route them).
pub struct Client {
    targets: Vec<SocketAddr>,
    idle: RefCell<Idle>,
    max_idle: usize,
}

/// How long a connection stays idle before a full pool may close it to keep another: a
/// client that has not used its connection for this long may have left (a bot rotating
/// through addresses uses each once), where the crowd's addresses come back sooner.
const LEFT_AFTER: Duration = Duration::from_secs(1);

/// The idle connections by source address, and the order they came back in. A full pool
/// closes the connection idle the longest to keep the one given back, if that one has been
/// idle for [`LEFT_AFTER`]; else it closes the one given back, and keeps those it holds
/// (a crowd cycling through more addresses than the pool holds then reuses most of them,
/// where closing the oldest would close each just before its address came back).
#[derive(Default)]
struct Idle {
    by_ip: HashMap<Ipv4Addr, Vec<Conn>>,
    count: usize,
    /// Each give-back, oldest first: the address, its number and when. One whose
    /// connection was taken since is stale, skipped when met and dropped when the queue
    /// is compacted.
    order: VecDeque<(Ipv4Addr, u64, Instant)>,
    returns: u64,
}

impl Idle {
    fn take(&mut self, ip: Ipv4Addr) -> Option<Conn> {
        let conns = self.by_ip.get_mut(&ip)?;
        let conn = conns.pop();
        if conns.is_empty() {
            self.by_ip.remove(&ip);
        }
        self.count -= usize::from(conn.is_some());
        conn
    }

    fn give_back(&mut self, mut conn: Conn, max: usize, now: Instant) {
        if self.count >= max && !self.close_left(now) {
            return;
        }
        self.returns += 1;
        conn.returned = self.returns;
        self.order.push_back((conn.ip, self.returns, now));
        self.by_ip.entry(conn.ip).or_default().push(conn);
        self.count += 1;
        if self.order.len() > 2 * self.count + 64 {
            let by_ip = &self.by_ip;
            self.order.retain(|(ip, n, _)| Self::holds(by_ip, *ip, *n));
        }
    }

    /// Closes the connection idle the longest if it has been idle for [`LEFT_AFTER`] by
    /// `now`; whether it did.
    fn close_left(&mut self, now: Instant) -> bool {
        while let Some(&(ip, n, at)) = self.order.front() {
            let Some(conns) = self.by_ip.get_mut(&ip) else {
                self.order.pop_front();
                continue;
            };
            let Some(i) = conns.iter().position(|c| c.returned == n) else {
                self.order.pop_front();
                continue;
            };
            if now.saturating_duration_since(at) < LEFT_AFTER {
                return false;
            }
            self.order.pop_front();
            conns.remove(i);
            if conns.is_empty() {
                self.by_ip.remove(&ip);
            }
            self.count -= 1;
            return true;
        }
        false
    }

    fn holds(by_ip: &HashMap<Ipv4Addr, Vec<Conn>>, ip: Ipv4Addr, n: u64) -> bool {
        by_ip
            .get(&ip)
            .is_some_and(|conns| conns.iter().any(|c| c.returned == n))
    }
}

impl Client {
    pub fn new(targets: Vec<SocketAddr>, max_idle: usize) -> Client {
        Client {
            targets,
            idle: RefCell::default(),
            max_idle,
        }
    }

    /// The target a source address talks to, by its index.
    pub fn target_index(&self, ip: Ipv4Addr) -> usize {
        u32::from(ip) as usize % self.targets.len()
    }

    fn target_of(&self, ip: Ipv4Addr) -> SocketAddr {
        self.targets[self.target_index(ip)]
    }

    fn take(&self, ip: Ipv4Addr) -> Option<Conn> {
        self.idle.borrow_mut().take(ip)
    }

    fn give_back(&self, conn: Conn) {
        if conn.closing {
            return;
        }
        self.idle
            .borrow_mut()
            .give_back(conn, self.max_idle, Instant::now());
    }

    /// Sends `req` from `ip` and hands its status and body to `read`, on an idle
    /// connection of that address or a new one. A reused connection the server had
    /// already closed is replaced once, as browsers do.
    pub async fn send<T>(
        &self,
        ip: Ipv4Addr,
        req: &Req<'_>,
        read: impl FnOnce(u16, &[u8]) -> T,
    ) -> Result<T, Failure> {
        let mut fresh = false;
        let mut conn = match self.take(ip) {
            Some(c) => c,
            None => {
                fresh = true;
                Conn::open(ip, self.target_of(ip))
                    .await
                    .map_err(|_| Failure::Connect)?
            }
        };
        let reply = match conn.call(req).await {
            Err(Failure::Transport) if !fresh && conn.buf.is_empty() => {
                conn = Conn::open(ip, self.target_of(ip))
                    .await
                    .map_err(|_| Failure::Connect)?;
                conn.call(req).await
            }
            r => r,
        };
        let (status, body) = reply?;
        let out = read(status, &conn.buf[body]);
        self.give_back(conn);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> Ipv4Addr {
        Ipv4Addr::new(127, 1, 0, last)
    }

    #[test]
    fn a_full_pool_closes_a_connection_left_idle_else_the_one_given_back() {
        crate::test_runtime().block_on(async {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
            let target = listener.local_addr().expect("its address");
            let open = |last| Conn::open(ip(last), target);
            let t0 = Instant::now();
            let later = t0 + LEFT_AFTER;
            let mut idle = Idle::default();
            // A one-off address, then two that come back.
            idle.give_back(open(1).await.expect("connect"), 2, t0);
            idle.give_back(open(2).await.expect("connect"), 2, t0);
            let again = idle.take(ip(2)).expect("2 is idle");
            idle.give_back(again, 2, later);
            // Full, and 1 not idle long enough yet: the one given back is closed.
            idle.give_back(open(3).await.expect("connect"), 2, t0);
            assert!(idle.take(ip(3)).is_none(), "the pool keeps what it holds");
            // 1 has been idle long enough: it gives way.
            idle.give_back(open(3).await.expect("connect"), 2, later);
            assert!(idle.take(ip(1)).is_none(), "left idle the longest: closed");
            let (two, three) = (idle.take(ip(2)), idle.take(ip(3)));
            let (two, three) = (two.expect("used since: kept"), three.expect("new: kept"));
            assert_eq!(idle.count, 0);
            // The record of an address taken since is passed over: 2 came back first,
            // went, and came back after 3.
            idle.give_back(two, 2, t0);
            let two = idle.take(ip(2)).expect("2 is idle");
            idle.give_back(three, 2, t0);
            idle.give_back(two, 2, t0);
            idle.give_back(open(4).await.expect("connect"), 2, later);
            assert!(idle.take(ip(3)).is_none(), "3 was idle the longest");
            let mut conn = idle.take(ip(2)).expect("2 is kept");
            assert!(idle.take(ip(4)).is_some(), "4 is kept");
            // Taken and given back over and over, the record of give-backs stays small.
            for _ in 0..2000 {
                idle.give_back(conn, 2, t0);
                assert!(
                    idle.order.len() <= 2 * idle.count + 64,
                    "{}",
                    idle.order.len()
                );
                conn = idle.take(ip(2)).expect("2 is idle");
            }
        });
    }
}
