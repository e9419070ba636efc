"""Parse a stack's raw config into a StackSpec (stack.parse_stack_config), one module per section:
reader (how a section is read, ConfigError), platform, models, serving, benchmark, study. Imports
run one way: stack calls the sections, the sections use the reader."""
from .benchmark import BENCHMARK_KEYS
from .models import MODEL_KEYS, gated_models
from .platform import CAPACITY_KEYS, CLUSTER_KEYS, OPEN_TO_ALL
from .reader import ConfigError
from .serving import SERVING_KEYS, VARIANT_KEYS
from .stack import HUGGING_FACE_TOKEN_KEY, PAIRING_KEYS, PLATFORM_KEYS, parse_stack_config

__all__ = ["BENCHMARK_KEYS", "CAPACITY_KEYS", "CLUSTER_KEYS", "HUGGING_FACE_TOKEN_KEY", "MODEL_KEYS", "OPEN_TO_ALL",
           "PAIRING_KEYS", "PLATFORM_KEYS", "SERVING_KEYS", "VARIANT_KEYS", "ConfigError", "gated_models",
           "parse_stack_config"]
