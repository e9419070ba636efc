"""Seed 002's distributed speculative decoding: a draft client and a target verification server.

The draft model proposes gamma tokens; the target scores them in one forward over gamma + 1
positions, accepts a prefix and returns the next token; every step is one gRPC round trip
(distributed/proto/verifier.proto). The draft server streams what is accepted through an
OpenAI-compatible endpoint, so the project's benchmark proxy and report can measure it
(docs/distributed.md).

- sampling.py: the speculative-sampling acceptance rule (Leviathan et al. 2023, Chen et al. 2023).
- backend.py: the interface the two backends implement; speculate.py: the loop over it.
- cpu.py: PyTorch + transformers, run and tested here; tiny.py builds its small local models.
- neuron.py: NxD Inference, not run here (it needs Trainium).
- target_server.py, draft_server.py: the two processes; config.py: their validated settings.
"""
