-- bench/run serve: wrk script for tarn-serve's predict. Every request is the same POST:
-- the body is read from the file named by $SERVE_BODY (a TF Serving predict request, made
-- by bench/serve_bench.sh). Answers other than 2xx are counted by wrk itself ("Non-2xx or
-- 3xx responses"), which the bench script treats as a failure; no response() hook, so
-- wrk's own cost per request stays what it is for a plain GET.
local path = os.getenv("SERVE_BODY")
if not path then error("serve_predict.lua: set SERVE_BODY to the request body's file") end
local f = assert(io.open(path, "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
