"""Typed, validated stack configuration (see parse.parse_stack_config)."""
from .model import StackSpec, Variant, pack_device_groups
from .parse import HUGGING_FACE_TOKEN_KEY, ConfigError, parse_stack_config

__all__ = ["ConfigError", "HUGGING_FACE_TOKEN_KEY", "StackSpec", "Variant", "pack_device_groups", "parse_stack_config"]
