-- wrk script for scripts/bench/scale.sh (SCALE_CLIENT=wrk): GET
-- /v1/sequences/tenant-<i>/next, i = 0, 1, 2, ... each name once, thread k of
-- T taking i = k, k + T, k + 2T, ... (SCALE_NAMES names; past them a thread
-- starts over, and the pass is no longer all first uses: scale.sh checks the
-- count). Prints the BENCH line of report.lua.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

local n = tonumber(os.getenv("SCALE_NAMES") or "100000")
local made = {}
local i, stride = 0, 1

-- Each thread learns its index and, once all are made, their number.
function setup(thread)
  thread:set("thread_index", #made)
  table.insert(made, thread)
  for _, t in ipairs(made) do t:set("threads", #made) end
end

function init(args)
  i = thread_index or 0
  stride = threads or 1
end

function request()
  local path = string.format("/v1/sequences/tenant-%07d/next", i % n)
  i = i + stride
  return wrk.format("GET", path)
end
