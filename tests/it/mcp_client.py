"""An MCP client built on the official Python SDK (PyPI `mcp`, pinned in
.ci/run), driven by tests/it/mcp.rs one request per line.

argv[1] is a JSON object {"command", "args", "env", "cwd"}: the server to
start over stdio. Then, on stdin, one JSON object per line:
  {"op": "list"}                              -> {"tools": [...]}
  {"op": "call", "name": N, "arguments": {},  -> {"is_error", "text",
   "meta": {} or null}                           "structured"} or
                                                 {"rpc_error": {"code", "message"}}
  {"op": "quit"}
and one JSON answer per line on stdout.
"""

import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError


async def main() -> None:
    spec = json.loads(sys.argv[1])
    server = StdioServerParameters(
        command=spec["command"], args=spec["args"], env=spec["env"], cwd=spec["cwd"]
    )
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            while True:
                line = await anyio.to_thread.run_sync(sys.stdin.readline)
                if not line:
                    return
                request = json.loads(line)
                if request["op"] == "quit":
                    return
                if request["op"] == "list":
                    listed = await session.list_tools()
                    answer = {
                        "tools": [
                            t.model_dump(mode="json", by_alias=True, exclude_none=True)
                            for t in listed.tools
                        ]
                    }
                else:
                    try:
                        # "meta" is what a host puts in the call's
                        # `_meta` (the clock, the head fence).
                        result = await session.call_tool(
                            request["name"],
                            request.get("arguments"),
                            meta=request.get("meta"),
                        )
                        answer = {
                            "is_error": bool(result.is_error),
                            "text": "".join(
                                c.text for c in result.content if c.type == "text"
                            ),
                            "structured": result.structured_content,
                        }
                    except MCPError as error:
                        answer = {
                            "rpc_error": {
                                "code": error.error.code,
                                "message": error.error.message,
                            }
                        }
                print(json.dumps(answer), flush=True)


anyio.run(main)
