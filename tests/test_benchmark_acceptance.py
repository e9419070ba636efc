"""benchmark/acceptance.py, unit by unit: exact values, so that a change in its arithmetic or text fails."""
import io
import urllib.request

import pytest

from benchmark import acceptance


def test_metrics_are_served_beside_the_openai_api():
    assert acceptance.metrics_url("http://vllm-sd.inference.svc.cluster.local:8000/v1") == \
        "http://vllm-sd.inference.svc.cluster.local:8000/metrics"
    assert acceptance.metrics_url("http://vllm-sd:8000/v1/") == "http://vllm-sd:8000/metrics"
    assert acceptance.metrics_url("http://vllm-sd:8000") == "http://vllm-sd:8000/metrics"
    # Behind a gateway the path is kept; only trailing slashes go.
    assert acceptance.metrics_url("http://gateway.example/engines/VLLM-X//") == "http://gateway.example/engines/VLLM-X/metrics"


class Spy:
    """Stands in for urllib.request.urlopen and keeps what each read asked for."""

    def __init__(self, body: bytes):
        self.body, self.calls = body, []

    def __call__(self, url, **kwargs):
        self.calls.append((url, kwargs))
        return io.BytesIO(self.body)


def test_a_scrape_reads_metrics_as_utf8_within_10_s_by_default(monkeypatch):
    spy = Spy("# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts — µ\n".encode())
    monkeypatch.setattr(urllib.request, "urlopen", spy)
    assert acceptance.scrape("http://vllm-sd:8000/v1") == "# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts — µ\n"
    acceptance.scrape("http://vllm-base:8000/v1", timeout_s=2.5)
    assert spy.calls == [("http://vllm-sd:8000/metrics", {"timeout": 10}), ("http://vllm-base:8000/metrics", {"timeout": 2.5})]


# A vLLM V1 /metrics page with two engines (counters summed over them), as prometheus_client writes it.
PAGE = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="Qwen/Qwen3-32B"} 60.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="Qwen/Qwen3-32B"} 40.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="Qwen/Qwen3-32B"} 1.7e+09
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="Qwen/Qwen3-32B"} 420.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="Qwen/Qwen3-32B"} 280.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="Qwen/Qwen3-32B"} 300.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="Qwen/Qwen3-32B"} 190.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen3-32B",position="0"} 55.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="Qwen/Qwen3-32B",position="0"} 35.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen3-32B",position="1"} 45.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="Qwen/Qwen3-32B",position="1"} 30.0
vllm:spec_decode_num_accepted_tokens_per_pos_total 7.0
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-32B"} 1.0
"""


def test_counters_are_summed_over_engines_and_positions_are_kept_apart():
    assert acceptance.parse_counters(PAGE) == {"drafts": 100.0, "draft_tokens": 700.0, "accepted": 490.0,
                                               "per_position": {"0": 90.0, "1": 75.0}}
    assert acceptance.parse_counters("vllm:num_requests_running 1.0\n") == {}


def test_deltas_are_taken_for_what_both_scrapes_have():
    before = {"drafts": 10.0, "draft_tokens": 70.0, "per_position": {"0": 5.0}}
    after = {"drafts": 30.0, "draft_tokens": 210.0, "accepted": 100.0, "per_position": {"1": 4.0, "0": 9.0}}
    # A position first counted during the case started from 0.
    assert acceptance.counter_deltas(before, after) == {"drafts": 20.0, "draft_tokens": 140.0,
                                                        "per_position": {"0": 4.0, "1": 4.0}}
    assert acceptance.counter_deltas({"accepted": 3.0}, {"drafts": 1.0, "per_position": {"0": 1.0}}) == {}
    assert acceptance.counter_deltas({"per_position": {"0": 1.0}}, {}) == {}


def test_positions_are_in_numeric_order_past_ten():
    after = {"per_position": {str(p): float(12 - p) for p in range(12)}}
    deltas = acceptance.counter_deltas({"per_position": {}}, after)
    assert list(deltas["per_position"].items()) == [(str(p), float(12 - p)) for p in range(12)]


def test_acceptance_from_the_servers_counters():
    deltas = {"drafts": 100.0, "draft_tokens": 700.0, "accepted": 490.0, "per_position": {"0": 90.0, "1": 75.0}}
    assert acceptance.from_counters(deltas) == {
        "acceptance_rate": 0.7, "mean_acceptance_length": 5.9, "per_position": [0.9, 0.75],
        "drafts": 100.0, "draft_tokens": 700.0, "accepted_tokens": 490.0, "note": None}


def test_without_a_drafts_counter_only_the_rate_is_known():
    # The legacy V0 engine counts draft and accepted tokens but not drafts.
    assert acceptance.from_counters({"draft_tokens": 70.0, "accepted": 49.0}) == {
        "acceptance_rate": 0.7, "mean_acceptance_length": None, "per_position": None,
        "drafts": None, "draft_tokens": 70.0, "accepted_tokens": 49.0, "note": None}


def test_what_the_server_does_not_count_is_said():
    nothing = {"acceptance_rate": None, "mean_acceptance_length": None, "per_position": None}
    assert acceptance.from_counters({"drafts": 3.0, "draft_tokens": 21.0}) == {
        **nothing, "drafts": 3.0, "draft_tokens": 21.0, "accepted_tokens": None, "note": "not exposed by this server"}
    assert acceptance.from_counters({"accepted": 4.0}) == {
        **nothing, "drafts": None, "draft_tokens": None, "accepted_tokens": 4.0, "note": "not exposed by this server"}
    assert acceptance.from_counters({"drafts": 0.0, "draft_tokens": 0.0, "accepted": 0.0}) == {
        **nothing, "drafts": 0.0, "draft_tokens": 0.0, "accepted_tokens": 0.0,
        "note": "the server counted no draft tokens during this case"}


def test_implied_acceptance_at_and_beyond_its_ends():
    assert acceptance.implied_acceptance(1.0, 7) == 0.0  # one token a step: nothing accepted
    assert acceptance.implied_acceptance(0.5, 7) == 0.0
    assert acceptance.implied_acceptance(8.0, 7) == 1.0  # k + 1 tokens a step: every draft token accepted
    assert acceptance.implied_acceptance(8.5, 7) == 1.0


def test_implied_acceptance_inverts_the_expected_tokens_per_step():
    a = acceptance.implied_acceptance(7.0, 7)
    assert 0.9 < a < 1 and acceptance.expected_tokens_per_step(a, 7) == pytest.approx(7.0, abs=1e-12)


@pytest.mark.parametrize("per_step, k", [(1.001, 1), (1.002, 7), (1.003, 3)])
def test_implied_acceptance_is_the_middle_of_the_last_of_60_halvings_of_0_to_1(per_step, k):
    # Below a = 2^-7 every bracket end j * 2^-60 is a float, so the bisection's answer is exact:
    # the middle of [j * 2^-60, (j + 1) * 2^-60], whose lower end falls short of `per_step` and
    # whose upper end reaches it.
    a = acceptance.implied_acceptance(per_step, k)
    j = a * 2 ** 60 - 0.5
    assert a < 2 ** -7 and j == int(j)
    assert acceptance.expected_tokens_per_step(a - 2 ** -61, k) < per_step <= acceptance.expected_tokens_per_step(a + 2 ** -61, k)


def test_tokens_per_step_from_one_stepped_request():
    # 5 tokens in 2 chunks: the prefill's token, then one step of 4.
    assert acceptance.tokens_per_step([5], [2]) == 4.0
    assert acceptance.tokens_per_step([5, 1], [2, 1]) == 4.0
    assert acceptance.tokens_per_step([1], [1]) is None  # no step after the prefill
