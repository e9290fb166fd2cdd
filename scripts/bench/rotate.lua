-- wrk script for scripts/bench-http.sh: GET /v1/sequences/<prefix><i>/next
-- round-robin over i = 1..BENCH_LIVE_N (env, default 10000), each wrk thread
-- starting at its own offset. The requests are formatted once in init() (with
-- the -H headers given to wrk), so a request costs one Lua call and a table
-- read. Prints the same BENCH line as report.lua.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

local n = tonumber(os.getenv("BENCH_LIVE_N") or "10000")
local prefix = os.getenv("BENCH_LIVE_PREFIX") or "live-"
local reqs = {}
local i = 0

function init(args)
  for k = 1, n do
    reqs[k] = wrk.format("GET", "/v1/sequences/" .. prefix .. k .. "/next")
  end
  -- thread_index is set by report.lua's setup() in this thread's state: threads start
  -- n / 2 apart (with 2 threads), so they do not hit the same names together.
  i = math.floor((thread_index or 0) * n / 2) % n
end

function request()
  i = i % n + 1
  return reqs[i]
end
