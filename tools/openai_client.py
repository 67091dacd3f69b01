#!/usr/bin/env python3
"""Drive `tessera serve` with the official `openai` Python client, the way an
application would: list the models, then a chat completion and a text
completion, each non-streaming and streaming, printing what comes back (text,
finish reason, usage and tessera's predicted NPU milliseconds). Exits non-zero
if an answer is malformed. Not needed by CI (tests/cli/serve.sh drives the
server with curl); it shows the server works with the real client.

Usage (in a virtualenv with tools/requirements-openai.txt):
  tessera serve DEPLOY_DIR --port 8080 &
  python tools/openai_client.py --base-url http://127.0.0.1:8080/v1 \
      [--question "What is the capital of France?"] [--max-tokens 48]
"""
import argparse
import sys
import time

from openai import OpenAI


def timing(extra):
    """The `tessera` extension field: predicted NPU time (a timing-model
    prediction, not a measurement) next to the host's simulation time."""
    t = (extra or {}).get("tessera") or {}
    if not t:
        return "no tessera timing field"
    return ("NPU predicted: prefill {:.3f} ms + decode {:.3f} ms (timing model); "
            "host simulation {:.0f} ms".format(t["npu_predicted_prefill_ms"],
                                               t["npu_predicted_decode_ms"], t["host_ms"]))


def check(cond, what):
    if not cond:
        sys.exit("openai_client: " + what)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    ap.add_argument("--question", default="What is the capital of France?")
    ap.add_argument("--prompt", default="The three primary colors are")
    ap.add_argument("--max-tokens", type=int, default=48)
    a = ap.parse_args()
    client = OpenAI(base_url=a.base_url, api_key="not-needed")

    models = client.models.list()
    model = models.data[0].id
    print(f"models: {[m.id for m in models.data]}")
    messages = [{"role": "user", "content": a.question}]

    print(f"\n== chat.completions (non-streaming), user: {a.question}")
    t0 = time.time()
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=a.max_tokens,
                                       temperature=0)
    text = r.choices[0].message.content
    print(f"assistant: {text}")
    print(f"finish_reason={r.choices[0].finish_reason} usage={r.usage.model_dump()}")
    print(timing(r.model_extra) + f"; client wall {time.time() - t0:.1f} s")
    check(r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, "usage does not add up")

    print(f"\n== chat.completions (streaming), user: {a.question}")
    t0 = time.time()
    pieces, last = [], None
    print("assistant: ", end="", flush=True)
    for chunk in client.chat.completions.create(model=model, messages=messages, max_tokens=a.max_tokens,
                                                temperature=0, stream=True):
        delta = chunk.choices[0].delta.content or ""
        pieces.append(delta)
        print(delta, end="", flush=True)
        last = chunk
    print()
    print(f"{len(pieces)} chunks; finish_reason={last.choices[0].finish_reason} usage={last.usage.model_dump()}")
    print(timing(last.model_extra) + f"; client wall {time.time() - t0:.1f} s")
    check("".join(pieces) == text, "the streamed text differs from the non-streamed one (both greedy)")

    print(f"\n== completions (non-streaming), prompt: {a.prompt!r}")
    r = client.completions.create(model=model, prompt=a.prompt, max_tokens=16, temperature=0)
    print(f"text: {r.choices[0].text!r}")
    print(f"finish_reason={r.choices[0].finish_reason} usage={r.usage.model_dump()}; {timing(r.model_extra)}")

    print(f"\n== completions (streaming), prompt: {a.prompt!r}")
    pieces = []
    for chunk in client.completions.create(model=model, prompt=a.prompt, max_tokens=16, temperature=0,
                                           stream=True):
        pieces.append(chunk.choices[0].text)
        last = chunk
    print(f"text: {''.join(pieces)!r} ({len(pieces)} chunks)")
    print(f"finish_reason={last.choices[0].finish_reason} usage={last.usage.model_dump()}")
    check("".join(pieces) == r.choices[0].text, "streamed completion differs from the non-streamed one")
    print("\nopenai_client: ok")


if __name__ == "__main__":
    main()
