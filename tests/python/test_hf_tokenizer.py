"""The C++ tokenizer.json loader (engine/text/bpe_tokenizer.h) against the `tokenizers` package.

Run by CTest as:  python3 test_hf_tokenizer.py --bin-dir <cmake build dir>

1. Trains two small byte-level BPE tokenizers (vocab 2000) with `tokenizers` on a generated
   corpus of English, code, JSON, numbers, CJK, emoji, accents, other scripts and white space:
   one with GLM-4's pre-tokenizer (Split on the cl100k pattern, then ByteLevel(use_regex=false)),
   one with plain ByteLevel (GPT-2's pattern). Both get GLM's special tokens and a few added
   tokens exercising lstrip, rstrip, normalized=true and an added token that prefixes a special.
2. Derives variants by editing the saved JSON: the single-digit cl100k pattern, ignore_merges,
   and ByteLevel(add_prefix_space=true).
3. For each variant, a few thousand generated strings (specials inside text, white-space edge
   cases, digit runs, contractions, mixed scripts, raw character soup) are encoded by
   tests/tokenize_tool and by `tokenizers`; every id list must be equal, with special parsing on
   and off. Decoding must equal `tokenizers`' decode (with and without skip_special), and give
   back the input when no stripping token swallowed white space.
4. Encodes 1 MB of corpus text and reports the throughput.

`tokenizers` is installed into .venv by ci/setup.sh; this test installs nothing.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

try:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError:
    print("test_hf_tokenizer: the `tokenizers` package is not installed in this Python "
          f"({sys.executable}); run ci/setup.sh, which installs it into .venv")
    sys.exit(1)

CL100K = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CL100K_SINGLE_DIGIT = CL100K.replace(r"\p{N}{1,3}", r"\p{N}")

GLM_SPECIALS = ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>",
                "<|user|>", "<|assistant|>", "<|observation|>", "<think>", "</think>",
                "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>",
                "</arg_value>", "/nothink"]
# Added tokens with the options `tokenizers` honours; "<think" (non-special, normalized) is a
# prefix of the special "<think>", so the two matching passes and parse_special=false show.
EXTRA_ADDED = [AddedToken("<mask>", special=True, lstrip=True),
               AddedToken("<|pad_r|>", special=True, rstrip=True),
               AddedToken("<think", special=False),
               AddedToken("hello world", special=False),
               AddedToken("<|code|>", special=False, normalized=False),
               AddedToken("ñandú", special=False)]
# Strings holding these do not decode back to themselves, in `tokenizers` either: the stripping
# tokens swallow white space, and "ñandú" is made only of byte-level characters (ñ, ú are the
# stand-ins for bytes F1, FA), so the ByteLevel decoder maps it to those two bytes.
NO_ROUND_TRIP = ["<mask>", "<|pad_r|>", "ñandú"]
ALL_ADDED = GLM_SPECIALS + [t.content for t in EXTRA_ADDED]

WORDS = """the of and to in is you that it he was for on are as with his they at be this have
from or one had by word but not what all were we when your can said there use an each which she
do how their if will up other about out many then them these so some her would make like him
into time has look two more write go see number no way could people my than first water been
call who oil its now find long down day did get come made may part model token server request
latency batch cache kernel tensor expert router attention layer weight gradient""".split()
CONTRACTED = ["it's", "don't", "we're", "I'll", "they've", "I'm", "he'd", "IT'S", "DON'T",
              "We'RE", "you'Ll", "o'clock", "rock'n'roll", "'tis", "'s", "'S", "x'ſ", "'ll'"]
ACCENTED = ["café", "naïve", "résumé", "Straße", "über", "façade", "año", "São Paulo", "Ærø",
            "crème brûlée", "Đà Nẵng", "tiếng Việt", "e\u0301", "a\u0308o\u0308", "ǅemal"]
SCRIPTS = ["Привет, мир", "Γειά σου κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया",
           "สวัสดีชาวโลก", "こんにちは世界", "カタカナ", "안녕하세요 세계", "你好，世界！", "大规模语言模型",
           "深度学习的推理服务", "Ελληνικά", "ქართული", "Հայերեն", "ᚠᚢᚦᚨᚱᚲ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𠀀𠀁𪚥"]
EMOJI = ["😀", "🙂", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "🇯🇵", "❤️", "🔥", "✅", "🚀", "🤖", "🧪", "☕", "🏳️‍🌈"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", "\u3000", "\u00a0", "\u2028",
          "\u0085", "\u200b", " \t \n", "\x0b", "\x0c", "\x1c"]
PUNCT = list(".,;:!?-_()[]{}<>/\\|@#$%^&*+=~`\"'") + ["...", "—", "–", "«", "»", "¿", "¡", "…",
                                                      "→", "∑", "∞", "€", "¥", "©", "™", "°"]


def number(rng):
    k = rng.randrange(6)
    if k == 0:
        return str(rng.randrange(10 ** rng.randrange(1, 12)))
    if k == 1:
        return f"{rng.uniform(-1e4, 1e4):.{rng.randrange(0, 6)}f}"
    if k == 2:
        return f"{rng.randrange(1900, 2100)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
    if k == 3:
        return f"{rng.randrange(10 ** 9):,}"
    if k == 4:
        return "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 25)))
    return rng.choice(["١٢٣", "४२", "½", "Ⅻ", "²", "①", "٣.١٤"]) + str(rng.randrange(100))


def english(rng):
    words = [rng.choice(WORDS + CONTRACTED) for _ in range(rng.randrange(3, 20))]
    if rng.random() < 0.5:
        words[0] = words[0].capitalize()
    text = " ".join(words)
    if rng.random() < 0.5:
        text += rng.choice([".", "!", "?", "...", ":", ";"])
    return text


def code(rng):
    name = rng.choice(WORDS) + "_" + rng.choice(WORDS)
    arg = rng.choice(WORDS)
    indent = rng.choice(["    ", "  ", "\t", "        "])
    return rng.choice([
        f"def {name}({arg}, n={rng.randrange(100)}):\n{indent}return [{arg} * i for i in range(n)]\n",
        f"for (int i = 0; i < {rng.randrange(1000)}; ++i) {{\n{indent}{name}[i] += {arg};\n}}\n",
        f"if ({arg} != nullptr && {arg}->size() >= {rng.randrange(64)}) {{ {name}(); }}",
        f"const auto {name} = std::make_unique<{arg.capitalize()}>(/*n=*/{rng.randrange(9)});",
        f"# {english(rng)}\n{name} = {{'{arg}': {number(rng)}, \"x\": None}}\n\n\n",
        f"SELECT {arg}, COUNT(*) FROM {name} WHERE id > {rng.randrange(99)} GROUP BY {arg};",
        f"<div class=\"{arg}\">{english(rng)}</div>\r\n",
        f"x = y ** 2 // 3 % 4 << 1 >> 2 ^ 0xFF & ~mask | (a && b) || !c;{indent}",
    ])


def json_text(rng):
    obj = {rng.choice(WORDS): rng.choice([number(rng), english(rng), None, True, [1, 2, 3],
                                          {"k": rng.choice(SCRIPTS)}])
           for _ in range(rng.randrange(1, 5))}
    return json.dumps(obj, ensure_ascii=rng.random() < 0.3, indent=rng.choice([None, 2, 4]))


def mixed(rng):
    parts = []
    for _ in range(rng.randrange(2, 10)):
        parts.append(rng.choice([rng.choice(WORDS), rng.choice(ACCENTED), rng.choice(SCRIPTS),
                                 rng.choice(EMOJI), number(rng), rng.choice(PUNCT),
                                 rng.choice(CONTRACTED)]))
        parts.append(rng.choice(SPACES) if rng.random() < 0.3 else rng.choice(["", " ", " "]))
    return "".join(parts)


def soup(rng):
    """Characters from all over Unicode, controls and marks included, in no order."""
    pools = [(0x20, 0x7F), (0x00, 0x20), (0x80, 0x250), (0x300, 0x370), (0x370, 0x530),
             (0x590, 0x700), (0x900, 0xE00), (0x1100, 0x1200), (0x2000, 0x2070), (0x2100, 0x2C00),
             (0x3000, 0x3100), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFE00, 0xFFFE),
             (0x1F300, 0x1FAFF), (0x10000, 0x10200), (0x1D400, 0x1D800), (0x20000, 0x20100),
             (0x11F00, 0x11F5A), (0x1C80, 0x1C90), (0xE0000, 0xE0080)]
    out = []
    for _ in range(rng.randrange(1, 40)):
        lo, hi = rng.choice(pools)
        cp = rng.randrange(lo, hi)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        out.append(chr(cp))
    return "".join(out)


def whitespace_case(rng):
    pieces = [rng.choice(SPACES) * rng.randrange(1, 4) if rng.random() < 0.6
              else rng.choice(WORDS + PUNCT + ["1", "42", "漢字", "'s"]) for _ in range(rng.randrange(1, 8))]
    return "".join(pieces)


def digits_case(rng):
    return rng.choice(["", " ", "x", "abc", "a1", "$", "-"]).join(
        "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 12)))
        for _ in range(rng.randrange(1, 4)))


def with_added(rng, text):
    """Inserts added tokens (mostly special) at random places, sometimes padded by spaces."""
    for _ in range(rng.randrange(1, 5)):
        pos = rng.randrange(len(text) + 1)
        tok = rng.choice(ALL_ADDED)
        pad_l = rng.choice(["", "", " ", "  ", "\n", "\u3000"])
        pad_r = rng.choice(["", "", " ", "  ", "\n"])
        text = text[:pos] + pad_l + tok + pad_r + text[pos:]
    return text


GENERATORS = [english, code, json_text, mixed, soup, whitespace_case, digits_case]


def corpus(rng, n):
    return [rng.choice(GENERATORS)(rng) for _ in range(n)]


def test_strings(rng):
    fixed = ["", " ", "  ", "\n", "\r\n", "a", "'", "''", "'s", "'S", "'ſ", "'ſx", "'Sx", "'LLama",
             "it's IT'S It'S",
             "don't  stop", "  leading", "trailing  ", "a  b   c", "a\n\nb", "x \n y", " \n\n ",
             "1", "12", "123", "1234", "1234567", " 123 4567 89", "x123y", "١٢٣٤", "½⅓",
             "[gMASK]<sop><|user|>\nhi<|assistant|><think></think>", "<think", "<think>",
             "<<think>>", "<|user|><|user|>", "hello world", "hello  world", "hello world!",
             "a <mask> b", "a   <mask>b", "<mask>", " <mask>", "a<|pad_r|>   b", "<|pad_r|>\n\nx",
             "<|code|>x", "ñandú ñandú", "x<think x", "\u3000\u3000漢字", "a\u00a0b", "e\u0301",
             "🙂🙂", "👨‍👩‍👧‍👦 family", "tab\tafter", "\t\tindented", "end\r\n"]
    out = list(fixed)
    for _ in range(3000):
        text = rng.choice(GENERATORS)(rng)
        if rng.random() < 0.25:
            text = with_added(rng, text)
        if rng.random() < 0.05:
            text = " ".join(rng.choice(GENERATORS)(rng) for _ in range(rng.randrange(5, 30)))
        out.append(text)
    return out


def train(pre_tokenizer, texts):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"])
    tok.train_from_iterator(texts, trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in GLM_SPECIALS])
    tok.add_tokens(EXTRA_ADDED)
    return json.loads(tok.to_str())


def variants(texts):
    glm = train(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(CL100K), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), texts)
    gpt2 = train(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), texts)
    single_digit = json.loads(json.dumps(glm))
    single_digit["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = CL100K_SINGLE_DIGIT
    ignore_merges = json.loads(json.dumps(glm))
    ignore_merges["model"]["ignore_merges"] = True
    prefix = json.loads(json.dumps(gpt2))
    prefix["pre_tokenizer"]["add_prefix_space"] = True
    return {"glm-cl100k": glm, "gpt2-bytelevel": gpt2, "cl100k-single-digit": single_digit,
            "glm-ignore-merges": ignore_merges, "gpt2-prefix-space": prefix}


def run_tool(tool, tokenizer_json, lines, *flags):
    proc = subprocess.run([tool, tokenizer_json, *flags], input="\n".join(lines) + "\n",
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"tokenize_tool {' '.join(flags)} failed ({proc.returncode}): "
                           f"{proc.stderr[-2000:]}")
    return proc.stdout.splitlines(), proc.stderr


def check_variant(name, spec, strings, tool, tmp):
    path = os.path.join(tmp, f"{name}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False)
    hf = Tokenizer.from_file(path)
    lines = [json.dumps(s) for s in strings]
    failures = 0
    compared = 0
    all_ids = {}
    for parse_special in (True, False):
        flags = () if parse_special else ("--no-special",)
        got = [json.loads(line) for line in run_tool(tool, path, lines, *flags)[0]]
        hf.encode_special_tokens = not parse_special
        want = [e.ids for e in hf.encode_batch(strings, add_special_tokens=False)]
        hf.encode_special_tokens = False
        assert len(got) == len(strings), f"{name}: {len(got)} outputs for {len(strings)} strings"
        for s, g, w in zip(strings, got, want):
            compared += 1
            if g != w:
                failures += 1
                if failures <= 10:
                    k = next((i for i, (a, b) in enumerate(zip(g, w)) if a != b), min(len(g), len(w)))
                    print(f"MISMATCH {name} parse_special={parse_special} {s!r}\n"
                          f"  first difference at {k}\n  c++: {g[k:k + 8]} {[hf.id_to_token(i) for i in g[k:k + 8]]}\n"
                          f"  hf:  {w[k:k + 8]} {[hf.id_to_token(i) for i in w[k:k + 8]]}")
        all_ids[parse_special] = want

    ids = all_ids[True]
    prefix_space = spec["pre_tokenizer"].get("add_prefix_space", False)
    id_lines = [json.dumps(i) for i in ids]
    rng = random.Random(7)
    vocab = hf.get_vocab_size(with_added_tokens=True)
    random_ids = [[rng.randrange(vocab) for _ in range(rng.randrange(0, 12))] for _ in range(500)]
    decode_failures = 0
    for skip in (False, True):
        flags = ("--decode", "--skip-special") if skip else ("--decode",)
        out = run_tool(tool, path, id_lines + [json.dumps(r) for r in random_ids], *flags)[0]
        for k, (seq, hexed) in enumerate(zip(ids + random_ids, out)):
            got = bytes.fromhex(hexed)
            want = hf.decode(seq, skip_special_tokens=skip)
            ok = got.decode("utf-8", errors="replace") == want
            if (k < len(strings) and not skip and not prefix_space
                    and not any(t in strings[k] for t in NO_ROUND_TRIP)):
                ok = ok and got == strings[k].encode("utf-8")  # round trip
            if not ok:
                decode_failures += 1
                if decode_failures <= 10:
                    print(f"DECODE MISMATCH {name} skip_special={skip} ids={seq}\n"
                          f"  c++: {got!r}\n  hf:  {want!r}")
    print(f"{name}: {compared} encodings compared, {failures} differ; "
          f"{2 * (len(ids) + len(random_ids))} decodes compared, {decode_failures} differ")
    return failures + decode_failures, path


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    args = parser.parse_args()
    tool = os.path.join(args.bin_dir, "tests", "tokenize_tool")
    if not os.path.exists(tool):
        raise FileNotFoundError(f"{tool} is missing; build the tokenize_tool target")

    rng = random.Random(20250901)
    texts = corpus(rng, 20000)
    strings = test_strings(rng)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for name, spec in variants(texts).items():
            f, paths[name] = check_variant(name, spec, strings, tool, tmp)
            failures += f

        megabyte = []
        size = 0
        while size < 1 << 20:
            megabyte.append(rng.choice(GENERATORS)(rng))
            size += len(megabyte[-1].encode("utf-8")) + 1
        _, stderr = run_tool(tool, paths["glm-cl100k"], [json.dumps("\n".join(megabyte))], "--time")
        print(f"glm-cl100k 1 MB {stderr.strip()}")

    if failures:
        print(f"FAIL: {failures} mismatches against tokenizers")
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
