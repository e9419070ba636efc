"""A stand-in for LLMPerf's token_benchmark_ray.py (ray-project/llmperf f1d6bed), for the tests and the rehearsal.

Real LLMPerf cannot be installed from the package registries, and its code may not be copied into
this repository, so this is written from the behaviour recorded in docs/facts.md "LLMPerf, measured"
(F below) and from its code (the files and functions named below are in
ray-project/llmperf@f1d6bed). It keeps the interface the driver uses (flags, environment, output
files and keys) and reproduces the arithmetic and failure behaviour the driver has to survive.
Where the driver never goes it is simpler than f1d6bed: it ignores --metadata, does not flatten
nested sampling params, and does not spin on a target shorter than its prompt template (the
config rejects inputTokens below 40). It talks real
HTTP (`requests`, as LLMPerf does) and uses threads where LLMPerf uses one Ray actor per thread.
Bounded: every request has a timeout, and the run stops at --timeout.
"""
import argparse
import json
import os
import random
import re
import sys
import threading
import time
from pathlib import Path

import requests

PROMPT_TEMPLATE = "Randomly stream lines from the following text with {n} output tokens. Don't generate eos tokens:\n\n"
SUMMARY_METRICS = ("inter_token_latency_s", "ttft_s", "end_to_end_latency_s", "request_output_throughput_token_per_s",
                   "number_input_tokens", "number_output_tokens")  # metrics_summary's order


def llama_count(text):
    """Stand-in for `len(LlamaTokenizerFast(hf-internal-testing/llama-tokenizer).encode(text))`: a
    tokenizer that is not the served model's, plus 1 for the start token it adds, so an empty text
    counts 1 (F: "number_output_tokens = the Llama-2 tokenizer count ... plus 1"; token_benchmark_ray.py
    launch_request)."""
    return len(re.findall(r"\w+|[^\w\s]", text)) + 1


def sample_positive_int(mean, stddev):
    """src/llmperf/utils.py sample_random_positive_int: int(gauss) redrawn until positive."""
    while True:
        value = int(random.gauss(mean, stddev))
        if value > 0:
            return value


def build_prompt(mean_input, stddev_input, output_tokens, lines):
    """src/llmperf/utils.py randomly_sample_sonnet_lines_prompt: the template, then shuffled lines
    until the target length, the last cut by characters.
    Each line's count includes a start token, so prompts come out a few tokens short (F)."""
    target = sample_positive_int(mean_input, stddev_input)
    prompt = PROMPT_TEMPLATE.format(n=output_tokens)
    remaining = target - llama_count(prompt)
    random.shuffle(lines)
    while remaining > 0:
        for line in lines:
            if remaining - llama_count(line) < 0:
                prompt += line[:max(0, remaining)]
                remaining = 0
                break
            prompt += line
            remaining -= llama_count(line)
    return prompt, target


def send(body, prompt_tokens):
    """One request as LLMPerf's OpenAI client makes it
    (src/llmperf/ray_clients/openai_chat_completions_client.py llm_request)."""
    base = os.environ["OPENAI_API_BASE"]
    url = base + ("" if base.endswith("/") else "/") + "chat/completions"
    metrics = {"error_code": None, "error_msg": "", "inter_token_latency_s": 0, "ttft_s": 0, "end_to_end_latency_s": 0,
               "request_output_throughput_token_per_s": 0, "number_total_tokens": prompt_tokens,
               "number_output_tokens": 0, "number_input_tokens": prompt_tokens}
    start = time.monotonic()
    most_recent = start
    tokens_received, ttft, gaps, text = 0, 0, [], ""
    try:
        response = requests.post(url, json=body, stream=True, timeout=180,
                                 headers={"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"})
        if response.status_code != 200:
            metrics["error_msg"], metrics["error_code"] = response.text, response.status_code
            response.raise_for_status()
        for line in response.iter_lines(chunk_size=None):
            line = line.strip()
            if not line:
                continue
            line = line[6:]  # the "data: " prefix, unchecked (llm_request)
            if line == b"[DONE]":
                continue
            tokens_received += 1  # every other line counts, role chunk included (F; llm_request)
            data = json.loads(line)
            if "error" in data:
                metrics["error_msg"], metrics["error_code"] = data["error"]["message"], data["error"]["code"]
                raise RuntimeError(data["error"]["message"])
            delta = data["choices"][0]["delta"]  # IndexError on a usage-only chunk (llm_request)
            if delta.get("content"):
                now = time.monotonic()
                if not ttft:
                    ttft = now - start
                    gaps.append(ttft)  # ITL includes TTFT (F)
                else:
                    gaps.append(now - most_recent)
                most_recent = now
                text += delta["content"]
        total = time.monotonic() - start
        metrics.update(inter_token_latency_s=sum(gaps), ttft_s=ttft, end_to_end_latency_s=total,
                       request_output_throughput_token_per_s=tokens_received / total,
                       number_output_tokens=tokens_received, number_total_tokens=tokens_received + prompt_tokens)
    except Exception as error:  # llm_request: error_code stays -1 unless set before the raise
        metrics["error_msg"] = metrics["error_msg"] or str(error)
        metrics["error_code"] = metrics["error_code"] if metrics["error_code"] is not None else -1
        metrics["number_output_tokens"] = tokens_received
        print(f"Warning Or Error: {error}")
        print(metrics["error_code"])
    return metrics, text


def post_process(metrics, text):
    """token_benchmark_ray.py launch_request: the thread's overwrite. A failed request has empty
    text, which still counts 1, so the ITL division by 0 chunks raises ZeroDivisionError and kills
    the thread (F)."""
    output_tokens = llama_count(text)
    if output_tokens:
        metrics["inter_token_latency_s"] /= metrics["number_output_tokens"]
    else:
        metrics["inter_token_latency_s"] = 0
    metrics["number_output_tokens"] = output_tokens
    metrics["number_total_tokens"] = output_tokens + metrics["number_input_tokens"]
    metrics["request_output_throughput_token_per_s"] = output_tokens / metrics["end_to_end_latency_s"]
    return metrics


def run(args):
    random.seed(11111)  # get_token_throughput_latencies: every run builds the same prompts
    sampling = json.loads(args.additional_sampling_params)
    lines = (Path(__file__).parent / "src" / "llmperf" / "sonnet.txt").read_text().splitlines(keepends=True)
    prompts = []
    for _ in range(args.max_num_completed_requests):
        output_tokens = sample_positive_int(args.mean_output_tokens, args.stddev_output_tokens)
        prompts.append((build_prompt(args.mean_input_tokens, args.stddev_input_tokens, output_tokens, lines), output_tokens))
    completed, lock = [], threading.Lock()
    start = time.monotonic()

    def worker(index):
        # launch_request (one client per thread; src/llmperf/requests_launcher.py submits only to a
        # free one): one request at a time per thread; the count is read without the lock, so up to
        # concurrency - 1 extra requests are in flight when it is reached, and their results dropped (F).
        while time.monotonic() - start < args.timeout and len(completed) < args.max_num_completed_requests:
            (prompt, prompt_tokens), output_tokens = prompts[index]
            body = {"model": args.model, "messages": [{"role": "system", "content": ""}, {"role": "user", "content": prompt}],
                    "stream": True, "max_tokens": output_tokens, **sampling}
            metrics, text = send(body, prompt_tokens)
            with lock:
                if len(completed) < args.max_num_completed_requests:
                    completed.append(post_process(metrics, text))
                    index = (index + args.num_concurrent_requests) % len(prompts)

    threads = [threading.Thread(target=worker, args=(i % len(prompts),)) for i in range(args.num_concurrent_requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - start
    if not completed:
        # metrics_summary: pandas' df["error_code"] on an empty frame; uncaught, so exit status 1 and
        # no files (F).
        raise KeyError("error_code")
    return completed, summary(args, completed, elapsed, sampling)


def quantile(values, q):
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(args, completed, elapsed, sampling):
    """metrics_summary, flattened by src/llmperf/utils.py flatten_dict: metrics over non-errored
    rows; sample stddev, NaN for one value."""
    ok = [r for r in completed if r["error_code"] is None]
    result = {"version": "2023-08-31", "name": f"{file_stem(args)}_summary", "model": args.model,
              "mean_input_tokens": args.mean_input_tokens, "stddev_input_tokens": args.stddev_input_tokens,
              "mean_output_tokens": args.mean_output_tokens, "stddev_output_tokens": args.stddev_output_tokens,
              "num_concurrent_requests": args.num_concurrent_requests,
              **{f"additional_sampling_params_{k}": v for k, v in sampling.items()}}
    for metric in SUMMARY_METRICS:
        values = [r[metric] for r in ok]
        mean = sum(values) / len(values)
        for q in (25, 50, 75, 90, 95, 99):
            result[f"results_{metric}_quantiles_p{q}"] = quantile(values, q / 100)
        stddev = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5 if len(values) > 1 else float("nan")
        # numpy int64 min/max are written as strings (run_token_benchmark dumps with default=str;
        # observed running f1d6bed against a test server)
        integer = metric.startswith("number_")
        result.update({f"results_{metric}_mean": mean, f"results_{metric}_min": str(min(values)) if integer else min(values),
                       f"results_{metric}_max": str(max(values)) if integer else max(values), f"results_{metric}_stddev": stddev})
    result.update({
        "results_num_requests_started": len(completed), "results_error_rate": (len(completed) - len(ok)) / len(completed),
        "results_number_errors": len(completed) - len(ok), "results_error_code_frequency": "{}",
        "results_mean_output_throughput_token_per_s": sum(r["number_output_tokens"] for r in ok) / elapsed,
        "results_num_completed_requests": len(ok), "results_num_completed_requests_per_min": len(ok) / elapsed * 60,
        "timestamp": int(time.time()),
    })
    return result


def file_stem(args):
    """run_token_benchmark: runs of [^\\w\\d-] become "-", then runs of "-" collapse."""
    stem = re.sub(r"[^\w\d-]+", "-", f"{args.model}_{args.mean_input_tokens}_{args.mean_output_tokens}")
    return re.sub(r"-{2,}", "-", stem)


def main():
    parser = argparse.ArgumentParser()  # the flags of token_benchmark_ray.py
    parser.add_argument("--model", required=True)
    parser.add_argument("--mean-input-tokens", type=int, default=550)
    parser.add_argument("--stddev-input-tokens", type=int, default=150)
    parser.add_argument("--mean-output-tokens", type=int, default=150)
    parser.add_argument("--stddev-output-tokens", type=int, default=80)
    parser.add_argument("--num-concurrent-requests", type=int, default=10)
    parser.add_argument("--timeout", type=int, default=90)
    parser.add_argument("--max-num-completed-requests", type=int, default=10)
    parser.add_argument("--additional-sampling-params", default="{}")
    parser.add_argument("--results-dir", default="")
    parser.add_argument("--llm-api", default="openai")
    parser.add_argument("--metadata", default="")
    args = parser.parse_args()
    completed, result = run(args)
    if args.results_dir:  # run_token_benchmark: nothing is written without --results-dir
        out = Path(args.results_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{file_stem(args)}_summary.json").write_text(json.dumps(result, indent=4, default=str))
        (out / f"{file_stem(args)}_individual_responses.json").write_text(json.dumps(completed, indent=4))


if __name__ == "__main__":
    sys.exit(main())
