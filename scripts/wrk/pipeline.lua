-- POST /pipeline (the demo's demo.pipeline, or bench/dbos's) with a fresh
-- Idempotency-Key and a fresh tag per request: every request is a new run
-- whose steps each insert a new (tag, step) row. STEPS (default 1) and
-- STEPMS (default 0) in the environment set the body's steps and stepMs.
local steps = tonumber(os.getenv("STEPS") or "1")
local stepms = tonumber(os.getenv("STEPMS") or "0")
local headers = { ["Content-Type"] = "application/json" }
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

function init(args)
  math.randomseed(os.time() + tid * 7919)
  prefix = string.format("wrkpl-%d-%08x", tid, math.random(0, 0x7fffffff))
  n = 0
end

function request()
  n = n + 1
  local id = string.format("%s-%012d", prefix, n)
  headers["Idempotency-Key"] = id
  return wrk.format("POST", "/pipeline", headers,
    string.format('{"tag":"%s","steps":%d,"stepMs":%d}', id, steps, stepms))
end
