"""Drives every tool of a `bluetape-flow mcp` server with instances
hypothesis-jsonschema generates from the tool's own input schema
(agent-tools.md §4), through the official MCP Python SDK. Run by
tests/it/mcp.rs with the venv .ci/run installs.

argv[1] is a JSON object {"command", "args", "env", "cwd", "run_id",
"examples"}: the server to start over stdio, the run the calls act on (every
instance's run_id is that run: a made-up one would only say the run does not
exist) and how many instances per tool. Prints one JSON object:
  {"tools": N, "calls": N, "ok": N,
   "shape": [{"tool", "arguments", "message"}],   refusals of a schema-valid
                                                  instance for its shape
   "open": [{"tool", "key", "answer"}],           unknown keys not refused
   "refusals": {message: count}}                  every other refusal
"""

import json
import re
import sys

import anyio
import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis_jsonschema import from_schema
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

# What a refusal for the shape of an argument says: a key missing, unknown
# or of the wrong type, a pattern or a length broken (the commands' own
# messages, contracts/commands.md "JSON inputs"). A refusal about the run
# (its state, its lanes, its clock, a binding to its head) says none of it.
SHAPE = re.compile(
    "|".join(
        [
            "fields do not match",
            "identifier contract",
            "must be a UTC timestamp",
            "lowercase SHA-256",
            "must be a boolean",
            "must be an integer",
            "must be a non-negative integer",
            "must be a positive integer",
            "must be a string",
            "must hold a JSON",
            "must be a JSON",
            "floats",
            "takes no argument",
            "needs the argument",
            "argument `",
            "unsupported fields",
            "must be a bounded",
            "must be at most",
            "must contain at most",
            "exceeds its limit",
            "outside the limit",
            "must be canonical",
            "must not contain traversal",
            "must be non-empty",
            "requires evidence",
            "reason is required",
            "non-empty strings",
            "exceeds one MiB",
            "bounded SHA-256 entries",
            "description is invalid",
            "contains duplicates",
            "must be a list",
            "must be an object",
            "invalid value",
            "unexpected argument",
        ]
    )
)


def shaped(envelope):
    """The refusal is about the shape of what was sent."""
    fields = envelope.get("fields") or {}
    if isinstance(fields, dict) and (
        fields.get("missing") or fields.get("unknown") or fields.get("expected_type")
    ):
        return True
    return bool(SHAPE.search(envelope.get("message", "")))


def instances(schema, count):
    """`count` instances of `schema`, the same ones every run."""
    found = []

    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(from_schema(schema))
    def collect(value):
        found.append(value)

    collect()
    return found[:count]


def inlined(schema):
    """The schema with every local `$ref` (`#/$defs/NAME`, the catalog's
    only kind) replaced by its definition, siblings kept, and no `$defs`:
    what the probes below look into."""
    defs = schema.get("$defs", {})

    def walk(value):
        if isinstance(value, dict):
            out = {}
            ref = value.get("$ref")
            if ref is not None:
                assert ref.startswith("#/$defs/"), ref
                out.update(walk(defs[ref[len("#/$defs/"):]]))
            out.update({k: walk(v) for k, v in value.items() if k not in ("$ref", "$defs")})
            return out
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(schema)


def pinned(schema, run_id):
    """The tool's schema with run_id pinned to the run the test made."""
    schema = json.loads(json.dumps(schema))
    if "run_id" in schema.get("properties", {}):
        schema["properties"]["run_id"] = {"const": run_id}
        schema["required"] = sorted(set(schema.get("required", [])) | {"run_id"})
    return schema


async def call(session, name, arguments):
    result = await session.call_tool(name, arguments)
    return bool(result.is_error), result.structured_content or {}


async def main() -> None:
    spec = json.loads(sys.argv[1])
    server = StdioServerParameters(
        command=spec["command"], args=spec["args"], env=spec["env"], cwd=spec["cwd"]
    )
    report = {"tools": 0, "calls": 0, "ok": 0, "shape": [], "open": [], "refusals": {}}
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            report["tools"] = len(tools)
            for tool in tools:
                schema = tool.input_schema
                jsonschema.Draft202012Validator.check_schema(schema)
                for arguments in instances(pinned(schema, spec["run_id"]), spec["examples"]):
                    # An instance of the tool's schema (run_id pinned) is
                    # one of the schema the model reads.
                    jsonschema.validate(arguments, schema)
                    is_error, envelope = await call(session, tool.name, arguments)
                    report["calls"] += 1
                    if not is_error:
                        report["ok"] += 1
                    elif shaped(envelope):
                        report["shape"].append(
                            {"tool": tool.name, "arguments": arguments, "message": envelope.get("message")}
                        )
                    else:
                        message = envelope.get("message", "")
                        report["refusals"][message] = report["refusals"].get(message, 0) + 1
                # An unknown key is always refused: at the top and inside
                # every JSON object argument.
                base = instances(pinned(schema, spec["run_id"]), 1)[0]
                schema = inlined(schema)
                probes = [("(top)", {**base, "unknown_key": 1})]
                for key, value in base.items():
                    if isinstance(value, dict) and schema["properties"][key].get("additionalProperties") is False:
                        probes.append((key, {**base, key: {**value, "unknown_key": 1}}))
                    closed_items = schema["properties"][key].get("items", {}).get("additionalProperties") is False
                    if closed_items and value and isinstance(value[0], dict):
                        probes.append((key, {**base, key: [{**value[0], "unknown_key": 1}] + value[1:]}))
                if tool.name == "evidence-digest":
                    # It digests any list (an evidence list or a
                    # checkpoint's) and binds nothing itself.
                    probes = probes[:1]
                for key, arguments in probes:
                    is_error, envelope = await call(session, tool.name, arguments)
                    if not is_error:
                        report["open"].append({"tool": tool.name, "key": key, "answer": envelope})
    print(json.dumps(report))


anyio.run(main)
