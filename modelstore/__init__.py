"""The model store's own pod code: preparing a model once (prepare.py: hub.py downloads and
verifies, fp8.py rescales for Neuron) and publishing compiled artifacts without races
(publish.py), both through the S3 API (objects.py). It runs in small Python pods with a
hash-locked set of dependencies (requirements.lock) and imports no other part of the project; the
store's names are declared here (layout.py), and the prefixes it writes are stackconfig/store.py's,
passed in as arguments."""
