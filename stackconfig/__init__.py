"""Typed, validated stack configuration (see parse.parse_stack_config)."""
from .model import PlatformSpec, StackSpec, Variant, pack_device_groups
from .parse import HUGGING_FACE_TOKEN_KEY, ConfigError, parse_stack_config

__all__ = ["ConfigError", "HUGGING_FACE_TOKEN_KEY", "PlatformSpec", "StackSpec", "Variant", "pack_device_groups",
           "parse_stack_config"]
