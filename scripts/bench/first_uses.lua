-- wrk script for scripts/bench/scale.sh (SCALE_CLIENT=wrk): GET
-- /v1/sequences/tenant-<i>/next, each name once: thread k of SCALE_THREADS
-- takes i = k, k + T, k + 2T, ... (SCALE_NAMES names; past them a thread
-- starts over, and the pass is no longer all first uses: scale.sh checks the
-- count). The thread count comes from the environment, not from setup():
-- wrk starts each thread before it sets up the next. Prints the BENCH line
-- of report.lua.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

local n = tonumber(os.getenv("SCALE_NAMES") or "100000")
local stride = tonumber(os.getenv("SCALE_THREADS") or "2")
local i = 0

-- thread_index: set by report.lua's setup().
function init(args)
  i = thread_index or 0
end

function request()
  local path = string.format("/v1/sequences/tenant-%07d/next", i % n)
  i = i + stride
  return wrk.format("GET", path)
end
