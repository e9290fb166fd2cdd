-- wrk reporter for scripts/bench-http.sh: done() prints one parseable line
--   BENCH requests=N duration_us=N rps=F p50_us=N p99_us=N p999_us=N max_us=N
--         non2xx=N connect=N read=N write=N timeout=N
-- Latencies are wrk's (closed loop: 50 connections each waiting for its
-- answer), in microseconds. non2xx counts answers with a status >= 400
-- (wrk's summary.errors.status); the others are socket errors.

function done(summary, latency, requests)
  local e = summary.errors
  local secs = summary.duration / 1e6
  io.write(string.format(
    "BENCH requests=%d duration_us=%d rps=%.1f p50_us=%d p99_us=%d p999_us=%d max_us=%d non2xx=%d connect=%d read=%d write=%d timeout=%d\n",
    summary.requests, summary.duration, summary.requests / secs,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max,
    e.status, e.connect, e.read, e.write, e.timeout))
end

-- setup(): each thread's index (0, 1, ...) as the global thread_index of its
-- own state, for the scripts that split the names between threads.
local made = 0
function setup(thread)
  thread:set("thread_index", made)
  made = made + 1
end
