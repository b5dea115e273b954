-- POST /charges with a fresh Idempotency-Key per request (or one key when
-- REPLAY_KEY is set in the environment: every request is then a replay).
local body = '{"amount":1000,"currency":"usd"}'
local headers = { ["Content-Type"] = "application/json" }
local threads = 0
local replay = os.getenv("REPLAY_KEY")

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

function init(args)
  math.randomseed(os.time() + tid * 7919)
  prefix = string.format("wrk-%d-%08x", tid, math.random(0, 0x7fffffff))
  n = 0
end

function request()
  n = n + 1
  headers["Idempotency-Key"] = replay or string.format("%s-%012d", prefix, n)
  return wrk.format("POST", "/charges", headers, body)
end

-- The 99.9th percentile, which wrk's --latency does not print.
function done(summary, latency, requests)
  io.write(string.format("p99.9 %.2fms\n", latency:percentile(99.9) / 1000))
end
