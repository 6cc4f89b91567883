"""sparkglm-serve through openai-python with the issue-20 fields: tools and tool_choice, the
structured-output fields (compiled at admission or refused with 400 naming the field, never
ignored), unknown fields refused, `reasoning` beside `reasoning_content`, continuous usage, /version.
Dummy weights emit no tool markup: the parser itself is tested in tests/text/tool_parser_test.cpp.

Run: python3 test_server_tools.py --bin-dir BUILD_DIR
"""
import json
import os
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server_lifecycle as harness  # noqa: E402

import openai  # noqa: E402

SERVER = None
CLIENT = None
MODEL = "tinyglm-micro"
MESSAGES = [{"role": "user", "content": "Weather?"}]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object",
                                          "properties": {"city": {"type": "string"}}}}}]


def setUpModule():
    global SERVER, CLIENT
    SERVER = harness.ServerProcess()
    CLIENT = openai.OpenAI(base_url=SERVER.base + "/v1", api_key="unused", max_retries=0,
                           timeout=60)


def tearDownModule():
    if SERVER is not None:
        assert SERVER.stop() == 0, SERVER.log()


class ToolsTest(unittest.TestCase):
    def test_tools_auto_parse_and_stream(self):
        r = CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, tools=TOOLS,
                                           tool_choice="auto", max_tokens=8, temperature=0)
        self.assertIn(r.choices[0].finish_reason, ("stop", "length", "tool_calls"))
        chunks = list(CLIENT.chat.completions.create(
            model=MODEL, messages=MESSAGES, tools=TOOLS, max_tokens=8, temperature=0,
            stream=True, stream_options={"include_usage": True,
                                         "continuous_usage_stats": True}))
        self.assertEqual(chunks[-1].usage.completion_tokens, 8)
        self.assertIsNotNone(chunks[1].usage)

    def test_history_with_tool_calls_and_results(self):
        history = MESSAGES + [
            {"role": "assistant", "content": None, "reasoning": "look it up",
             "tool_calls": [{"id": "c1", "type": "function", "function": {
                 "name": "get_weather", "arguments": json.dumps({"city": "Oslo"})}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
        r = CLIENT.chat.completions.create(model=MODEL, messages=history, tools=TOOLS,
                                           max_tokens=4, temperature=0)
        m = r.choices[0].message.model_dump()
        self.assertEqual(m.get("reasoning"), m.get("reasoning_content"))

    def test_forced_tool_call_comes_back_as_a_valid_call(self):
        # tool_choice required / named: the tool-call grammar forces GLM's markup, so even dummy
        # weights answer with a parseable call whose arguments follow the tool's schema. (With
        # thinking on, the grammar starts once the reasoning closes, which dummy weights need not.)
        add = {"type": "function", "function": {
            "name": "add", "description": "Adds two integers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
                                                            "b": {"type": "integer"}},
                           "required": ["a", "b"]}}}
        for tools, choice in (([add], "required"),
                              (TOOLS + [add], {"type": "function", "function": {"name": "add"}})):
            r = CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, tools=tools,
                                               tool_choice=choice, max_tokens=1024, temperature=0,
                                               extra_body={"chat_template_kwargs":
                                                           {"enable_thinking": False}})
            c = r.choices[0]
            self.assertEqual(c.finish_reason, "tool_calls", c)
            self.assertTrue(c.message.tool_calls, c)
            for call in c.message.tool_calls:
                self.assertEqual(call.function.name, "add")
                args = json.loads(call.function.arguments)
                self.assertEqual(set(args), {"a", "b"})
                self.assertTrue(all(isinstance(v, int) for v in args.values()), args)

    def test_forced_tool_call_with_thinking_on_never_ends_without_a_call(self):
        # tool-eval-bench 3.0.0's tool_choice="required" probe (its exact request) got a 200 with
        # finish_reason "stop" and no call: the dummy model drew eos inside its reasoning, before
        # the grammar began. eos now waits for the constrained value: a forced call either comes
        # back as a call or runs out of tokens.
        probe_tool = {"type": "function", "function": {
            "name": "probe_ping", "description": "Acknowledge the probe. Call this with any value.",
            "parameters": {"type": "object", "properties": {"value": {"type": "string"}},
                           "required": ["value"], "additionalProperties": False}}}
        probe = [{"role": "user",
                  "content": "Reply with the single word OK. Do not call any tools."}]
        r = CLIENT.chat.completions.create(model=MODEL, messages=probe, tools=[probe_tool],
                                           tool_choice="required", temperature=0.0,
                                           max_tokens=256)
        self.assertIn(r.choices[0].finish_reason, ("tool_calls", "length"), r.choices[0])
        add = {"type": "function", "function": {
            "name": "add", "parameters": {"type": "object",
                                          "properties": {"a": {"type": "integer"}},
                                          "required": ["a"]}}}
        finishes = []
        for seed in range(4):
            r = CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, tools=[add],
                                               tool_choice="required", temperature=1.0, seed=seed,
                                               max_tokens=600)
            c = r.choices[0]
            finishes.append(c.finish_reason)
            self.assertIn(c.finish_reason, ("tool_calls", "length"), c)
            if c.finish_reason == "tool_calls":
                self.assertEqual(c.message.tool_calls[0].function.name, "add")
                self.assertIsInstance(json.loads(c.message.tool_calls[0].function.arguments)["a"],
                                      int)
        self.assertIn("tool_calls", finishes, "no reasoning closed: the loop checked no call")

    def test_tool_eval_bench_request_shapes_are_served(self):
        # What tool-eval-bench 3.0.0 sends (docs/api.md has the run): a streamed turn with tools,
        # tool_choice auto, parallel_tool_calls and include_usage; the history it builds after a
        # call (assistant content "" with reasoning_content and tool_calls, a tool result with
        # its name); a streamed strict json_schema turn without tools.
        history = MESSAGES + [
            {"role": "assistant", "content": "", "reasoning_content": "need the weather",
             "tool_calls": [{"id": "call_1", "type": "function", "function": {
                 "name": "get_weather", "arguments": json.dumps({"city": "Berlin"})}}]},
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
             "content": json.dumps({"temp_c": 21})}]
        for messages in (MESSAGES, history):
            chunks = list(CLIENT.chat.completions.create(
                model=MODEL, messages=messages, tools=TOOLS, tool_choice="auto",
                parallel_tool_calls=True, temperature=0.0, max_tokens=8, stream=True,
                stream_options={"include_usage": True}))
            self.assertEqual(chunks[-1].usage.completion_tokens, 8)
        schema = {"type": "json_schema", "json_schema": {
            "name": "review", "strict": True, "schema": {
                "type": "object", "additionalProperties": False, "required": ["rating", "genre"],
                "properties": {"rating": {"type": "number", "minimum": 0, "maximum": 10},
                               "genre": {"type": "string", "enum": ["drama", "sci-fi"]}}}}}
        chunks = list(CLIENT.chat.completions.create(
            model=MODEL, messages=MESSAGES, response_format=schema, temperature=0.0,
            max_tokens=256, stream=True, stream_options={"include_usage": True},
            extra_body={"chat_template_kwargs": {"enable_thinking": False}}))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(chunks[-2].choices[0].finish_reason, "stop", text)
        value = json.loads(text)
        self.assertIn(value["genre"], ("drama", "sci-fi"))
        self.assertTrue(0 <= value["rating"] <= 10, value)

    def test_structured_output_fields_are_applied_or_refused(self):
        schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
        for extra in ({"response_format": {"type": "json_schema", "json_schema":
                                           {"name": "s", "schema": schema, "strict": True}}},
                      {"extra_body": {"guided_json": schema}}):
            try:
                r = CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=64,
                                                   temperature=0, **extra)
                self.assertIsInstance(r.choices[0].message.content, str)
            except openai.BadRequestError as e:  # an engine that applies no constraint says so
                self.assertIn(e.body.get("param"), ("response_format", "guided_json"))
        with self.assertRaises(openai.BadRequestError) as e:
            CLIENT.chat.completions.create(
                model=MODEL, messages=MESSAGES, max_tokens=4,
                response_format={"type": "json_schema", "json_schema": {
                    "name": "s", "schema": {"type": "string", "pattern": "a+"}}})
        self.assertEqual(e.exception.body.get("param"), "response_format")
        for field in ("guided_regex", "frobnicate"):
            with self.assertRaises(openai.BadRequestError) as e:
                CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4,
                                               extra_body={field: "x"})
            self.assertEqual(e.exception.body.get("param"), field)

    def test_version(self):
        with urllib.request.urlopen(SERVER.base + "/version", timeout=10) as r:
            v = json.load(r)
        self.assertTrue(v["version"])
        self.assertIn("commit", v)


if __name__ == "__main__":
    harness.parse_args_and_run(globals())
