//! A scheduled source with lanes (a replay's clients): each request at its own instant,
//! each lane's requests on a connection of its own and in order, also when the
//! connection cap makes lanes take each other's slots.

use crate::common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use volley_engine::{
    run, Live, LoadModel, NextInstant, Request, RequestSource, RequestTemplate, SourceFactory,
    StopCondition,
};

/// `lanes` lanes, `per_lane` requests each, lane `l`'s request `i` at `(i * lanes + l)`
/// ms to `/l{l}/{i}`: the lanes interleave, so every lane is busy in turn.
struct Lanes {
    lanes: u32,
    per_lane: u32,
    host: String,
}

struct LaneSource {
    items: std::collections::VecDeque<(u64, Arc<Request>)>,
}

impl SourceFactory for Lanes {
    fn make(&self, _worker: usize, _workers: usize) -> Box<dyn RequestSource> {
        let mut items = std::collections::VecDeque::new();
        for i in 0..self.per_lane {
            for l in 0..self.lanes {
                let mut r = RequestTemplate::new("GET", &format!("/l{l}/{i}"), &self.host)
                    .build(i * self.lanes + l)
                    .expect("request");
                r.lane = Some(l);
                let at_ns = u64::from(i * self.lanes + l) * 1_000_000;
                items.push_back((at_ns, Arc::new(r)));
            }
        }
        Box::new(LaneSource { items })
    }
}

impl RequestSource for LaneSource {
    fn next_request(&mut self) -> Option<Arc<Request>> {
        self.items.pop_front().map(|(_, r)| r)
    }

    fn next_instant(&mut self) -> NextInstant {
        self.items
            .front()
            .map_or(NextInstant::Over, |(at, _)| NextInstant::At(*at))
    }
}

/// A keep-alive server that records, per connection, the targets it was sent (in
/// order), and answers each after 2 ms (so a lane's next request often finds its
/// connection busy).
fn recording_server() -> (Server, Arc<Mutex<Vec<Vec<String>>>>) {
    let seen: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let s = Arc::clone(&seen);
    let server = Server::start_with(move |mut conn: TcpStream| {
        let id = {
            let mut all = s.lock().unwrap();
            all.push(Vec::new());
            all.len() - 1
        };
        let mut buf = [0u8; 4096];
        loop {
            let n = match std::io::Read::read(&mut conn, &mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let head = String::from_utf8_lossy(&buf[..n]);
            let target = head.split(' ').nth(1).unwrap_or("").to_string();
            s.lock().unwrap()[id].push(target);
            std::thread::sleep(Duration::from_millis(2));
            if conn
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_err()
            {
                return;
            }
        }
    });
    (server, seen)
}

fn replay(max_connections: usize) -> (volley_engine::RunOutcome<Collect>, Vec<Vec<String>>) {
    let (server, seen) = recording_server();
    let mut cfg = config(server.addr, 1, 0, 0);
    cfg.model = LoadModel::Scheduled { rate: 1000.0 };
    cfg.connections = 0;
    cfg.max_connections = max_connections;
    cfg.stop = StopCondition::default();
    cfg.source = Arc::new(Lanes {
        lanes: 3,
        per_lane: 10,
        host: server.addr.to_string(),
    });
    let out = run(&cfg, |_| Collect::default(), &Live::new()).expect("run");
    drop(server);
    let seen = seen.lock().unwrap().clone();
    (out, seen)
}

/// Every connection carried one lane only, its requests in the lane's order.
fn assert_lanes_kept(seen: &[Vec<String>]) {
    let mut next = [0u32; 3];
    for conn in seen.iter().filter(|c| !c.is_empty()) {
        let lane = &conn[0][..3];
        for t in conn {
            assert!(t.starts_with(lane), "one connection, two lanes: {conn:?}");
            let l = usize::from(t.as_bytes()[2] - b'0');
            let i: u32 = t[4..].parse().unwrap();
            assert_eq!(i, next[l], "lane {l} out of order: {seen:?}");
            next[l] += 1;
        }
    }
    assert_eq!(next, [10, 10, 10], "{seen:?}");
}

#[test]
fn each_lane_keeps_its_own_connection_in_order_at_its_instants() {
    let (out, seen) = replay(64);
    let samples = all_samples(&out.sinks);
    assert_eq!(count(&samples, None), 30);
    // One connection per lane, kept alive; no lane ever used another's.
    assert_eq!(out.connections_opened, 3, "{seen:?}");
    assert_lanes_kept(&seen);
    let mut intended: Vec<u64> = samples.iter().map(|s| s.intended_ns).collect();
    intended.sort_unstable();
    let want: Vec<u64> = (0..30).map(|k| k * 1_000_000).collect();
    assert_eq!(intended, want, "each request at its own instant");
    assert!(samples.iter().all(|s| s.sent_ns >= s.intended_ns));
}

#[test]
fn under_the_cap_a_lane_takes_a_parked_slot_on_a_new_connection() {
    // One connection for three lanes: each lane in turn closes the one another left
    // idle and opens its own; a client never inherits another's connection.
    let (out, seen) = replay(1);
    assert_eq!(count(&all_samples(&out.sinks), None), 30);
    assert_eq!(out.max_open_connections, 1);
    assert!(out.connections_opened >= 3, "{}", out.connections_opened);
    assert_lanes_kept(&seen);
}
