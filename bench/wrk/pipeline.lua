-- wrk script of bench/run.py's plaintext_pipelined group (TechEmpower's pipelining idea):
--
--   wrk -t1 -c256 -d5s -s bench/wrk/pipeline.lua http://127.0.0.1:PORT/plaintext -- 16
--
-- Every write carries DEPTH (the argument after "--", 16 by default) copies of the same
-- GET request; wrk reads the DEPTH answers back and counts each as a request, so a server must
-- answer every complete request of its input, in order, for the connection to go on.
local batch

function init(args)
  local depth = tonumber(args[1]) or 16
  local one = wrk.format()  -- GET of the URL's path, with wrk's Host header
  local parts = {}
  for i = 1, depth do
    parts[i] = one
  end
  batch = table.concat(parts)
end

function request()
  return batch
end
