//! Human text: ab's layout (so an ab user finds every figure where they expect it),
//! wrk2's detailed percentile spectrum, then what ab never shows: which latency
//! definition each figure is, the generator's self-check and notes.

use super::Exporter;
use crate::repeat::RepeatSummary;
use crate::summary::TimesRow;
use crate::{FirstRequest, MetricsError, Model, Summary, WireReport};
use std::io::Write;
use volley_monitor::headroom::HeadroomReport;

/// The text exporter. `spectrum` prints wrk2's full percentile spectrum.
#[derive(Debug, Clone, Copy)]
pub struct Text {
    /// Include wrk2's detailed percentile spectrum.
    pub spectrum: bool,
}

impl Default for Text {
    fn default() -> Self {
        Text { spectrum: true }
    }
}

fn times_row(out: &mut dyn Write, name: &str, r: &TimesRow) -> std::io::Result<()> {
    writeln!(
        out,
        "{name:<12}{:>9.2} {:>8.2} {:>7.2} {:>9.2} {:>9.2}",
        r.min_ms, r.mean_ms, r.sd_ms, r.median_ms, r.max_ms
    )
}

/// Protocol lines: what the bytes travelled over and what went wrong at that level.
/// One line: the most fds and ports the generator held against their limits.
fn write_headroom(out: &mut dyn Write, h: &HeadroomReport) -> std::io::Result<()> {
    let fd_limit = if h.fd_limit == u64::MAX {
        "unlimited".to_owned()
    } else {
        h.fd_limit.to_string()
    };
    let no_port = match h.connects_without_port {
        0 => String::new(),
        n => format!("; {n} connect(s) found no free port"),
    };
    writeln!(
        out,
        "Generator headroom:     {} of {fd_limit} fds, {} of {} ephemeral ports to the target ({} in TIME_WAIT), most at once{no_port}",
        h.fd_used_max, h.ports_in_use_max, h.port_range, h.time_wait_max
    )
}

fn write_wire(out: &mut dyn Write, w: &WireReport) -> std::io::Result<()> {
    let mut line = format!("Protocol:               {}", w.protocol);
    if let Some(c) = &w.compression {
        line.push_str(&format!(", Accept-Encoding: {c}"));
    }
    if w.io != "epoll" {
        line.push_str(&format!(", I/O {}", w.io));
    }
    if let Some(why) = &w.io_refused {
        line.push_str(&format!(", I/O epoll (io_uring refused: {why})"));
    }
    writeln!(out, "{line}")?;
    if let Some(t) = &w.tls {
        let negotiated = match (&t.negotiated_version, &t.cipher_suite) {
            (Some(v), Some(c)) => format!("{v} {c}"),
            (Some(v), None) => v.clone(),
            _ => "not negotiated".into(),
        };
        writeln!(
            out,
            "TLS:                    {negotiated}, ALPN {}, offered {}, resumption {}{}, {} full handshake(s)",
            t.negotiated_alpn.as_deref().unwrap_or("none"),
            t.versions_offered,
            if t.resumption { "on" } else { "off" },
            if t.insecure { ", certificate NOT checked (--insecure)" } else { "" },
            t.full_handshakes
        )?;
        if !t.failures.is_empty() {
            let parts: Vec<String> = t
                .failures
                .iter()
                .map(|(k, n)| format!("{k}: {n}"))
                .collect();
            writeln!(out, "TLS failures:           {}", parts.join(", "))?;
        }
    }
    if let Some(h) = &w.h2 {
        writeln!(
            out,
            "HTTP/2:                 {} GOAWAY, {} refused stream(s) retried, {} stream reset(s), {} connection error(s), {} late stream(s) cancelled",
            h.goaways, h.refused_retries, h.stream_resets, h.connection_errors, h.cancelled_streams
        )?;
    }
    if let Some(h) = &w.h3 {
        let close = h
            .last_close_code
            .map_or_else(String::new, |c| format!(" (last code 0x{c:x})"));
        writeln!(
            out,
            "HTTP/3:                 {} handshake(s), {} failed, {} GOAWAY, {} stream reset(s), {} connection error(s) ({} QPACK), {} peer close(s){close}, {} idle timeout(s), {} late stream(s) cancelled, {} wait(s) for the stream limit, {} QPACK dynamic reference(s) over {} insert(s)",
            h.handshakes,
            h.handshake_failures,
            h.goaways,
            h.stream_resets,
            h.connection_errors,
            h.qpack_errors,
            h.peer_closes,
            h.idle_timeouts,
            h.cancelled_streams,
            h.stream_limit_waits,
            h.qpack_dynamic_refs,
            h.qpack_inserts
        )?;
        let kind = |name: &str, k: &crate::HandshakeReport| {
            format!(
                "{} {name} (mean {:.3} ms, max {:.3} ms)",
                k.count, k.mean_ms, k.max_ms
            )
        };
        writeln!(
            out,
            "QUIC handshakes:        {}, {}, {}; early data {}{}",
            kind("full", &h.handshakes_full),
            kind("resumed", &h.handshakes_resumed),
            kind("0-RTT", &h.handshakes_0rtt),
            if h.early_data { "on" } else { "off" },
            if h.early_data {
                format!(
                    ": {} request(s) sent early, {} refusal(s)",
                    h.early_requests, h.zero_rtt_rejected
                )
            } else {
                String::new()
            }
        )?;
        let per = |d: u64, calls: u64| d as f64 / calls.max(1) as f64;
        writeln!(
            out,
            "UDP:                    {} datagram(s) in {} send(s) ({:.2} a call), {} in {} message(s) read ({:.2} a message)",
            h.udp.datagrams_sent,
            h.udp.sends,
            per(h.udp.datagrams_sent, h.udp.sends),
            h.udp.datagrams_read,
            h.udp.reads,
            per(h.udp.datagrams_read, h.udp.reads),
        )?;
    }
    Ok(())
}

/// The cold first request, apart from the run's figures.
fn write_first(out: &mut dyn Write, f: &FirstRequest) -> std::io::Result<()> {
    let ttfb = f
        .ttfb_ms
        .map_or_else(|| "none".to_string(), |t| format!("{t:.3} ms"));
    let fate = match &f.error {
        Some(e) => format!("failed: {e}"),
        None => format!("status {}", f.status),
    };
    writeln!(
        out,
        "First request (cold, fresh connection, before the run): connect {:.3} ms (TLS {:.3} ms), TTFB {ttfb}, total {:.3} ms, {fate}",
        f.connect_ms, f.tls_handshake_ms, f.total_ms
    )
}

fn write_run(out: &mut dyn Write, s: &Summary, spectrum: bool) -> std::io::Result<()> {
    write_heading(out, s)?;
    write_totals(out, s)?;
    write_times(out, s)?;
    if spectrum {
        write_spectrum(out, s)?;
    }
    write_generator(out, s)
}

/// What was run, and the wire, first-request and headroom figures.
fn write_heading(out: &mut dyn Write, s: &Summary) -> std::io::Result<()> {
    let model = match &s.model {
        Model::Closed => format!("closed loop, {} connection(s)", s.connections),
        Model::Open {
            rate_per_s,
            arrival,
        } => {
            format!(
                "open loop, {arrival} arrivals at {rate_per_s} req/s, {} initial connection(s)",
                s.connections
            )
        }
    };
    // HTTP/2 multiplexes streams on persistent connections whatever -k says; saying
    // "new connection per request" there would describe a run that did not happen.
    let h2 = s.wire.as_ref().is_some_and(|w| w.h2.is_some());
    let h3 = s.wire.as_ref().is_some_and(|w| w.h3.is_some());
    let ka = if h2 {
        "HTTP/2 streams on persistent connections"
    } else if h3 {
        "HTTP/3 streams on persistent QUIC connections"
    } else if s.keep_alive {
        "keep-alive"
    } else {
        "new connection per request"
    };
    writeln!(
        out,
        "Benchmarking {} {} ({model}, {} thread(s), {ka})",
        s.method, s.url, s.threads
    )?;
    if let Some(w) = &s.wire {
        write_wire(out, w)?;
    }
    if let Some(f) = &s.first_request {
        write_first(out, f)?;
    }
    if let Some(h) = &s.headroom {
        write_headroom(out, h)?;
    }
    Ok(())
}

/// ab's totals: counts, failures, bytes, rates and times per request.
fn write_totals(out: &mut dyn Write, s: &Summary) -> std::io::Result<()> {
    writeln!(out)?;
    // ab's concurrency is requests at a time: with HTTP/2 streams a closed loop keeps
    // connections x streams outstanding, so that product is ab's figure.
    let streams = s.streams_per_connection.max(1) as usize;
    if s.model == Model::Closed && streams > 1 {
        let proto = if s.wire.as_ref().is_some_and(|w| w.h3.is_some()) {
            "HTTP/3"
        } else {
            "HTTP/2"
        };
        writeln!(
            out,
            "Concurrency Level:      {} ({} connection(s) x {streams} {proto} streams)",
            s.connections * streams,
            s.connections
        )?;
    } else if s.model == Model::Closed {
        writeln!(out, "Concurrency Level:      {}", s.connections)?;
    } else {
        // An open loop has no fixed concurrency (the rate sets it): ab's label would
        // name a figure that is not there.
        writeln!(
            out,
            "Initial connections:    {} (open loop: requests in flight follow the rate)",
            s.connections
        )?;
    }
    writeln!(out, "Time taken for tests:   {:.3} seconds", s.duration_s)?;
    if let Some(w) = &s.warmup {
        // Said beside the time so nobody reads the rates as covering the warm-up.
        writeln!(
            out,
            "Warm-up (excluded):     {:.3} seconds, {} requests",
            w.duration_s, w.requests
        )?;
    }
    writeln!(out, "Complete requests:      {}", s.requests.completed)?;
    writeln!(out, "Failed requests:        {}", s.requests.failed)?;
    let failed = s.failures();
    if !failed.is_empty() {
        writeln!(out, "   ({})", failed.join(", "))?;
    }
    if s.requests.in_flight > 0 {
        writeln!(
            out,
            "Still in flight:        {} (when the run ended; censored, not counted above)",
            s.requests.in_flight
        )?;
    }
    if s.requests.non_2xx > 0 {
        writeln!(out, "Non-2xx responses:      {}", s.requests.non_2xx)?;
    }
    writeln!(out, "Total transferred:      {} bytes", s.bytes.wire_total)?;
    writeln!(out, "HTML transferred:       {} bytes", s.bytes.body_total)?;
    if let Some(ratio) = s.bytes.compression_ratio {
        writeln!(
            out,
            "Body on the wire:       {} bytes (decoded {} bytes, ratio {ratio:.2})",
            s.bytes.wire_body_total, s.bytes.body_total
        )?;
    }
    writeln!(
        out,
        "Requests per second:    {:.2} [#/sec] (mean)",
        s.throughput.requests_per_s
    )?;
    // ab's "mean" is concurrency x time / n: defined for a closed loop only (an open
    // loop has no fixed concurrency; its per-request time is the response time below).
    if s.model == Model::Closed {
        writeln!(
            out,
            "Time per request:       {:.3} [ms] (mean)",
            s.throughput.time_per_request_ms
        )?;
    }
    writeln!(
        out,
        "Time per request:       {:.3} [ms] (mean, across all concurrent requests)",
        s.throughput.time_per_request_all_ms
    )?;
    writeln!(
        out,
        "Transfer rate:          {:.2} [Kbytes/sec] received",
        s.bytes.transfer_kib_per_s
    )?;
    Ok(())
}

/// ab's connection times and served-within table, then every latency definition.
fn write_times(out: &mut dyn Write, s: &Summary) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(out, "Connection Times (ms)")?;
    writeln!(
        out,
        "                  min     mean [+/-sd]    median       max"
    )?;
    let ct = &s.connection_times;
    times_row(out, "Connect:", &ct.connect)?;
    times_row(out, "Processing:", &ct.processing)?;
    times_row(out, "Waiting:", &ct.waiting)?;
    times_row(out, "Total:", &ct.total)?;
    writeln!(out, "  ({})", ct.definitions)?;
    if s.wire.as_ref().is_some_and(|w| w.h3.is_some()) {
        // No TCP under HTTP/3: the connect is the QUIC handshake (docs/methodology.md).
        writeln!(
            out,
            "  (over HTTP/3, Connect is the QUIC handshake from the first UDP datagram: its TLS part is all of it)"
        )?;
    }
    writeln!(out)?;
    // ab's heading only over ab's figure (closed loop: Total, connect included); an
    // open loop's table is its response time, under a heading of its own.
    writeln!(
        out,
        "{}",
        if s.model == Model::Closed {
            "Percentage of the requests served within a certain time (ms)"
        } else {
            "Percentage of the requests answered within a certain time of their intended send (ms)"
        }
    )?;
    writeln!(out, "  [{}]", s.served_within_definition)?;
    for p in &s.served_within {
        let tail = if p.percent >= 100.0 {
            " (longest request)"
        } else {
            ""
        };
        writeln!(out, "  {:>3}% {:>10.3}{tail}", p.percent, p.ms)?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "Latency by definition (ms)      count       p50       p90       p99     p99.9       max"
    )?;
    for (name, l) in &s.latency {
        writeln!(
            out,
            "  {name:<24} {:>10} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            l.count, l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, l.max_ms
        )?;
    }
    Ok(())
}

/// wrk2's detailed percentile spectrum of the headline latency.
fn write_spectrum(out: &mut dyn Write, s: &Summary) -> std::io::Result<()> {
    if s.spectrum.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "  Detailed Percentile spectrum [{}]:",
        s.latency_definition
    )?;
    writeln!(
        out,
        "       Value   Percentile   TotalCount 1/(1-Percentile)"
    )?;
    writeln!(out)?;
    for r in &s.spectrum {
        match r.inverse {
            Some(inv) => writeln!(
                out,
                "{:>12.3} {:>12.6} {:>12} {:>14.2}",
                r.value_ms, r.quantile, r.total_count, inv
            )?,
            None => writeln!(
                out,
                "{:>12.3} {:>12.6} {:>12}",
                r.value_ms, r.quantile, r.total_count
            )?,
        }
    }
    let h = match s.model {
        Model::Open { .. } => &s.latency["response_time"],
        Model::Closed => &s.latency["service_time"],
    };
    writeln!(
        out,
        "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
        h.mean_ms, h.stdev_ms
    )?;
    writeln!(
        out,
        "#[Max     = {:>12.3}, Total count    = {:>12}]",
        h.max_ms, h.count
    )?;
    Ok(())
}

/// Status codes, connections, send rates, the generator's self-check and the notes.
fn write_generator(out: &mut dyn Write, s: &Summary) -> std::io::Result<()> {
    writeln!(out)?;
    let codes: Vec<String> = s
        .status_codes
        .iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .collect();
    writeln!(
        out,
        "Status codes:           {}",
        if codes.is_empty() {
            "none".into()
        } else {
            codes.join(", ")
        }
    )?;
    let c = &s.connections_stats;
    writeln!(
        out,
        "Connections:            {} opened, at most {} open at once, cap hits {}",
        c.opened, c.max_open, c.cap_hits
    )?;
    let r = &s.rates;
    match (r.offered_per_s, r.scheduled_per_s) {
        (Some(o), Some(sch)) => writeln!(
            out,
            "Send rate:              offered {o:.2}/s, scheduled {sch:.2}/s, achieved {:.2}/s; replies {:.2}/s",
            r.achieved_send_per_s, r.reply_per_s
        )?,
        _ => writeln!(out, "Send rate:              {:.2}/s (closed loop); replies {:.2}/s", r.achieved_send_per_s, r.reply_per_s)?,
    }
    let g = &s.generator;
    let cpu = g
        .cpu_cores_used
        .map(|c| format!("{c:.2} of {}", crate::label::cores_text(g.cores)))
        .unwrap_or_else(|| "not measured".into());
    let psi = g
        .cpu_pressure
        .map(|p| format!("{:.0}%", p * 100.0))
        .unwrap_or_else(|| "n/a".into());
    writeln!(out, "Generator:              CPU {cpu}, CPU pressure {psi}")?;
    writeln!(
        out,
        "  scheduler lag p99:    {:.3} ms  (dispatched - intended: the generator's own lateness; judged)",
        g.sched_lag_p99_ms
    )?;
    writeln!(
        out,
        "  connection wait p99:  {:.3} ms  (sent - dispatched: waiting for a free connection or stream; the server's)",
        g.conn_wait_p99_ms
    )?;
    writeln!(
        out,
        "  send lag p99:         {:.3} ms  (sent - intended = scheduler lag + connection wait)",
        g.send_lag_p99_ms
    )?;
    if let Some(p) = &g.probe {
        writeln!(
            out,
            "  stall probe:          longest stall {:.3} ms, {} wake-up(s) over 1 ms late, steal {}  (a {} us sleeper beside the load, {})",
            p.max_stall_ms,
            p.over_1ms,
            p.steal_ms
                .map_or_else(|| "n/a".to_string(), |m| format!("{m:.0} ms")),
            p.interval_us,
            match (p.fifo, p.nice) {
                (true, _) => "SCHED_FIFO".to_string(),
                (false, Some(n)) => format!("nice {n}"),
                (false, None) => "ordinary priority".to_string(),
            }
        )?;
    }
    writeln!(
        out,
        "Verdict:                {} ({})",
        g.verdict.label.label(),
        g.verdict.reason
    )?;
    writeln!(
        out,
        "Per second:             {}, {} generator-bound, {} machine-stalled",
        seconds_counted(s.seconds.len(), s.duration_s),
        g.generator_bound_seconds,
        g.machine_stalled_seconds
    )?;
    for n in &s.notes {
        writeln!(out, "Note: {n}")?;
    }
    Ok(())
}

/// How many seconds the per-second table holds, a last second the run covered only in
/// part said apart: a `-d 2500ms` run holds 2 whole seconds and half of a third, whose
/// count is no rate.
fn seconds_counted(rows: usize, duration_s: f64) -> String {
    let whole = ((duration_s + 1e-6).floor().max(0.0) as usize).min(rows);
    match rows - whole {
        0 => format!("{whole} whole second(s)"),
        1 => format!(
            "{whole} whole second(s) and a partial last one ({:.2} s)",
            (duration_s - whole as f64).clamp(0.0, 1.0)
        ),
        n => format!("{whole} whole second(s) and {n} partial ones"),
    }
}

fn write_repeat(out: &mut dyn Write, r: &RepeatSummary) -> std::io::Result<()> {
    writeln!(
        out,
        "Runs ({}; ms columns are {})",
        r.rows.len(),
        r.latency_definition
    )?;
    writeln!(
        out,
        "  run   total [s]   mean [ms]    min [ms]    max [ms]    p99 [ms]    req/s  verdict"
    )?;
    for x in &r.rows {
        writeln!(
            out,
            "  {:>3} {:>11.3} {:>11.3} {:>11.3} {:>11.3} {:>11.3} {:>8.1}  {}",
            x.run, x.total_s, x.mean_ms, x.min_ms, x.max_ms, x.p99_ms, x.requests_per_s, x.label
        )?;
    }
    let line = |name: &str, c: &crate::repeat::Ci| {
        format!(
            "  {name:<12} median {:.3}  95% CI [{:.3}, {:.3}]",
            c.median, c.lo, c.hi
        )
    };
    writeln!(out, "Across runs (bootstrap, {} resamples):", r.resamples)?;
    writeln!(out, "{}", line("req/s", &r.requests_per_s))?;
    writeln!(out, "{}", line("mean [ms]", &r.mean_ms))?;
    writeln!(out, "{}", line("p99 [ms]", &r.p99_ms))?;
    Ok(())
}

impl Exporter for Text {
    fn export(
        &self,
        runs: &[Summary],
        repeat: Option<&RepeatSummary>,
        out: &mut dyn Write,
    ) -> Result<(), MetricsError> {
        let w = |source| MetricsError::Write {
            format: "text",
            source,
        };
        for (i, s) in runs.iter().enumerate() {
            if runs.len() > 1 {
                writeln!(out, "=== run {} of {} ===", i + 1, runs.len()).map_err(w)?;
            }
            write_run(out, s, self.spectrum).map_err(w)?;
            writeln!(out).map_err(w)?;
        }
        if let Some(r) = repeat {
            write_repeat(out, r).map_err(w)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::tests::ok;
    use crate::summary::tests::info;
    use crate::Recorder;
    use volley_engine::Sink;

    #[test]
    fn the_per_second_count_says_a_partial_last_second_apart() {
        for (rows, duration, want) in [
            (3, 3.0, "3 whole second(s)"),
            (3, 2.5, "2 whole second(s) and a partial last one (0.50 s)"),
            (3, 2.9999999, "3 whole second(s)"),
            (1, 0.25, "0 whole second(s) and a partial last one (0.25 s)"),
            (4, 2.5, "2 whole second(s) and 2 partial ones"),
            (0, 0.0, "0 whole second(s)"),
        ] {
            assert_eq!(
                seconds_counted(rows, duration),
                want,
                "{rows} rows, {duration} s"
            );
        }
    }

    #[test]
    fn text_has_ab_sections_and_definitions() {
        let mut r = Recorder::new();
        for i in 0..100 {
            r.record(&ok(10 + i * 9, 3));
        }
        let s = r.close(&info(Model::Closed, 1_000)).unwrap();
        let rep = crate::repeat::summarise(&[s.clone(), s.clone()]);
        let mut buf = Vec::new();
        Text::default()
            .export(&[s.clone(), s], Some(&rep), &mut buf)
            .unwrap();
        let t = String::from_utf8(buf).unwrap();
        for needle in [
            "Complete requests:      100",
            "Requests per second:",
            "Connection Times (ms)",
            "Percentage of the requests served within a certain time (ms)",
            "closed-loop service time",
            "Detailed Percentile spectrum",
            "1/(1-Percentile)",
            "Verdict:",
            "=== run 2 of 2 ===",
            "95% CI",
        ] {
            assert!(t.contains(needle), "missing {needle:?} in\n{t}");
        }
    }

    #[test]
    fn an_h2_run_without_keep_alive_is_not_called_one_connection_per_request() {
        let mut r = Recorder::new();
        r.record(&ok(10, 3));
        let mut s = r.close(&info(Model::Closed, 1_000)).unwrap();
        s.keep_alive = false;
        let text = |s: &Summary| {
            let mut buf = Vec::new();
            Text::default()
                .export(std::slice::from_ref(s), None, &mut buf)
                .unwrap();
            String::from_utf8(buf).unwrap()
        };
        assert!(text(&s).contains("new connection per request"));
        s.wire = Some(WireReport {
            protocol: "h2c".into(),
            tls: None,
            h2: Some(crate::H2Report {
                goaways: 0,
                refused_retries: 0,
                stream_resets: 0,
                connection_errors: 0,
                cancelled_streams: 2,
            }),
            h3: None,
            compression: None,
            io: "epoll".into(),
            io_refused: None,
        });
        let t = text(&s);
        assert!(!t.contains("new connection per request"), "{t}");
        assert!(
            t.contains("HTTP/2 streams on persistent connections"),
            "{t}"
        );
        assert!(t.contains("2 late stream(s) cancelled"), "{t}");
    }
}
