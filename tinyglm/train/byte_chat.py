"""The byte vocabulary and GLM-5.3 chat rendering, as the engine's server produces them.

Mirrors engine/text/byte_tokenizer.{h,cpp} (ids 0..255 are bytes, 256..275 GLM's special tokens in
GLM's order, 276..319 reserved; special texts in the rendered prompt become their ids) and
engine/text/chat_template.cpp's render_glm53 for the parts the curriculum uses: an optional tools
system block, user turns, assistant turns (`<think></think>` then the stripped content, then tool
calls), tool results after `<|observation|>`, and the generation prompt with thinking off. Training
therefore sees exactly the token ids the server sends for a chat request with
`chat_template_kwargs: {"enable_thinking": false}`.
"""
import json

SPECIALS = ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
            "<|assistant|>", "<|observation|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
            "<tool_response>", "</tool_response>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"]
END_OF_TEXT, USER, OBSERVATION = 256, 263, 265
VOCAB_SIZE = 320
SPECIAL_ID = {s: 256 + i for i, s in enumerate(SPECIALS)}

TOOLS_PREAMBLE = ("<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                  "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n")
TOOLS_POSTAMBLE = ("</tools>\n\nFor each function call, output the function name and arguments within the "
                   "following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key>"
                   "<arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key>"
                   "<arg_value>{arg-value-2}</arg_value>...</tool_call>")
UNSET_EFFORT = "Max"  # chat_template.cpp's kUnsetLevel: rendered when no reasoning_effort is set


def encode(text):
    """ByteTokenizer::encode with parse_special: exact special texts become their ids."""
    data = text.encode("utf-8")
    out, i = [], 0
    while i < len(data):
        if data[i] in b"<[":
            hit = next((s for s in SPECIALS if data.startswith(s.encode(), i)), None)
            if hit is not None:
                out.append(SPECIAL_ID[hit])
                i += len(hit)
                continue
        out.append(data[i])
        i += 1
    return out


def decode(ids):
    """Bytes for byte ids, the special text for special ids, nothing for reserved ids."""
    parts = bytearray()
    for t in ids:
        if t < 256:
            parts.append(t)
        elif t < 256 + len(SPECIALS):
            parts += SPECIALS[t - 256].encode()
    return parts.decode("utf-8", errors="replace")


def py_json(v, sort_keys=False):
    """append_py_json: Python's json.dumps separators, non-ASCII kept as is."""
    return json.dumps(v, ensure_ascii=False, sort_keys=sort_keys)


def render_tools(tools):
    """render_glm53_tools for functions given as {"name", "description", "parameters"} dicts. The server
    holds request tools in nlohmann::json objects, which order keys: every level renders sorted."""
    out = TOOLS_PREAMBLE
    for f in tools:
        items = sorted((k, v) for k, v in f.items() if k not in ("defer_loading", "strict"))
        out += "{" + ", ".join(f'"{k}": {py_json(v, sort_keys=True)}' for k, v in items)
        out += "}\n"
    return out + TOOLS_POSTAMBLE


def tool_call_text(name, arguments):
    """One call as render_glm53_assistant writes it; string values verbatim, others as py_json."""
    out = "<tool_call>" + name
    for k, v in arguments.items():
        out += f"<arg_key>{k}</arg_key><arg_value>{v if isinstance(v, str) else py_json(v)}</arg_value>"
    return out + "</tool_call>"


def render_prompt(messages, tools=None):
    """The rendered prompt text up to and including the generation prompt (thinking off).
    messages: [{"role": "system"|"user"|"assistant"|"tool", "content": str, "tool_calls": [(name, args)]}]."""
    out = "[gMASK]<sop><|system|>Reasoning Effort: " + UNSET_EFFORT
    if tools:
        out += render_tools(tools)
    prev = None
    for m in messages:
        role = m["role"]
        if role == "system":
            out += "<|system|>" + m["content"]
        elif role == "user":
            out += "<|user|>" + m["content"]
        elif role == "assistant":
            out += "<|assistant|><think></think>" + m["content"].strip()
            out += "".join(tool_call_text(n, a) for n, a in m.get("tool_calls", []))
        elif role == "tool":
            out += ("" if prev == "tool" else "<|observation|>") + "<tool_response>" + m["content"] + "</tool_response>"
        else:
            raise ValueError(f"message role {role!r}: expected system, user, assistant or tool")
        prev = role
    return out + "<|assistant|><think></think>"
