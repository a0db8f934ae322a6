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

/// A source that has read nothing at first: each idle slice the worker offers it
/// "reads" one more request (a replay reading its log without a thread of its own),
/// and it notes each slice's end against the arrival due next.
struct ReadingSource {
    unread: std::collections::VecDeque<(u64, Arc<Request>)>,
    read: std::collections::VecDeque<(u64, Arc<Request>)>,
    slices: Slices,
}

/// Each idle slice offered: the clock then, the slice's end, the arrival due next.
type Slices = Arc<Mutex<Vec<(u64, u64, Option<u64>)>>>;

struct Reading {
    inner: Lanes,
    slices: Slices,
}

impl SourceFactory for Reading {
    fn make(&self, worker: usize, workers: usize) -> Box<dyn RequestSource> {
        let mut lanes = self.inner.make(worker, workers);
        let mut unread = std::collections::VecDeque::new();
        while let NextInstant::At(at) = lanes.next_instant() {
            unread.push_back((at, lanes.next_request().expect("request")));
        }
        Box::new(ReadingSource {
            unread,
            read: Default::default(),
            slices: Arc::clone(&self.slices),
        })
    }
}

impl RequestSource for ReadingSource {
    fn next_request(&mut self) -> Option<Arc<Request>> {
        self.read.pop_front().map(|(_, r)| r)
    }

    fn next_instant(&mut self) -> NextInstant {
        match (self.read.front(), self.unread.is_empty()) {
            (Some((at, _)), _) => NextInstant::At(*at),
            (None, true) => NextInstant::Over,
            (None, false) => NextInstant::Pending,
        }
    }

    fn idle(&mut self, until_ns: u64, clock: &dyn Fn() -> u64) -> bool {
        let due = self.read.front().map(|(at, _)| *at);
        self.slices.lock().unwrap().push((clock(), until_ns, due));
        match self.unread.pop_front() {
            Some(item) => {
                self.read.push_back(item);
                true
            }
            None => false,
        }
    }
}

#[test]
fn a_source_that_reads_in_the_workers_idle_slices_sends_everything_at_its_instant() {
    let (server, seen) = recording_server();
    let mut cfg = config(server.addr, 1, 0, 0);
    cfg.model = LoadModel::Scheduled { rate: 1000.0 };
    cfg.connections = 0;
    cfg.max_connections = 64;
    // Bounded: a worker that never offered a slice would wait for ever.
    cfg.stop = StopCondition {
        duration: Some(Duration::from_secs(20)),
        ..StopCondition::default()
    };
    let slices: Slices = Arc::default();
    cfg.source = Arc::new(Reading {
        inner: Lanes {
            lanes: 3,
            per_lane: 10,
            host: server.addr.to_string(),
        },
        slices: Arc::clone(&slices),
    });
    let out = run(&cfg, |_| Collect::default(), &Live::new()).expect("run");
    drop(server);
    let samples = all_samples(&out.sinks);
    // Nothing was readable but through the idle slices, and everything was sent.
    assert_eq!(count(&samples, None), 30);
    assert_lanes_kept(&seen.lock().unwrap());
    let mut intended: Vec<u64> = samples.iter().map(|s| s.intended_ns).collect();
    intended.sort_unstable();
    assert_eq!(intended, (0..30).map(|k| k * 1_000_000).collect::<Vec<_>>());
    // No slice was to end past the arrival due next (when it was offered is the
    // machine's business: a stall between the loop's clock read and the offer).
    let slices = slices.lock().unwrap();
    assert!(slices.len() >= 30, "{}", slices.len());
    for &(_, until, due) in slices.iter() {
        if let Some(due) = due {
            assert!(
                until <= due,
                "a slice past the next arrival: {until} > {due}"
            );
        }
    }
}
