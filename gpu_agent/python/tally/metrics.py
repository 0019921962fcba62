# SPDX-License-Identifier: Apache-2.0
"""tally.metrics — per-rank Prometheus metrics of a training process (plain stdlib).

    import tally.metrics
    tally.metrics.start_http_server(9472)        # http://127.0.0.1:9472/metrics
    # or: text = tally.metrics.render()

What it exposes, in the same text format as tally-exporter (format 0.0.4):
  tally_agent_push_pull_duration_seconds   histogram: start of a push_pull to its completion,
                                           observed where the DDP hook's / optimizer's
                                           futures complete (tally.torch's _Inflight)
  tally_agent_push_pull_failures_total     completions with an error
  tally_agent_<counter>_total / gauges     every field of the agent's own statistics
                                           (tally_agent_get_stats: push_pulls, retransmits,
                                           credit_waits, ... ; max_inflight_bytes a gauge)
Labels: rank (RANK) and job_id (TALLY_JOB_ID) on every series (not `job`: Prometheus
keeps that label for the scrape job).
The agent's counters come from every Agent registered with track(); the DDP hook's and the
process-wide agent are registered by tally.torch and tally.init.

  tally_agent_failovers_total              appliances this rank moved its keys off (dead or
                                           draining; gpu_agent/README.md "Failover")
  tally_agent_appliance_up                 gauge per appliance (label appliance = its index in
                                           TALLY_APPLIANCES, state = up/silent/down/draining/
                                           gone): 1 answering, 0 otherwise
"""
import bisect
import os
import threading
import time

# push_pull latency buckets (seconds): 100 us .. 30 s
BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
           0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# Agent statistics that are levels, not counts (everything else is a counter).
_GAUGES = {"max_inflight_bytes": "largest bytes in flight at once"}
_HELP = {
    "push_pulls": "push_pull calls completed", "failed": "push_pulls that failed",
    "partitions": "partitions pushed", "bytes": "bytes pushed",
    "credit_waits": "times the credit window made a partition wait",
    "credit_overdrafts": "partitions started beyond the credit window",
    "retransmits": "chunks retransmitted by the client sessions",
    "excluded": "results that left this rank's push out (quorum)",
    "order_waits": "partitions held for the submission order",
    "failovers": "appliances this rank moved its keys off (dead or draining)",
    "moved_pushes": "open-round partitions pushed again on a surviving appliance",
    "noresult_ops": "partition operations answered header-only (owner mode: reduce-scatter)",
    "noresult_acks": "chunks completed by a header-only RESULT (owner mode)",
    "noresult_skipped_bytes": "sum bytes owner mode kept off this rank's downlink",
    "noresult_payloads": "sum payloads that came anyway to owner-mode operations",
    "rx_bytes": "bytes the client sessions received (the downlink)",
}


class Histogram:
    """A cumulative Prometheus histogram, thread-safe."""

    def __init__(self, buckets=BUCKETS):
        self.buckets = tuple(sorted(buckets))
        self.counts = [0] * (len(self.buckets) + 1)
        self.sum = 0.0
        self.lock = threading.Lock()

    def observe(self, v):
        i = bisect.bisect_left(self.buckets, v)
        with self.lock:
            self.counts[i] += 1
            self.sum += v

    def snapshot(self):
        with self.lock:
            return list(self.counts), self.sum


push_pull_seconds = Histogram()
_failures = [0]
_agents = []            # weak enough: agents are few and live as long as training
_lock = threading.Lock()
_server = None


def observe_push_pull(seconds, ok=True):
    """Records one completed push_pull (called by tally.torch where the futures complete)."""
    push_pull_seconds.observe(seconds)
    if not ok:
        with _lock:
            _failures[0] += 1


def track(agent):
    """Adds an Agent whose stats() go into render() (idempotent)."""
    with _lock:
        if all(a is not agent for a in _agents):
            _agents.append(agent)
    return agent


def _labels(extra=""):
    rank = os.environ.get("RANK", "0")
    job = os.environ.get("TALLY_JOB_ID", "")
    s = f'rank="{_esc(rank)}",job_id="{_esc(job)}"'
    return s + ("," + extra if extra else "")


def _esc(v):
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _fmt(v):
    if v == float("inf"):
        return "+Inf"
    return repr(float(v)) if isinstance(v, float) and not v.is_integer() else str(int(v))


def _agent_stats():
    tot = {}
    with _lock:
        agents = list(_agents)
    for a in agents:
        try:
            st = a.stats()
        except Exception:       # closed agent: nothing to add
            continue
        for k, v in st.items():
            tot[k] = max(tot.get(k, 0), v) if k in _GAUGES else tot.get(k, 0) + v
    return tot


def _liveness():
    with _lock:
        agents = list(_agents)
    for a in agents:
        try:
            return a.liveness()
        except Exception:       # closed agent, or a library without liveness
            continue
    return []


def render():
    """The metrics of this process as Prometheus text exposition (a str)."""
    out = []
    live = _liveness()
    if live:
        n = "tally_agent_appliance_up"
        out += [f"# HELP {n} 1 while this rank's session with the appliance is answering "
                "(state: up, silent, down, draining, gone)", f"# TYPE {n} gauge"]
        for i, (state, _) in enumerate(live):
            lab = _labels(f'appliance="{i}",state="{state}"')
            out.append(f"{n}{{{lab}}} {1 if state == 'up' else 0}")
    name = "tally_agent_push_pull_duration_seconds"
    counts, total = push_pull_seconds.snapshot()
    out += [f"# HELP {name} seconds from a push_pull's start to its completion (DDP hook, optimizer)",
            f"# TYPE {name} histogram"]
    acc = 0
    for le, c in zip(push_pull_seconds.buckets + (float("inf"),), counts):
        acc += c
        le_label = 'le="%s"' % _fmt(le)
        out.append(f"{name}_bucket{{{_labels(le_label)}}} {acc}")
    out.append(f"{name}_sum{{{_labels()}}} {_fmt(total)}")
    out.append(f"{name}_count{{{_labels()}}} {acc}")
    with _lock:
        failures = _failures[0]
    out += ["# HELP tally_agent_push_pull_failures_total push_pulls completed with an error",
            "# TYPE tally_agent_push_pull_failures_total counter",
            f"tally_agent_push_pull_failures_total{{{_labels()}}} {failures}"]
    for k, v in sorted(_agent_stats().items()):     # generic: every field the agent reports
        key = "".join(c if c.isalnum() else "_" for c in k.lower())
        if k in _GAUGES:
            n, t, h = f"tally_agent_{key}", "gauge", _GAUGES[k]
        else:
            n, t, h = f"tally_agent_{key}_total", "counter", _HELP.get(k, f"agent statistic {k}")
        out += [f"# HELP {n} {h}", f"# TYPE {n} {t}", f"{n}{{{_labels()}}} {int(v)}"]
    return "\n".join(out) + "\n"


def start_http_server(port, addr="127.0.0.1"):
    """Serves render() at http://addr:port/metrics from a daemon thread; returns the server
    (server.server_address has the port when port is 0). Localhost by default."""
    global _server
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404)
                return
            body = render().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):      # no access log on the training's stderr
            pass

    srv = ThreadingHTTPServer((addr, port), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, name="tally-metrics", daemon=True).start()
    _server = srv
    return srv


def now():
    """The clock push_pull latencies are measured with."""
    return time.monotonic()
