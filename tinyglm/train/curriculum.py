"""The seeded synthetic curriculum: byte-level chat examples in the quality probes' own formats.

Every batch is a pure function of (seed, step): `batch(seed, step)` draws a length bucket, then one
example per row from a generator seeded by (seed, step, row), so data-loader workers and reruns
agree byte for byte. Bump GENERATOR_VERSION whenever any output changes.

Prompts follow workloads/prompt_builder.cpp (a `[[sg:salt:tag]]` marker line, the builders' head and
task sentences, prose filler in filler_text.cpp's style, the two-hop key -> code -> value tables) and
are rendered with the GLM-5.3 chat template, thinking off (byte_chat.py). Replies end with the token
the engine stops on: <|user|>, or <|observation|> after a tool call.

Tasks: arithmetic (a*b - c*d + e worked step by step, ending 'Answer: <n>'), two-hop needle tables and
one-hop key-value facts hidden in prose (1K-4K tokens), copying and reversal, JSON objects following a
given schema, the JSON array of squares, GLM tool-call markup (and the answer after a tool result),
and prose continuation that echoes the marker.
"""
import json

import random

import byte_chat as chat

GENERATOR_VERSION = "tinyglm-curriculum/3"  # 2: tools with sorted keys, as the server; 3: an 8K bucket

# (tokens per row, rows): every bucket holds 32768 tokens, so steps cost about the same.
BUCKETS = [(512, 64), (1024, 32), (2048, 16), (4096, 8), (8192, 4)]
BUCKET_P = [0.30, 0.25, 0.20, 0.15, 0.10]

WORDS = ["the", "river", "stone", "light", "house", "garden", "window", "morning", "road", "small", "old",
         "quiet", "bright", "warm", "long", "green", "walked", "found", "kept", "saw", "made", "held", "left",
         "turned", "and", "with", "near", "over", "under", "after", "before", "while", "a", "of", "in", "to",
         "her", "his", "their", "our", "city", "field", "table", "letter", "story", "water", "friend",
         "market", "bridge", "hill", "night", "summer", "winter", "book", "door", "tree", "slowly", "again",
         "once", "never", "always", "there", "every", "other"]  # filler_text.cpp's kWords


class Draws:
    """Seeded draws on random.Random (Python's own generator: the GPU machine need not have numpy).
    Draws(seed, step, row) seeds from the string "seed:step:row" (SHA-512 seeding, stable across runs)."""

    def __init__(self, *key):
        self.r = random.Random(":".join(map(str, key)))

    def integers(self, lo, hi=None):
        """Uniform on [lo, hi), or on [0, lo) without hi."""
        return self.r.randrange(lo, hi) if hi is not None else self.r.randrange(lo)

    def random(self):
        return self.r.random()

    def uniform(self, a, b):
        return self.r.uniform(a, b)

    def pick(self, seq, weights=None):
        return self.r.choices(seq, weights)[0]

    def subset(self, n, k):
        """k distinct indices of range(n), ascending."""
        return sorted(self.r.sample(range(n), k))

    def letters(self, n):
        return "".join(self.r.choices("abcdefghijklmnopqrstuvwxyz", k=n))


def letters(rng, n):
    return rng.letters(n)


def prose(rng, n_bytes):
    """prose_words' style (leading space per word, about one sentence end in nine) up to n_bytes."""
    out, capital = [], True
    size = 0
    while True:
        w = WORDS[rng.integers(len(WORDS))]
        if capital:
            w = w.capitalize()
        capital = rng.integers(9) == 0
        piece = " " + w + ("." if capital else "")
        if size + len(piece) > n_bytes:
            return "".join(out)
        out.append(piece)
        size += len(piece)


def marker(rng):
    salt = "q-" + letters(rng, int(rng.integers(3, 9)))
    tag = str(rng.integers(0, 64))
    if rng.random() < 0.5:
        tag = f"r{rng.integers(0, 4)}:{tag}"
    return f"[[sg:{salt}:{tag}]]"


def echo_line(m, echo):
    return f"Begin your reply with the tag {m} exactly as written here.\n" if echo else ""


# ---- tasks: each returns (messages, tools, reply_text, reply_calls, stop_id, filler_setter) -------
# A task builds its user content around a filler whose byte budget is filled in last (fit()).

def arithmetic(rng, budget):
    def draw():  # the probe's 4-digit a and c most of the time, fewer digits as easier steps
        n = rng.pick([2, 3, 4, 4, 4])
        return int(rng.integers(10 ** (n - 1), 10 ** n))
    a, c = draw(), draw()
    b, d, e = int(rng.integers(13, 98)), int(rng.integers(13, 98)), int(rng.integers(100, 1000))
    m = marker(rng)
    head = m + "\n" + echo_line(m, False) + "Background notes, not needed for the task:\n"
    tail = (f"\n\nTask: compute a*b - c*d + e for a = {a}, b = {b}, c = {c}, d = {d}, e = {e}. Work it out "
            "step by step, then end with a line of the form \"Answer: <n>\".\n")

    def product(x, y, name):
        t, o = y // 10 * 10, y % 10
        return f"{name} = {x}*{y} = {x}*{t} + {x}*{o} = {x * t} + {x * o} = {x * y}\n"
    ab, cd = a * b, c * d
    reply = (product(a, b, "a*b") + product(c, d, "c*d") + f"a*b - c*d = {ab} - {cd} = {ab - cd}\n"
             f"{ab - cd} + {e} = {ab - cd + e}\nAnswer: {ab - cd + e}")
    return head, tail, reply


def needle(rng, budget):
    """prompt_builder.cpp's needle: key -> code rows, then code -> value rows, the needle at 37 % and 61 %
    depth of its table (here drawn around those depths so the model cannot count rows)."""
    key = letters(rng, 6)
    code = letters(rng, 4) + "-" + str(rng.integers(1000, 10000))
    value = str(rng.integers(10 ** 7, 10 ** 8))
    m = marker(rng)
    head = m + "\n" + "Two lookup tables follow.\n\n"
    tail = (f"\nQuestion: what is the value for key {key}? Find its code in Table 1, then that code's value in "
            "Table 2. Reply with the 8-digit value.\n")
    rows = max(2, (budget - len(head) - len(tail) - 60) // 31)  # ~29 and ~32 bytes a row
    first, second = (rows + 1) // 2, rows // 2
    at1, at2 = int(rng.integers(0, first + 1)), int(rng.integers(0, second + 1))
    body = "Table 1 (key -> code):\n"
    for i in range(first + 1):
        if i == at1:
            body += f"key {key} -> code {code}\n"
        if i < first:
            k = letters(rng, 6)
            body += f"key {k if k != key else 'a' + k[1:]} -> code {letters(rng, 4)}-{rng.integers(1000, 10000)}\n"
    body += "\nTable 2 (code -> value):\n"
    for i in range(second + 1):
        if i == at2:
            body += f"code {code} -> value {value}\n"
        if i < second:
            body += f"code {letters(rng, 4)}-{rng.integers(1000, 10000)} -> value {rng.integers(10 ** 7, 10 ** 8)}\n"
    return head + body, tail, f"code {code} -> value {value}"


def prose_fact(rng, budget):
    """One-hop retrieval: a few 'The code of item X is N.' facts hidden in prose, one asked for."""
    facts = [(letters(rng, 6), str(rng.integers(10 ** 7, 10 ** 8))) for _ in range(int(rng.integers(1, 6)))]
    m = marker(rng)
    text = prose(rng, max(0, budget - 260))
    cuts = sorted(rng.integers(0, len(text) + 1) for _ in facts)
    parts, last = [], 0
    for (k, v), cut in zip(facts, cuts):
        cut = text.rfind(" ", 0, cut) if cut < len(text) else cut
        cut = max(cut, last)
        parts += [text[last:cut], f" The code of item {k} is {v}."]
        last = cut
    parts.append(text[last:])
    k, v = facts[int(rng.integers(len(facts)))]
    return m + "\nNotes:\n" + "".join(parts), f"\n\nQuestion: what is the code of item {k}? Reply with the code.\n", v


def copy_or_reverse(rng, budget):
    n = int(rng.integers(8, max(9, min(200, (budget - 200) // 2))))
    src = prose(rng, n).strip() if rng.random() < 0.5 else letters(rng, n)
    m = marker(rng)
    if rng.random() < 0.5:
        return m + "\n", f"Task: repeat the following text exactly.\nText: {src}\n", src
    return m + "\n", f"Task: write the following text backwards, character by character.\nText: {src}\n", src[::-1]


SCHEMA_FIELDS = [("name", "string"), ("city", "string"), ("age", "integer"), ("score", "number"),
                 ("active", "boolean"), ("tags", "array of strings"), ("id", "string"), ("count", "integer")]


def json_object(rng, budget):
    fields = [SCHEMA_FIELDS[i] for i in rng.subset(len(SCHEMA_FIELDS), rng.integers(2, 6))]
    obj = {}
    for name, kind in fields:
        if kind == "string":
            obj[name] = letters(rng, int(rng.integers(3, 9))).capitalize()
        elif kind == "integer":
            obj[name] = int(rng.integers(0, 1000))
        elif kind == "number":
            obj[name] = round(float(rng.integers(0, 10000)) / 100, 2)
        elif kind == "boolean":
            obj[name] = bool(rng.integers(2))
        else:
            obj[name] = [letters(rng, int(rng.integers(2, 6))) for _ in range(int(rng.integers(1, 4)))]
    schema = {"type": "object", "properties": {n: {"type": k.split()[-1].rstrip("s") if k.startswith("array")
                                                   else k} for n, k in fields},
              "required": [n for n, _ in fields]}
    for n, k in fields:
        if k.startswith("array"):
            schema["properties"][n] = {"type": "array", "items": {"type": "string"}}
    values = "; ".join(f"{n} = {', '.join(v) if isinstance(v, list) else json.dumps(v)}" for n, v in obj.items())
    m = marker(rng)
    tail = (f"Task: output one JSON object that follows this schema, and nothing else.\nSchema: "
            f"{json.dumps(schema)}\nValues: {values}\n")
    return m + "\n", tail, json.dumps(obj)


def squares(rng, budget):
    m = marker(rng)
    tail = ("\n\nTask: output a JSON array of exactly 50 objects {\"index\": i, \"square\": i*i} for i = 1, 2, "
            "..., 50 in order, and nothing else.\n")
    return m + "\nBackground notes, not needed for the task:\n", tail, json.dumps(
        [{"index": i, "square": i * i} for i in range(1, 51)])


def echo_prose(rng, budget):
    m = marker(rng)
    head = m + "\n" + echo_line(m, True) + "Continue this text in the same style.\n\n"
    return head, "", m + prose(rng, int(rng.integers(40, 200)))


TOOLS = [
    {"name": "get_weather", "description": "Current weather for a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                    "required": ["city"]}},
    {"name": "lookup_order", "description": "Status of an order by its id",
     "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}},
    {"name": "add_numbers", "description": "Sum of two integers",
     "parameters": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                    "required": ["x", "y"]}},
]


def tool_call(rng):
    """(tools offered, user text, call name, call arguments, tool result, final reply)."""
    offered = [TOOLS[i] for i in rng.subset(len(TOOLS), rng.integers(1, 4))]
    f = offered[int(rng.integers(len(offered)))]
    city = letters(rng, int(rng.integers(4, 9))).capitalize()
    if f["name"] == "get_weather":
        unit = ["celsius", "fahrenheit"][int(rng.integers(2))]
        deg = int(rng.integers(-10, 40))
        return (offered, f"What is the weather in {city} in {unit}?", f["name"], {"city": city, "unit": unit},
                json.dumps({"temperature": deg, "unit": unit}), f"It is {deg} degrees {unit} in {city}.")
    if f["name"] == "lookup_order":
        oid = letters(rng, 3).upper() + "-" + str(rng.integers(1000, 10000))
        status = ["shipped", "pending", "delivered"][int(rng.integers(3))]
        return (offered, f"Where is my order {oid}?", f["name"], {"order_id": oid},
                json.dumps({"status": status}), f"Order {oid} is {status}.")
    x, y = int(rng.integers(0, 10000)), int(rng.integers(0, 10000))
    return (offered, f"Use the tool to add {x} and {y}.", f["name"], {"x": x, "y": y},
            json.dumps({"sum": x + y}), f"The sum is {x + y}.")


FILLED = ("arithmetic", "squares", "echo")  # prose filler between head and tail
PLAIN_TASKS = {"arithmetic": arithmetic, "needle": needle, "prose_fact": prose_fact, "copy": copy_or_reverse,
               "json": json_object, "squares": squares, "echo": echo_prose}
# Task weights per bucket (tokens per row); "tool" is handled apart (its prompt is not filler-shaped).
TASK_MIX = {
    512: {"arithmetic": 3, "copy": 2, "json": 2, "tool": 1, "echo": 1, "needle": 1, "prose_fact": 1},
    1024: {"arithmetic": 3, "needle": 2, "prose_fact": 2, "json": 1, "tool": 2, "echo": 1, "copy": 1},
    2048: {"needle": 3, "prose_fact": 2, "echo": 1, "squares": 1, "arithmetic": 1, "tool": 1},
    4096: {"needle": 3, "prose_fact": 2},
    8192: {"needle": 3, "prose_fact": 2},
}


def example(rng, T):
    """One row: (prompt ids, reply ids incl. the stop token), len(prompt) + len(reply) <= T."""
    mix = TASK_MIX[T]
    names = sorted(mix)
    name = rng.pick(names, [mix[n] for n in names])
    if name == "tool":
        offered, user, fname, args, result, final = tool_call(rng)
        m = marker(rng)
        msgs = [{"role": "user", "content": m + "\n" + user}]
        if rng.random() < 0.5:
            reply = chat.encode(chat.tool_call_text(fname, args)) + [chat.OBSERVATION]
        else:
            msgs += [{"role": "assistant", "content": "", "tool_calls": [(fname, args)]},
                     {"role": "tool", "content": result}]
            reply = chat.encode(final) + [chat.USER]
        prompt = chat.encode(chat.render_prompt(msgs, offered))
        return (prompt, reply) if len(prompt) + len(reply) <= T else example(rng, T)  # 3 tools: ~1.2K
    budget = int(T * rng.uniform(0.35, 0.95))
    for _ in range(8):  # a table or fact prompt that overshoots T is drawn again, smaller
        head, tail, reply_text = PLAIN_TASKS[name](rng, budget)
        reply = chat.encode(reply_text) + [chat.USER]
        fixed = len(chat.encode(chat.render_prompt([{"role": "user", "content": head + tail}]))) + len(reply)
        filler = prose(rng, max(0, min(T - fixed, budget - fixed))) if name in FILLED else ""
        prompt = chat.encode(chat.render_prompt([{"role": "user", "content": head + filler + tail}]))
        if len(prompt) + len(reply) <= T:
            return prompt, reply
        budget = int(budget * 0.8)
    raise ValueError(f"task {name} does not fit in {T} tokens")


def batch(seed, step, prompt_weight, max_len=8192, tokens_per_step=32768):
    """tokens [B][T] ids and loss weights [B][T] (lists) for the targets tokens[:, 1:] (weights[:, t]
    weighs predicting tokens[:, t + 1]); padding repeats <|endoftext|> with weight 0. Buckets longer
    than max_len are left out; B = tokens_per_step // T (32768 gives BUCKETS' rows)."""
    lengths = [T for T, _ in BUCKETS if T <= max_len]
    T = Draws(seed, step, "bucket").pick(lengths, BUCKET_P[:len(lengths)])
    B = max(1, tokens_per_step // T)
    tokens, weights = [], []
    for r in range(B):
        prompt, reply = example(Draws(seed, step, r), T)
        n = len(prompt) + len(reply)
        tokens.append(prompt + reply + [chat.END_OF_TEXT] * (T - n))
        weights.append([prompt_weight] * (len(prompt) - 1) + [1.0] * len(reply) + [0.0] * (T - n + 1))
    return tokens, weights
