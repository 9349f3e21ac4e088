//! Building the result document from a merged tally: rates, summaries, the open-loop
//! section, and the generator self-check (generator-bound verdict and warnings).

use super::{
    ConnStats, EndpointStats, EndpointTally, GeneratorStats, LoadResult, OpenLoopStats,
    SecondStats, Tally, ThreadStats, WarmupStats, WsStats, BUSY_LIMIT, LAG_P99_LIMIT_US,
    RESULT_VERSION, SHORTFALL_LIMIT,
};
use crate::errors::ALL_CLASSES;
use crate::hist::{self, HistData};
use crate::spec::{LoadSpec, Mode, Protocol};

/// Inputs of [`assemble`] besides the tally.
pub struct RunInfo {
    pub spec: LoadSpec,
    pub mode: Mode,
    /// The I/O backend that ran ("uring" or "epoll").
    pub io: String,
    pub interrupted: bool,
    pub started_at: f64,
    pub duration_s: f64,
    pub threads: Vec<ThreadStats>,
    pub warmup: Option<WarmupStats>,
    pub nofile_limit: u64,
    pub queue_limit: u64,
    /// Source addresses the connections were spread over.
    pub source_addresses: Vec<String>,
}

/// Build the result document from a merged tally, and run the generator self-check.
pub fn assemble(t: &Tally, info: RunInfo) -> LoadResult {
    let open = info.mode == Mode::Open;
    let d = info.duration_s;
    let per_sec = |n: u64| if d > 0.0 { n as f64 / d } else { 0.0 };
    let status_counts = t
        .status
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(code, &n)| (code.to_string(), n))
        .collect();
    let per_second = t
        .per_second
        .iter()
        .enumerate()
        .map(|(i, (c, e, h))| {
            let q = hist::quantiles(h, &[0.5, 0.99]);
            SecondStats {
                t: i as u32,
                completed: *c,
                errors: *e,
                p50_us: q[0],
                p99_us: q[1],
                hist: hist::encode(h),
                offered_rate: open.then(|| t.offered_per_second.get(i).copied().unwrap_or(0.0)),
            }
        })
        .collect();
    let cpu_s: f64 = info.threads.iter().map(|x| x.cpu_s).sum();
    let open_loop = open.then(|| OpenLoopStats {
        arrival: serde_json::to_value(info.spec.arrival)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default(),
        offered_rate: match info.spec.rate {
            Some(r) => r,
            None => mean_offered_rate(&t.offered_per_second, d),
        },
        offered: t.offered,
        achieved_rate: per_sec(t.requests),
        queue_limit: info.queue_limit,
        queued: t.queued,
        queue_max: t.queue_max,
        unsent_at_end: t.unsent_at_end,
    });
    let mut r = LoadResult {
        version: RESULT_VERSION,
        mode: info.mode,
        io: info.io,
        interrupted: info.interrupted,
        started_at: info.started_at,
        duration_s: d,
        requests: t.requests,
        errors: t.errors.total(),
        timeouts: t.timeouts,
        rps: per_sec(t.requests),
        status_counts,
        error_classes: t.errors.to_map(),
        bytes_in: t.bytes_in,
        bytes_out: t.bytes_out,
        latency: HistData::from_hist(&t.latency),
        service_time: open.then(|| HistData::from_hist(&t.service)),
        schedule_lag: open.then(|| HistData::from_hist(&t.lag)),
        open_loop,
        websocket: (info.spec.protocol == Protocol::Ws).then(|| WsStats {
            message_bytes: info.spec.message_bytes,
            handshakes: t.ws_handshakes,
            handshake_rate: per_sec(t.ws_handshakes),
            handshake_time: HistData::from_hist(&t.handshake),
        }),
        connections: ConnStats {
            targeted: info.spec.connections as u64,
            attempts: t.attempts,
            established: t.established,
            reopened: t.reopened,
            in_flight_at_end: t.in_flight_at_end,
            pipeline_resent: t.pipeline_resent,
            requests_per_connection: hist::summary(&t.per_conn),
            source_addresses: info.source_addresses,
        },
        per_second,
        warmup: info.warmup,
        generator: GeneratorStats {
            threads: info.threads,
            cpu_s,
            cpu_us_per_request: if t.requests > 0 {
                cpu_s * 1e6 / t.requests as f64
            } else {
                0.0
            },
            nofile_limit: info.nofile_limit,
            generator_bound: false,
        },
        warnings: Vec::new(),
        faults: None,
        launched_at_unix_ns: None,
        endpoints: endpoint_stats(&t.endpoints, &info.spec),
        spec: info.spec,
    };
    self_check(&mut r);
    r
}

/// The mix's endpoints (names and weights from the spec, in first-seen order) with their
/// tallies (a run's, or an interleaved slice's); empty without a mix.
pub fn endpoint_stats(tallies: &[EndpointTally], spec: &LoadSpec) -> Vec<EndpointStats> {
    let mut names: Vec<(&str, f64)> = Vec::new();
    for e in &spec.mix {
        match names.iter_mut().find(|(n, _)| *n == e.name) {
            Some(x) => x.1 += e.weight,
            None => names.push((&e.name, e.weight)),
        }
    }
    let total: f64 = names.iter().map(|(_, w)| w).sum();
    let empty = EndpointTally::default();
    names
        .iter()
        .enumerate()
        .map(|(k, &(name, weight))| {
            let e = tallies.get(k).unwrap_or(&empty);
            let error_classes: std::collections::BTreeMap<String, u64> = ALL_CLASSES
                .iter()
                .filter(|c| e.errors[**c as usize] > 0)
                .map(|c| (c.name().to_string(), e.errors[*c as usize]))
                .collect();
            let mut status: Vec<(u16, u64)> = e.status.clone();
            status.sort_unstable();
            EndpointStats {
                name: name.to_string(),
                weight,
                weight_share: if total > 0.0 { weight / total } else { 0.0 },
                requests: e.requests,
                errors: error_classes.values().sum(),
                error_classes,
                timeouts: e.timeouts,
                status_counts: status.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
                latency: HistData::from_hist(&e.latency),
            }
        })
        .collect()
}

/// The mean of per-second offered rates over `duration_s` (the last second counted for its
/// measured part).
fn mean_offered_rate(per_second: &[f64], duration_s: f64) -> f64 {
    let mut sum = 0.0;
    let mut weight = 0.0;
    for (t, r) in per_second.iter().enumerate() {
        let w = (duration_s - t as f64).clamp(0.0, 1.0);
        sum += r * w;
        weight += w;
    }
    if weight > 0.0 {
        sum / weight
    } else {
        per_second.first().copied().unwrap_or(0.0)
    }
}

/// Open loop: explain an achieved rate below 95% of the offered one, naming the side that
/// limited it. `generator_late` is the generator-bound verdict of the other rules (a busy
/// thread, or a p99 schedule lag over the limit).
///
/// - Sends waited for a free connection (>= 1% of them queued, any left unsent, or a queue
///   overflow): the server, or the pool, could not keep up.
/// - Otherwise, when the generator was late: the generator was the limit; the run is already
///   generator-bound by the other rules, so the shortfall never goes without that flag.
/// - Otherwise sends went out on time over free connections and responses did not complete
///   within the run (errors, timeouts, still in flight): the server's side again.
pub fn shortfall(r: &LoadResult, ol: &OpenLoopStats, generator_late: bool) -> Option<String> {
    if !(ol.offered_rate > 0.0
        && r.duration_s >= 1.0
        && ol.achieved_rate < SHORTFALL_LIMIT * ol.offered_rate)
    {
        return None;
    }
    let head = format!(
        "open loop: achieved {:.0} requests/s of {:.0} offered ({:.0}%)",
        ol.achieved_rate,
        ol.offered_rate,
        100.0 * ol.achieved_rate / ol.offered_rate
    );
    let overflow = r.error_classes.get("queue_overflow").map_or(0, |e| e.count);
    let waited =
        ol.queued as f64 >= 0.01 * ol.offered.max(1) as f64 || ol.unsent_at_end > 0 || overflow > 0;
    Some(if waited {
        let also = if generator_late {
            "; the generator was also late (see above)"
        } else {
            ""
        };
        format!(
            "{head}: the server (or the connection pool of {}) could not keep up: {} sends \
             waited for a free connection (deepest queue {}), {} overflowed, {} unsent at the \
             end{also}",
            r.connections.targeted, ol.queued, ol.queue_max, overflow, ol.unsent_at_end
        )
    } else if generator_late {
        format!(
            "{head} while connections were free: the generator sent late, so it, not the \
             server, was the limit (generator-bound)"
        )
    } else {
        format!(
            "{head}, sent on time over free connections: responses did not complete ({} \
             errors, {} timeouts, {} in flight at the end): the server could not keep up",
            r.errors, r.timeouts, r.connections.in_flight_at_end
        )
    })
}

/// Flag a generator-bound run and add human-readable warnings.
pub fn self_check(r: &mut LoadResult) {
    let mut bound = false;
    let mut w = Vec::new();
    for (i, th) in r.generator.threads.iter().enumerate() {
        if th.wall_s > 0.2 && th.busy >= BUSY_LIMIT {
            bound = true;
            w.push(format!(
                "generator thread {i} was busy {:.0}% of the time: the load generator, not the \
                 server, may be the limit (use more generator threads or cores)",
                th.busy * 100.0
            ));
        }
    }
    if let (Some(lag), Some(ol)) = (&r.schedule_lag, &r.open_loop) {
        let late = lag.summary.count > 0 && lag.summary.p99 > LAG_P99_LIMIT_US;
        if late {
            bound = true;
            let waited: f64 = r
                .generator
                .threads
                .iter()
                .filter_map(|t| t.run_delay_s)
                .sum();
            let wall: f64 = r.generator.threads.iter().map(|t| t.wall_s).sum();
            let why = if waited > 0.0 && wall > 0.0 {
                format!(
                    " (its threads waited {:.1} ms for a CPU, {:.1}% of the time: other tasks \
                     shared their cores)",
                    waited * 1e3,
                    100.0 * waited / wall
                )
            } else {
                String::new()
            };
            w.push(format!(
                "open loop: p99 schedule lag was {} us (> {} us): the generator could not send on \
                 time{why}, latencies are understated",
                lag.summary.p99, LAG_P99_LIMIT_US
            ));
        }
        if let Some(msg) = shortfall(r, ol, bound) {
            w.push(msg);
        }
    }
    if r.requests == 0 {
        w.push("no response completed".into());
    }
    if r.timeouts > 0 {
        w.push(format!(
            "{} requests timed out (>= {} s); they are in the latency histogram as censored values",
            r.timeouts, r.spec.timeout_s
        ));
    }
    if r.interrupted {
        w.push("interrupted: partial results".into());
    }
    r.generator.generator_bound = bound;
    r.warnings = w;
}
