"""A quick held-out check after training: greedy replies of the torch model to curriculum prompts.

Prompts come from curriculum.example with a seed stream no training batch uses (Draws(seed, "held-out", i)); the
reply is generated greedily (full recompute per token, no MTP) until a stop id (<|endoftext|>,
<|user|>, <|observation|>) or max_new tokens, and graded the way workloads/grader.cpp grades the
probes: arithmetic on the last 'Answer: <n>', needle and fact replies by containment of the expected
value; other tasks by exact match of the reply. This is a training-side signal only; the quality gate
is the engine's run of workloads/quality-probes.json.
"""
import re
import time

import torch

import byte_chat as chat
import curriculum

STOP = {chat.END_OF_TEXT, chat.USER, chat.OBSERVATION}
ANSWER = re.compile(r"Answer\s*:\s*\**\s*(-?\s*[0-9][0-9,]*)")


def task_of(prompt_text, reply_text):
    if "a*b - c*d + e" in prompt_text:
        return "arithmetic"
    if "Table 2 (code -> value)" in prompt_text:
        return "needle"
    if "what is the code of item" in prompt_text:
        return "prose_fact"
    if "<tools>" in prompt_text:
        return "tool"
    if "JSON object that follows this schema" in prompt_text:
        return "json"
    if "repeat the following text" in prompt_text or "backwards" in prompt_text:
        return "copy"
    return "other"


def passed(task, want, got):
    if task == "arithmetic":
        a, b = ANSWER.findall(want), ANSWER.findall(got)
        return bool(b) and b[-1].replace(" ", "").replace(",", "") == a[-1]
    if task in ("needle", "prose_fact"):
        return want.split()[-1] in got
    return got.strip() == want.strip()


@torch.no_grad()
def greedy(model, prompt, max_new, device):
    ids = list(prompt)
    for _ in range(max_new):
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device.startswith("cuda")):
            logits, _, _, _ = model(torch.tensor([ids], device=device), with_mtp=False)
        nxt = int(logits[0, -1].float().argmax())
        ids.append(nxt)
        if nxt in STOP:
            break
    return ids[len(prompt):]


def run(model, seed, n, device, max_len=1024, max_new=200, deadline=None):
    """Returns {task: [passed, tried]} and a few sample lines; prompts not started by `deadline`
    (time.time()) are skipped."""
    was_sparse = model.sparse
    model.sparse = True
    scores, samples = {}, []
    for i in range(n):
        if deadline is not None and time.time() > deadline:
            break
        T = 512 if i % 2 == 0 else min(1024, max_len)
        prompt, reply = curriculum.example(curriculum.Draws(seed, "held-out", i), T)
        got = greedy(model, prompt, min(max_new, len(reply) + 16), device)
        p_text, want, got_text = chat.decode(prompt), chat.decode(reply), chat.decode(got)
        task = task_of(p_text, want)
        ok = passed(task, want, got_text)
        s = scores.setdefault(task, [0, 0])
        s[0] += int(ok)
        s[1] += 1
        if len(samples) < 6:
            samples.append({"task": task, "want": want[:120], "got": got_text[:120], "ok": ok})
    model.sparse = was_sparse
    return scores, samples
