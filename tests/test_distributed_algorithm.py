"""distributed/: the speculation algorithm on the CPU backend, with small local Llama models.

Each test fails for a wrapper around the target's own generation: it counts the target's forward
passes, the acceptance per step, the target's KV cache length, or the distribution of what is
emitted against the target's exact one.
"""
from __future__ import annotations

import math

import pytest
import torch

from distributed.backend import UnknownSession, VerifyError
from distributed.sampling import Sampling, accept, distribution
from distributed.speculate import speculate
from tests.distributed_models import MAX_CONTEXT, draft, nearby_model, target, target_model, unrelated_model

torch.set_num_threads(1)  # the machine is shared; these models are too small to gain from more
PROMPT = [1, 5, 9, 30, 41, 7]
GAMMA = 4
GREEDY = Sampling()


def run(draft_model, target_backend, *, sampling=GREEDY, tokens=60, gamma=GAMMA, prompt=PROMPT):
    steps = list(speculate(draft(draft_model).session(), target_backend, "request", prompt, max_new_tokens=tokens,
                           gamma=gamma, sampling=sampling, max_context=MAX_CONTEXT))
    return [t for step in steps for t in step.tokens], steps


def target_alone(tokens: int, prompt=PROMPT) -> list[int]:
    """The target's greedy output by transformers' own generate, token by token."""
    model = target_model()
    out = model.generate(torch.tensor([prompt]), max_new_tokens=tokens, do_sample=False, pad_token_id=0,
                         attention_mask=torch.ones(1, len(prompt), dtype=torch.long))
    return out[0, len(prompt):].tolist()


def test_greedy_output_is_the_targets_own_with_fewer_target_forwards_than_tokens():
    verifier = target()
    emitted, steps = run(nearby_model(noise=0.002), verifier)
    assert emitted == target_alone(60)
    rejected = [s for s in steps if s.accepted < GAMMA]
    assert rejected, "the draft must disagree somewhere, or the rollback is never exercised"
    assert verifier.forward_passes == len(steps) < len(emitted) / 2


def test_acceptance_is_gamma_every_step_when_the_draft_is_the_target():
    for sampling in (Sampling(), Sampling(temperature=1.0, seed=7)):
        verifier = target()
        emitted, steps = run(target_model(), verifier, sampling=sampling, tokens=50)
        assert [s.accepted for s in steps] == [GAMMA] * len(steps)
        assert len(emitted) == 50 and verifier.forward_passes == len(steps) == math.ceil(50 / (GAMMA + 1))


def test_acceptance_is_below_gamma_when_the_draft_is_another_model():
    for draft_model, most in ((nearby_model(noise=0.002), GAMMA * 0.9), (unrelated_model(), GAMMA * 0.2)):
        _, steps = run(draft_model, target())
        mean = sum(s.accepted for s in steps) / len(steps)
        assert 0 <= mean < most
    _, steps = run(nearby_model(noise=0.002), target())
    assert sum(s.accepted for s in steps) > 0


def test_a_rejection_rolls_the_targets_kv_cache_back_to_the_accepted_length():
    verifier = target()
    first = verifier.verify("s", 0, PROMPT, [0, 0, 0, 0], None, Sampling())
    greedy = first.next_token
    # Drafts the target agrees with for one position, then tokens it does not choose.
    probe = verifier.verify("probe", 0, PROMPT + [greedy], [0, 0, 0, 0], None, Sampling())
    wrong = (probe.next_token + 1) % 320 if probe.accepted == 0 else 0
    second = verifier.verify("s", first.cached_length, [greedy], [probe.next_token, wrong, wrong, wrong], None, Sampling())
    assert second.accepted == 1
    assert verifier.session_length("s") == second.cached_length == len(PROMPT) + 1 + 1
    # What follows equals a target that never saw the rejected drafts.
    context = PROMPT + [greedy, probe.next_token, second.next_token]
    after = verifier.verify("s", second.cached_length, [second.next_token], [0, 1, 2, 3], None, Sampling())
    fresh = target().verify("fresh", 0, context, [0, 1, 2, 3], None, Sampling())
    assert (after.accepted, after.next_token) == (fresh.accepted, fresh.next_token)
    assert verifier.session_length("s") == fresh.cached_length


def test_a_rejection_rolls_the_drafts_kv_cache_back_too():
    session = draft(target_model()).session()
    drafts, _ = session.propose(PROMPT, GAMMA, Sampling(), torch.Generator())
    assert session.cache.get_seq_length() == len(PROMPT) + GAMMA - 1
    session.propose(PROMPT + drafts[:1] + [drafts[1] + 1], GAMMA, Sampling(), torch.Generator())
    # Rolled back to PROMPT + the accepted draft, then the new token and GAMMA - 1 drafts appended.
    assert session.cached[:len(PROMPT) + 2] == PROMPT + drafts[:1] + [drafts[1] + 1]
    assert session.cache.get_seq_length() == len(PROMPT) + 2 + GAMMA - 1


def total_variation(a: torch.Tensor, b: torch.Tensor) -> float:
    return 0.5 * float((a - b).abs().sum())


def tv_bound(p: torch.Tensor, n: int, delta: float) -> float:
    """A bound the empirical total variation of n draws from p exceeds with probability < delta:
    its mean is at most 0.5 * sum_i sqrt(p_i (1 - p_i) / n) (Jensen on each |count/n - p_i|), and
    it moves by at most 1/n when one draw changes, so by McDiarmid's inequality it exceeds its mean
    by t with probability at most exp(-2 n t^2)."""
    return 0.5 * float((p * (1 - p)).sqrt().sum()) / math.sqrt(n) + math.sqrt(math.log(1 / delta) / (2 * n))


def test_the_acceptance_rule_emits_the_targets_distribution():
    p = torch.tensor([0.05, 0.40, 0.10, 0.30, 0.15, 0.00])
    q = torch.tensor([0.30, 0.10, 0.30, 0.10, 0.10, 0.10])
    generator, n = torch.Generator().manual_seed(0), 20000
    counts = torch.zeros(6)
    for _ in range(n):
        drafted = int(torch.multinomial(q, 1, generator=generator))
        accepted, token = accept(torch.stack([p, p]), [drafted], q[None], Sampling(temperature=1.0), generator)
        counts[drafted if accepted else token] += 1
    bound = tv_bound(p, n, delta=1e-6)
    assert total_variation(counts / n, p) < bound
    # The bound is tight enough to catch plausible mistakes: the draft's own distribution, and
    # resampling from p instead of norm(max(0, p - q)) after a rejection.
    accept_probability = torch.minimum(torch.ones(6), p / q)
    resampled_from_p = q * accept_probability + (1 - float((q * accept_probability).sum())) * p
    assert min(total_variation(q, p), total_variation(resampled_from_p, p)) > 2 * bound


def test_sampled_output_follows_the_targets_distribution_over_the_first_tokens():
    """Temperature 1, an unrelated draft (its distributions are far from the target's), 400
    requests of 2 tokens, gamma 2: the marginal of each emitted position against the target's exact
    one, computed by enumerating the first token."""
    vocab, std, prompt, n = 8, 0.1, [1, 2, 3], 400
    target_m, draft_m = target_model(vocab, std), unrelated_model(vocab, std)

    def exact(model):
        with torch.inference_mode():
            first = torch.softmax(model(torch.tensor([prompt])).logits[0, -1], -1)
            after = torch.softmax(model(torch.tensor([prompt + [t] for t in range(vocab)])).logits[:, -1], -1)
        return first, first @ after

    p, q = exact(target_m), exact(draft_m)
    verifier, proposer = target(target_m), draft(draft_m)
    counts = torch.zeros(2, vocab)
    for seed in range(n):
        steps = speculate(proposer.session(), verifier, f"r{seed}", prompt, max_new_tokens=2, gamma=2,
                          sampling=Sampling(temperature=1.0, seed=seed), max_context=MAX_CONTEXT)
        emitted = [t for step in steps for t in step.tokens]
        counts[0, emitted[0]] += 1
        counts[1, emitted[1]] += 1
    for position in range(2):
        bound = tv_bound(p[position], n, delta=1e-6)
        assert total_variation(q[position], p[position]) > 2 * bound  # emitting the draft's tokens would fail
        assert total_variation(counts[position] / n, p[position]) < bound, position
    assert verifier.sessions == {}, "every request released its session"


def test_the_distribution_is_the_one_both_models_sample_from():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0]])
    assert distribution(logits, Sampling()).tolist() == [[1.0, 0.0, 0.0, 0.0]]
    nucleus = distribution(logits, Sampling(temperature=1.0, top_p=0.7))
    full = torch.softmax(logits, -1)
    assert nucleus[0, 2:].tolist() == [0.0, 0.0] and torch.allclose(nucleus[0, :2], full[0, :2] / full[0, :2].sum())


@pytest.mark.parametrize("drafts, key", [([], "gamma"), ([1, 2, 3, 4, 5], "gamma"), ([400], "tokens")])
def test_the_target_refuses_a_bad_request_naming_the_field(drafts, key):
    with pytest.raises(VerifyError) as refused:
        target(speculation_length=5).verify("s", 0, PROMPT, drafts, None, Sampling())
    assert refused.value.key == key


def test_a_session_the_target_does_not_hold_is_refused():
    with pytest.raises(UnknownSession) as refused:
        target().verify("lost", 12, [3], [1, 2], None, Sampling())
    assert refused.value.key == "session"
