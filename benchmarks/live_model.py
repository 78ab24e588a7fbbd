"""A live run against a real small model: how many of its plans the service keeps, and at what
cost. Not part of the test suite: on 2 cores a 1.5B model takes about 45 s a plan.

    .venv/bin/python benchmarks/live_model.py                     # build, fetch, serve, run
    .venv/bin/python benchmarks/live_model.py --model PATH.gguf   # a model file you have
    .venv/bin/python benchmarks/live_model.py --base-url URL      # a server already running

By default it installs llama-cpp-python (llama.cpp's OpenAI-compatible server, from PyPI) into
its own venv `.venv-llama`, compiled for this machine's CPU (GGML_NATIVE: the instructions this
CPU has, and no forced AVX-512, whose builds crash where it is missing), fetches
Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, ~1 GB, from Hugging Face) unless `--model` names a
file, and serves it on a free loopback port. Then it starts planner-arm against that server
and sends each goal of GOALS to POST /plan, one at a time, and prints per plan: source,
model calls, repairs by code, whether the final check had to be appended, seconds, and why it
fell back when it did (the `fallback_used` warning's reason); and in all: the share of plans
kept from the model, calls per plan, fallbacks by reason, repairs by kind, time per plan.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from load import HOST, ROOT, Child, Fleet, child_env, free_port, start_server

MODEL_REPO = "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
LLAMA_VENV = ROOT / ".venv-llama"
MODEL_START_SECONDS = 300.0
PLAN_TIMEOUT_SECONDS = 240  # the service's deadline for one plan: CPU inference is slow

# Twelve goals of different kinds and sizes; two carry constraints a plan can ignore.
GOALS: list[dict[str, object]] = [
    {"goal": "Fix the authentication bug where sessions expire too early, and add tests"},
    {"goal": "Build and deploy a REST API for the inventory service",
     "constraints": ["Deploy to Kubernetes"]},
    {"goal": "Research the best vector database for 10 million embeddings"},
    {"goal": "Write the user guide for the billing CLI"},
    {"goal": "Migrate the orders database from MySQL 5.7 to PostgreSQL 16",
     "constraints": ["No downtime longer than 5 minutes"]},
    {"goal": "Audit the payment service for leaked secrets and PII in logs"},
    {"goal": "Speed up the nightly report job, which takes 3 hours"},
    {"goal": "Add rate limiting to the public API gateway"},
    {"goal": "Upgrade the web app from Python 3.9 to Python 3.12"},
    {"goal": "Compare three CI providers and recommend one for a team of ten"},
    {"goal": "Refactor the checkout module into smaller services"},
    {"goal": "Set up monitoring and alerting for the search cluster"},
]  # fmt: skip


def llama_python() -> Path:
    """The venv with llama-cpp-python's server, built for this CPU on first use."""
    python = LLAMA_VENV / "bin" / "python"
    if not python.exists():
        print("creating .venv-llama", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(LLAMA_VENV)], check=True)
    probe = subprocess.run([str(python), "-c", "import llama_cpp.server"], capture_output=True)
    if probe.returncode != 0:
        print("building llama-cpp-python for this CPU (several minutes on 2 cores)", flush=True)
        env = dict(os.environ, CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_AVX512=OFF")
        pip = [str(python), "-m", "pip", "install", "--no-binary", "llama-cpp-python"]
        subprocess.run([*pip, "llama-cpp-python[server]", "huggingface-hub"], env=env, check=True)
    return python


def model_file(python: Path, given: str | None) -> str:
    if given:
        return given
    print(f"fetching {MODEL_REPO}/{MODEL_FILE} (about 1 GB, once)", flush=True)
    code = (
        "from huggingface_hub import hf_hub_download; "
        f"print(hf_hub_download({MODEL_REPO!r}, {MODEL_FILE!r}))"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def start_model(fleet: Fleet, python: Path, path: str) -> str:
    port = free_port()
    argv = [str(python), "-m", "llama_cpp.server", "--model", path, "--host", HOST]
    argv += ["--port", str(port), "--n_ctx", "4096", "--model_alias", "local"]
    child = fleet.start("llama", argv, dict(os.environ))
    url = f"http://{HOST}:{port}/v1"
    wait_for_models(child, url)
    return url


def wait_for_models(child: Child, url: str) -> None:
    give_up = time.monotonic() + MODEL_START_SECONDS
    while time.monotonic() < give_up:
        child.check_alive()
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):  # noqa: S310 - loopback
                return
        except OSError:
            time.sleep(1)
    raise RuntimeError(f"the model server did not answer within {MODEL_START_SECONDS:.0f} s")


def served_model(url: str) -> str | None:
    """The first model the server lists; None if it lists none (the service's default then)."""
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=10) as answer:  # noqa: S310
            return str(json.load(answer)["data"][0]["id"])
    except (OSError, ValueError, LookupError):
        return None


def plan(port: int, body: dict[str, object]) -> tuple[dict[str, Any], float]:
    request = urllib.request.Request(
        f"http://{HOST}:{port}/plan",
        data=json.dumps({**body, "options": {"use_cache": False}}).encode(),
        headers={"content-type": "application/json"},
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=PLAN_TIMEOUT_SECONDS + 30) as answer:  # noqa: S310
        return json.load(answer), time.perf_counter() - started


# The sources of a plan kept from the model (the rest came from the rule-based planner).
MODEL_SOURCES = {"llm", "model"}


def fallback_reason(meta: dict[str, Any]) -> str | None:
    """Why the rule-based planner answered: the `fallback_used` warning's detail, whose first
    word is the reason code (`invalid_plan`, `deadline`, `llm_unavailable`, ...)."""
    for note in meta["warnings"]:
        if note["code"] == "fallback_used":
            return str(note["detail"]) or "fallback_used"
    return None


def report(results: list[tuple[str, dict[str, Any], float]]) -> None:
    repairs: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    kept = calls = appended = 0
    for goal, answer, seconds in results:
        meta = answer["metadata"]
        codes = [note["code"] for note in meta["repairs"]]
        repairs.update(codes)
        kept += meta["source"] in MODEL_SOURCES
        calls += meta["attempts"]
        appended += "judge_step_appended" in codes
        warnings = ",".join(note["code"] for note in meta["warnings"]) or "-"
        print(
            f"{meta['source']:<8} calls {meta['attempts']}  {seconds:6.1f} s  "
            f"steps {len(answer['plan'])}  warnings {warnings}  repairs {','.join(codes) or '-'}"
            f"\n         {goal[:90]}"
        )
        reason = fallback_reason(meta)
        if meta["source"] not in MODEL_SOURCES and reason is not None:
            reasons[reason.split(":", 1)[0].strip()] += 1
            print(f"         fell back: {reason[:160]}")
    n = len(results)
    print(f"\nkept from the model: {kept}/{n} ({kept / n:.0%})   calls per plan: {calls / n:.2f}")
    if reasons:
        print("fell back because: " + ", ".join(f"{r} {c}" for r, c in reasons.most_common()))
    print(f"final check appended: {appended}/{n}")
    print(f"time per plan: median {statistics.median(s for *_, s in results):.1f} s")
    print(
        "repairs by kind: " + ", ".join(f"{code} {count}" for code, count in repairs.most_common())
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a GGUF file to serve instead of fetching Qwen")
    parser.add_argument("--base-url", help="an OpenAI-compatible server already running")
    parser.add_argument("--goals", type=int, default=len(GOALS), help="the first N goals only")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="planner-live-") as log_dir:
        fleet = Fleet(Path(log_dir))
        try:
            url = options.base_url
            if url is None:
                python = llama_python()
                url = start_model(fleet, python, model_file(python, options.model))
            env = child_env(
                OPENAI_BASE_URL=url, TIMEOUT_SECONDS=str(PLAN_TIMEOUT_SECONDS), LOG_LEVEL="WARNING"
            )
            name = served_model(url)
            if name is not None:
                env["LLM_MODEL"] = name
            # A slow CPU model: one call may take most of the deadline.
            env["PLANNER_MODEL__CALL_TIMEOUT_SECONDS"] = str(PLAN_TIMEOUT_SECONDS)
            serve = [sys.executable, "-m", "planner_arm", "serve"]
            _, port, _ = start_server(fleet, "service", serve, env)
            results = []
            for body in GOALS[: options.goals]:
                answer, seconds = plan(port, body)
                results.append((str(body["goal"]), answer, seconds))
        finally:
            fleet.stop_all()
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
