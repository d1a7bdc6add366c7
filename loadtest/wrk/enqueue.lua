-- wrk script: POST /v1/messages with a small JSON message, spread over the
-- tenants' keys given in the KEYS environment variable (comma-separated).
local keys = {}
for k in string.gmatch(os.getenv("KEYS") or "none", "[^,]+") do
  keys[#keys + 1] = k
end
local n = 0
request = function()
  n = n + 1
  local key = keys[(n % #keys) + 1]
  return wrk.format("POST", "/v1/messages", {
    ["Authorization"] = "Bearer " .. key,
    ["Content-Type"] = "application/json",
  }, '{"body":{"order":42,"note":"load test"},"attributes":{"kind":"bench"}}')
end
