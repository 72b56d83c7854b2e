# An agent harness starts the server and speaks MCP on its stdin/stdout
# (see the README for a config snippet). Here a shell plays the client:
# the handshake, then the tools a read-only session may call.
printf '%s\n' \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}' \
  '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' \
  | bluetape-flow mcp --mode read-only | grep -o '"name":"[a-z-]*"' | sort
