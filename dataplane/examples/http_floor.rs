//! The floor under a shard's cheapest answer: one glommio executor placed as the node
//! places a shard (same ring depth, same `SO_REUSEPORT` listener, `TCP_NODELAY`), whose
//! connections get a fixed JSON answer of the size of `GET /api/time`'s.
//!
//! - `raw`: no HTTP library: the request's head (and the body its `Content-Length`
//!   declares) is found in the bytes read, and the answer written in one piece;
//! - `hyper`: hyper's HTTP/1 over the same socket bridge as the node's, with a service
//!   that answers at once.
//!
//! `bench/http-ceiling.sh` measures both beside nginx and the node: what the better of
//! them reaches bounds what any route served on this runtime can reach on this machine,
//! and the gap from `hyper` to the node's routes is the node's own work a request.
//!
//!   cargo run --release -p seckill-dataplane --example http_floor -- 127.0.0.1:8099 raw

use bytes::Bytes;
use futures::io::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{Preallocated, TcpListener, TcpStream};
use glommio::{LocalExecutorPoolBuilder, PoolPlacement};
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use seckill_dataplane::server::RING_DEPTH;
use std::convert::Infallible;
use tokio_util::compat::FuturesAsyncReadCompatExt;

/// `{"now_ms":…}`, as `GET /api/time` answers.
const BODY: &[u8] = br#"{"now_ms":1764000000000}"#;

#[derive(Clone, Copy)]
enum Mode {
    Raw,
    Hyper,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(addr), Some(mode)) = (args.next(), args.next()) else {
        eprintln!("usage: http_floor ADDR raw|hyper");
        std::process::exit(2);
    };
    let mode = match mode.as_str() {
        "raw" => Mode::Raw,
        "hyper" => Mode::Hyper,
        other => {
            eprintln!("mode: expected raw or hyper, got {other:?}");
            std::process::exit(2);
        }
    };
    // On a core the node's shard could have: within the CPUs this process was given.
    let placement = PoolPlacement::MaxSpread(1, seckill_dataplane::server::allowed_cpus());
    let handles = LocalExecutorPoolBuilder::new(placement)
        .name("floor-shard")
        .ring_depth(RING_DEPTH)
        .on_all_shards(move || async move {
            let listener = match TcpListener::bind(&addr) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("listen: cannot bind {addr}: {e}");
                    std::process::exit(1);
                }
            };
            loop {
                let Ok(stream) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                glommio::spawn_local(async move {
                    match mode {
                        Mode::Raw => raw(stream).await,
                        Mode::Hyper => with_hyper(stream).await,
                    }
                })
                .detach();
            }
        })
        .unwrap_or_else(|e| {
            eprintln!("cannot start the executor: {e}");
            std::process::exit(1);
        });
    handles.join_all();
}

/// Answers each request of the connection with the fixed answer, until the client leaves.
/// Reads through the socket's own buffer, as the node's HTTP layer does.
async fn raw(stream: TcpStream) {
    let mut stream = stream.buffered_with(Preallocated::new(2048));
    let response = [
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ".as_slice(),
        BODY.len().to_string().as_bytes(),
        b"\r\n\r\n",
        BODY,
    ]
    .concat();
    let mut buf = vec![0u8; 8192];
    let mut filled = 0;
    loop {
        // Every complete request in what has arrived gets its answer.
        while let Some(end) = request_end(&buf[..filled]) {
            if stream.write_all(&response).await.is_err() {
                return;
            }
            buf.copy_within(end..filled, 0);
            filled -= end;
        }
        if filled == buf.len() {
            return;
        }
        let n = match stream.read(&mut buf[filled..]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        filled += n;
    }
}

/// Where the first request in `bytes` ends (head and declared body), once all of it is there.
fn request_end(bytes: &[u8]) -> Option<usize> {
    let head = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let length = bytes[..head]
        .split(|b| *b == b'\n')
        .find_map(|line| {
            let (name, value) = line.split_at(line.iter().position(|b| *b == b':')?);
            if !name.eq_ignore_ascii_case(b"content-length") {
                return None;
            }
            std::str::from_utf8(&value[1..]).ok()?.trim().parse().ok()
        })
        .unwrap_or(0);
    (bytes.len() >= head + length).then_some(head + length)
}

/// hyper over the node's socket bridge, with a service that answers at once.
async fn with_hyper(stream: TcpStream) {
    let io = TokioIo::new(stream.buffered_with(Preallocated::new(2048)).compat());
    let svc = service_fn(|_req| async {
        Ok::<_, Infallible>(
            hyper::Response::builder()
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from_static(BODY)))
                .expect("a fixed response is valid"),
        )
    });
    let _ = http1::Builder::new()
        .keep_alive(true)
        .serve_connection(io, svc)
        .await;
}
