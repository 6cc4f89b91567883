"""Structured output end to end: sparkglm-serve (tinyglm-micro, dummy weights, CPU) answers
response_format json_schema / json_object and guided_choice with output that the `jsonschema`
package validates, greedy and sampled, thinking off and on (the grammar starts after </think>);
a keyword outside the supported subset is a 400 naming it.

The schemas bound every string, array and number so that even a model that never wants to close
a value ends within max_tokens (dummy weights choose among the allowed tokens at random).

Run: python3 test_structured_output.py --bin-dir BUILD_DIR
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server_lifecycle as harness  # noqa: E402

try:
    import jsonschema
except ImportError:  # ci/setup.sh installs it into .venv
    jsonschema = None

SERVER = None
MODEL = "tinyglm-micro"
NO_THINKING = {"enable_thinking": False}


def ninety_six_keys():
    props = {}
    for i in range(96):
        props[f"field_{i}"] = [{"type": "integer", "minimum": 0, "maximum": 999},
                               {"type": "string", "maxLength": 8},
                               {"type": "boolean"}][i % 3]
    return {"type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


SCHEMAS = {
    "nested": {"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 10},
        "address": {"type": "object", "properties": {
            "zip": {"type": "integer", "minimum": 10000, "maximum": 99999},
            "city": {"enum": ["Paris", "Lyon", "Nice"]}},
            "required": ["zip", "city"], "additionalProperties": False}},
        "required": ["name", "address"], "additionalProperties": False},
    "arrays": {"type": "object", "properties": {
        "scores": {"type": "array", "items": {"type": "number", "minimum": -1.5, "maximum": 2.5},
                   "minItems": 1, "maxItems": 4},
        "flags": {"type": "array", "items": {"type": ["boolean", "null"]}, "maxItems": 3}},
        "required": ["scores"]},
    "anyof_refs": {"$defs": {"pt": {"type": "object", "properties": {
        "x": {"type": "integer", "minimum": -50, "maximum": 50},
        "y": {"type": "integer", "exclusiveMinimum": 0, "maximum": 9}}, "required": ["x", "y"]}},
        "anyOf": [{"$ref": "#/$defs/pt"},
                  {"type": "array", "items": {"$ref": "#/$defs/pt"}, "maxItems": 2}]},
    "enum_const": {"type": "object", "properties": {
        "kind": {"const": "point"}, "level": {"enum": [1, 2, "three", None, True]}},
        "required": ["kind", "level"], "additionalProperties": False},
    "ninety_six_keys": ninety_six_keys(),
}


def setUpModule():
    global SERVER
    if jsonschema is None:
        raise RuntimeError("the jsonschema package is missing: run ci/setup.sh")
    SERVER = harness.ServerProcess()


def tearDownModule():
    if SERVER is not None:
        code = SERVER.stop()
        assert code == 0, f"exit code {code}\n{SERVER.log()}"


def chat(body):
    base = {"model": MODEL, "messages": [{"role": "user", "content": "Answer in JSON."}]}
    base.update(body)
    return harness.post_json(SERVER.port, "/v1/chat/completions", base, timeout=300)


class StructuredOutputTest(unittest.TestCase):
    def generate(self, schema, temperature, seed, thinking=False, max_tokens=4000):
        body = {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": "t", "schema": schema,
                                                    "strict": True}},
                "temperature": temperature, "seed": seed, "max_tokens": max_tokens}
        if not thinking:
            body["chat_template_kwargs"] = NO_THINKING
        status, r = chat(body)[:2]
        self.assertEqual(status, 200, r)
        choice = r["choices"][0]
        return choice, choice["message"]["content"]

    def test_every_schema_validates_greedy_and_sampled(self):
        for name, schema in SCHEMAS.items():
            for temperature, seed in ((0, 1), (1.0, 7), (1.0, 8)):
                with self.subTest(schema=name, temperature=temperature, seed=seed):
                    choice, content = self.generate(schema, temperature, seed)
                    self.assertEqual(choice["finish_reason"], "stop", content)
                    value = json.loads(content)
                    jsonschema.validate(value, schema)
                    if name == "ninety_six_keys":
                        self.assertEqual(len(value), 96)

    def test_json_object_gives_an_object(self):
        for seed in (1, 2, 3):
            body = {"response_format": {"type": "json_object"}, "temperature": 1.0,
                    "seed": seed, "max_tokens": 3000, "chat_template_kwargs": NO_THINKING}
            status, r = chat(body)[:2]
            self.assertEqual(status, 200, r)
            if r["choices"][0]["finish_reason"] == "stop":  # free-form values may run long
                self.assertIsInstance(json.loads(r["choices"][0]["message"]["content"]), dict)

    def test_guided_choice_is_one_of_the_choices(self):
        for seed in (1, 2, 3, 4):
            body = {"guided_choice": ["red", "green", "blue"], "temperature": 1.0,
                    "seed": seed, "max_tokens": 16, "chat_template_kwargs": NO_THINKING}
            status, r = chat(body)[:2]
            self.assertEqual(status, 200, r)
            self.assertIn(r["choices"][0]["message"]["content"], ["red", "green", "blue"])

    def test_min_tokens_does_not_extend_a_complete_value(self):
        # The grammar decides where a constrained output ends: a choice shorter than min_tokens is
        # the whole reply (min_tokens holds back eos only while the grammar allows another token).
        for seed in (1, 2):
            body = {"guided_choice": ["red", "green", "blue"], "temperature": 1.0, "seed": seed,
                    "min_tokens": 12, "max_tokens": 16, "chat_template_kwargs": NO_THINKING}
            status, r = chat(body)[:2]
            self.assertEqual(status, 200, r)
            self.assertIn(r["choices"][0]["message"]["content"], ["red", "green", "blue"])
            self.assertEqual(r["choices"][0]["finish_reason"], "stop", r)

    def test_unsupported_keyword_is_a_400_naming_it(self):
        schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a+$"}}}
        status, r = chat({"response_format": {"type": "json_schema", "json_schema": {
            "name": "t", "schema": schema}}, "max_tokens": 8})[:2]
        self.assertEqual(status, 400, r)
        self.assertIn("pattern", json.dumps(r))


if __name__ == "__main__":
    harness.parse_args_and_run(globals())
